//! Who shares a node: the ranks of a communicator grouped by node, one
//! leader per node (its lowest rank). Known at creation for a one-node
//! communicator; found by the first exchange (`exchange::layout`) of one
//! that spans nodes.

use std::ffi::c_int;

/// A communicator's layout seen from one rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Ranks (in the communicator) on our node, ascending; `local[0]` leads.
    pub local: Vec<c_int>,
    /// Our index in `local`.
    pub me: usize,
    /// Each node's leader, nodes in order of their lowest rank.
    pub leaders: Vec<c_int>,
    /// Our node's index in `leaders`.
    pub node: usize,
    /// Ranks on the most populous node (`auto` resolves by it).
    pub largest: usize,
}

/// Ranks on the most populous node, from the node id of every rank.
pub fn most_populous(nodes: &[u32]) -> usize {
    let mut count = std::collections::HashMap::new();
    for n in nodes {
        *count.entry(n).or_insert(0usize) += 1;
    }
    count.into_values().max().unwrap_or(0)
}

impl Layout {
    /// Every rank on one node.
    pub fn single(rank: c_int, size: c_int) -> Layout {
        Layout {
            local: (0..size).collect(),
            me: rank as usize,
            leaders: vec![0],
            node: 0,
            largest: size as usize,
        }
    }

    /// From the node id of every rank (`nodes[r]` for rank r).
    pub fn from_nodes(nodes: &[u32], rank: c_int) -> Layout {
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
        Layout {
            me: local.iter().position(|&r| r == rank).expect("own rank"),
            node: seen.iter().position(|&n| n == mine).expect("own node"),
            local,
            leaders,
            largest: most_populous(nodes),
        }
    }

    pub fn is_leader(&self) -> bool {
        self.me == 0
    }
}

