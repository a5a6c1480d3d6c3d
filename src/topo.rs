//! Who shares a node: the ranks of a communicator grouped by node, one
//! leader per node (its lowest rank). Found on the first barrier of a
//! communicator that spans nodes, never at creation.

use std::ffi::c_int;

use crate::core::toggle;

/// A communicator's layout seen from one rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topo {
    /// Ranks (in the communicator) on our node, ascending; `local[0]` leads.
    pub local: Vec<c_int>,
    /// Our index in `local`.
    pub me: usize,
    /// Each node's leader, nodes in order of their lowest rank.
    pub leaders: Vec<c_int>,
    /// Our node's index in `leaders`.
    pub node: usize,
    /// Toggle wires for the local ranks.
    pub shape: toggle::Shape,
}

impl Topo {
    /// Every rank on one node.
    pub fn single(rank: c_int, size: c_int) -> Topo {
        Topo {
            local: (0..size).collect(),
            me: rank as usize,
            leaders: vec![0],
            node: 0,
            shape: toggle::Shape::new(size as usize),
        }
    }

    /// From the node id of every rank (`nodes[r]` for rank r).
    pub fn from_nodes(nodes: &[u32], rank: c_int) -> Topo {
        let mine = nodes[rank as usize];
        let local: Vec<c_int> = (0..nodes.len() as c_int).filter(|&r| nodes[r as usize] == mine).collect();
        let mut leaders: Vec<c_int> = Vec::new();
        let mut seen: Vec<u32> = Vec::new();
        for (r, &n) in nodes.iter().enumerate() {
            if !seen.contains(&n) {
                seen.push(n);
                leaders.push(r as c_int);
            }
        }
        Topo {
            me: local.iter().position(|&r| r == rank).expect("own rank"),
            node: seen.iter().position(|&n| n == mine).expect("own node"),
            shape: toggle::Shape::new(local.len()),
            local,
            leaders,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.me == 0
    }
}

/// This host's name (per UTS namespace, so fake nodes differ too).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::from("?");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Gives each distinct name an id, in order of first appearance.
pub fn node_ids(names: &[Vec<u8>]) -> Vec<u32> {
    let mut seen: Vec<&[u8]> = Vec::new();
    names
        .iter()
        .map(|n| match seen.iter().position(|s| *s == &n[..]) {
            Some(i) => i as u32,
            None => {
                seen.push(n);
                (seen.len() - 1) as u32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uneven_nodes() {
        // 1/2/1 ranks: a, b, b, c.
        let ids = node_ids(&[b"a".to_vec(), b"b".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(ids, vec![0, 1, 1, 2]);
        let t = Topo::from_nodes(&ids, 2);
        assert_eq!((t.local.clone(), t.me, t.leaders.clone(), t.node), (vec![1, 2], 1, vec![0, 1, 3], 1));
        assert!(!t.is_leader());
        let t = Topo::from_nodes(&ids, 3);
        assert_eq!((t.local.clone(), t.me, t.node), (vec![3], 0, 2));
        assert!(t.is_leader());
        // Interleaved placement: a b a b.
        let t = Topo::from_nodes(&[0, 1, 0, 1], 2);
        assert_eq!((t.local, t.me, t.leaders, t.node), (vec![0, 2], 1, vec![0, 1], 0));
    }
}
