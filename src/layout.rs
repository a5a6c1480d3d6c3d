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
    /// Each node's leader, nodes in order of their lowest rank: on leaders,
    /// who alone talk between nodes; empty on the other ranks (a
    /// communicator of one rank per node would otherwise send every rank
    /// every leader). `NO_LEADER` for a node whose leader this one never
    /// talks to (the layout exchange sends a leader only its partners:
    /// `inter::partners`).
    pub leaders: Vec<c_int>,
    /// Nodes the communicator spans.
    pub nodes: usize,
    /// Our node's index (in `leaders`, on a leader).
    pub node: usize,
    /// Ranks on the most populous node (`auto` resolves by it).
    pub largest: usize,
}

/// In `Layout::leaders`: a leader not known here. Not -1, which is MPI's
/// ANY_SOURCE: a receive from it by mistake would match anyone; this one
/// is an invalid rank, an error.
pub const NO_LEADER: c_int = c_int::MIN;

/// The ranks of each node, nodes in order of their lowest rank, from the
/// node id of every rank (`nodes[r]` for rank r; any ids).
pub fn group(nodes: &[u32]) -> Vec<Vec<c_int>> {
    let mut index = std::collections::HashMap::new();
    let mut groups: Vec<Vec<c_int>> = Vec::new();
    for (r, n) in nodes.iter().enumerate() {
        let i = *index.entry(n).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(r as c_int);
    }
    groups
}

/// Ranks on the most populous of `groups` (`group`'s output).
pub fn largest(groups: &[Vec<c_int>]) -> usize {
    groups.iter().map(Vec::len).max().unwrap_or(0)
}

impl Layout {
    /// Every rank on one node.
    pub fn single(rank: c_int, size: c_int) -> Layout {
        Layout {
            local: (0..size).collect(),
            me: rank as usize,
            leaders: if rank == 0 { vec![0] } else { Vec::new() },
            nodes: 1,
            node: 0,
            largest: size as usize,
        }
    }

    /// Rank `rank`'s layout among `groups` (`group`'s output).
    pub fn from_groups(groups: &[Vec<c_int>], rank: c_int) -> Layout {
        let node = groups.iter().position(|g| g.contains(&rank)).expect("own node");
        let local = groups[node].clone();
        let me = local.iter().position(|&r| r == rank).expect("own rank");
        Layout {
            leaders: if me == 0 { groups.iter().map(|g| g[0]).collect() } else { Vec::new() },
            nodes: groups.len(),
            node,
            me,
            local,
            largest: largest(groups),
        }
    }

    /// From the node id of every rank (`nodes[r]` for rank r).
    pub fn from_nodes(nodes: &[u32], rank: c_int) -> Layout {
        Layout::from_groups(&group(nodes), rank)
    }

    pub fn is_leader(&self) -> bool {
        self.me == 0
    }
}

