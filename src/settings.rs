//! The values hwbarr's choice parameters take (`coll_hwbarr_algorithm`,
//! `_idle`, `_inter`), each defined once: a table per setting gives the
//! name users write and see, what it means, and the value. Parsing, display,
//! the MCA enum registered with Open MPI (so `ompi_info` lists the valid
//! values and Open MPI itself rejects others), the help strings and the
//! words of the settings exchange all come from these tables. Free of Open
//! MPI.

use std::ffi::CStr;
use std::fmt;

/// One valid value of a choice parameter.
pub struct Choice<T: 'static> {
    /// What users write (`--mca coll_hwbarr_algorithm toggle`).
    pub name: &'static CStr,
    /// What it means, for the help string.
    pub help: &'static str,
    pub value: T,
}

/// A setting with a fixed set of values. Its index in `CHOICES` is the
/// integer Open MPI stores and the word the ranks exchange; the first
/// choice is the default.
pub trait Setting: Copy + PartialEq + Sized + 'static {
    /// The parameter's name after `coll_hwbarr_`.
    const PARAM: &'static str;
    /// What the parameter decides, for the help string.
    const WHAT: &'static str;
    const CHOICES: &'static [Choice<Self>];

    fn index(self) -> usize {
        Self::CHOICES.iter().position(|c| c.value == self).expect("every value is in its table")
    }

    fn from_index(i: usize) -> Option<Self> {
        Self::CHOICES.get(i).map(|c| c.value)
    }

    fn name(self) -> &'static str {
        Self::CHOICES[self.index()].name.to_str().expect("ASCII names")
    }

    /// Parses a value (case-insensitive, surrounding blanks ignored); the
    /// error is one line naming the valid values.
    fn parse(s: &str) -> Result<Self, String> {
        let v = s.trim().to_ascii_lowercase();
        Self::CHOICES.iter().find(|c| c.name.to_bytes() == v.as_bytes()).map(|c| c.value).ok_or_else(|| {
            format!(
                "invalid value '{s}' for MCA parameter coll_hwbarr_{} (valid values: {})",
                Self::PARAM,
                Self::valid()
            )
        })
    }

    /// The valid values, comma separated.
    fn valid() -> String {
        Self::CHOICES.iter().map(|c| c.name.to_str().unwrap_or("?")).collect::<Vec<_>>().join(", ")
    }

    /// The parameter's help string: what it decides, then every value.
    fn help() -> String {
        let each: Vec<String> =
            Self::CHOICES.iter().map(|c| format!("'{}' ({})", c.name.to_str().unwrap_or("?"), c.help)).collect();
        format!("{}: {}. Default: {}", Self::WHAT, each.join(", "), Self::CHOICES[0].name.to_str().unwrap_or("?"))
    }
}

/// The barrier algorithm a communicator gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Pick from facts (ranks on the node).
    Auto,
    /// TUC toggle-wire barrier on the node's shared-memory device.
    Toggle,
    /// Blue Gene DMA-counter barrier on the node's shared-memory device.
    Counter,
    /// coll/basic's linear barrier over the point-to-point engine.
    Linear,
    /// The toggle-wire barrier with every wire on one cache line and the
    /// FSM in every rank (`core::line`).
    Line,
    /// The toggle-wire barrier with a line per wire and the FSM in one
    /// leader per L3 domain (`core::polled`).
    Polled,
}

/// Largest node `auto` gives the line barrier (`core::line`) when ranks
/// share cores, and when each has its own. All its wires share one line,
/// so the arrivals take that line one after another, from every waiter.
/// Measured on 2 cores (docs/benchmarks.md): at 2 ranks line 0.04-0.055 µs,
/// counter 0.07, toggle 0.09 and polled 0.10 at best; at 4 and 8 (oversubscribed)
/// line, counter and toggle are within 1.3× of each other, the scheduler's
/// hand-offs dominating, polled behind (its leaders wait to be scheduled).
/// With a core per rank above 2 ranks the model (`docs/many-core.md`)
/// puts the polled barrier's overlapped reads 2.0-4× ahead of one line's
/// serialized stores at 4 and 8 ranks arriving together (1.04-1.26× behind
/// with one rank late); this machine cannot measure it.
pub const AUTO_LINE_SHARED_MAX: usize = 8;
/// ... and when each rank has its own core (above it: polled).
pub const AUTO_LINE_OWN_MAX: usize = 2;

impl Algorithm {
    /// `auto` resolved for a node of `ranks` ranks (for a communicator
    /// spanning nodes: its most populous node, so that every node runs the
    /// same core); any other value as it is. When each rank keeps its core
    /// while it waits (`own_cores`): line at 2 ranks, polled above (its
    /// leaders read their L3 domains at once). When ranks share cores: line
    /// up to 8 ranks, toggle above (its last arriver releases everyone
    /// itself, where the polled barrier waits until its leaders are
    /// scheduled: 3.1 against 1.9 µs at 4 ranks on 2 cores).
    pub fn for_node(self, ranks: usize, own_cores: bool) -> Algorithm {
        match self {
            Algorithm::Auto if own_cores && ranks <= AUTO_LINE_OWN_MAX => Algorithm::Line,
            Algorithm::Auto if own_cores => Algorithm::Polled,
            Algorithm::Auto if ranks <= AUTO_LINE_SHARED_MAX => Algorithm::Line,
            Algorithm::Auto => Algorithm::Toggle,
            a => a,
        }
    }
}

impl Setting for Algorithm {
    const PARAM: &'static str = "algorithm";
    const WHAT: &'static str = "Barrier algorithm";
    const CHOICES: &'static [Choice<Self>] = &[
        Choice {
            name: c"auto",
            help:
                "with a core per rank, line at 2 ranks on a node and polled above; with ranks sharing cores, line up \
                   to 8 ranks and toggle above",
            value: Algorithm::Auto,
        },
        Choice { name: c"toggle", help: "TUC toggle-wire barrier on shared memory", value: Algorithm::Toggle },
        Choice { name: c"counter", help: "Blue Gene DMA-counter barrier on shared memory", value: Algorithm::Counter },
        Choice { name: c"linear", help: "coll/basic's linear barrier over point-to-point", value: Algorithm::Linear },
        Choice {
            name: c"line",
            help: "toggle wires on one shared cache line that every rank reads (no central FSM)",
            value: Algorithm::Line,
        },
        Choice {
            name: c"polled",
            help: "toggle wires on a cache line each, read by one leader per L3 domain, the leaders by rank 0",
            value: Algorithm::Polled,
        },
    ];
}

/// What a waiting rank does between rounds of polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Keep the core: the releaser runs on another one.
    Spin,
    /// sched_yield: let a rank that has not arrived yet have the core.
    Yield,
    /// Yield a few rounds first (the releaser may be about to run), then
    /// sleep on the barrier's shared word (futex) until the releasing rank
    /// wakes us, or a time slice passes and we turn progress again.
    Sleep,
}

/// `idle`: None is `auto` (decided from the node's facts).
impl Setting for Option<Idle> {
    const PARAM: &'static str = "idle";
    const WHAT: &'static str = "What a rank waiting in a barrier does between rounds of polls";
    const CHOICES: &'static [Choice<Self>] = &[
        Choice {
            name: c"auto",
            help: "sleep when ranks outnumber cores (the job's ranks on the node, or the communicator's own there when \
                   more: spawned or connected jobs), yield when mpi_yield_when_idle is set, spin otherwise; a \
                   spinning process whose long waits' yields hand its core to other tasks (its ranks confined to fewer \
                   CPUs than they are, another program on its core) yields each round instead, for its next 100000 \
                   waits, then spins and looks again; where its affinity allows other CPUs, the first 3 such findings \
                   in a row each try moving the waiting thread to another CPU first (on try k, the rank whose local rank \
                   has bit k set). While an MPI_Ibarrier or persistent barrier is in flight, each \
                   progress pass of any MPI call (MPI_Wait, MPI_Test...) that finishes none of hwbarr's barriers \
                   yields where the cores are shared (counted, set or found) and Open MPI does not yield itself; \
                   where the core is kept, one pass in 1024 tests it once such passes have run 4096 in a row",
            value: None,
        },
        Choice {
            name: c"spin",
            help: "keep the core, turning MPI progress every 256 polls; after about 135 us without release, turn it after every poll and yield the core",
            value: Some(Idle::Spin),
        },
        Choice {
            name: c"yield",
            help: "sched_yield after each round of polls; while a barrier is in flight, after each progress pass \
                   (of MPI_Wait, MPI_Test or any MPI call) that finishes none of hwbarr's, unless Open MPI yields \
                   itself",
            value: Some(Idle::Yield),
        },
        Choice {
            name: c"sleep",
            help: "after 3 rounds and 50 us of sched_yield, sleep on the barrier's shared word until the releasing \
                   rank wakes it - a futex; no system call when nobody sleeps; while a barrier is in flight, progress passes (MPI_Wait, MPI_Test, any MPI call) \
                   yield as with 'yield'",
            value: Some(Idle::Sleep),
        },
    ];
}

/// The barrier among node leaders on communicators that span nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterAlgorithm {
    Counter,
    Dissemination,
}

/// `inter`: None is `auto` (decided from the number of nodes).
impl Setting for Option<InterAlgorithm> {
    const PARAM: &'static str = "inter";
    const WHAT: &'static str = "Barrier among node leaders on communicators that span nodes, over point-to-point";
    const CHOICES: &'static [Choice<Self>] = &[
        Choice { name: c"auto", help: "counter up to 3 nodes, dissemination above", value: None },
        Choice {
            name: c"counter",
            help: "the patent's broadcast: one zero-byte message to every other leader, one round",
            value: Some(InterAlgorithm::Counter),
        },
        Choice { name: c"dissemination", help: "log2(nodes) rounds", value: Some(InterAlgorithm::Dissemination) },
    ];
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Verbose output describes the leaders' phase in words.
impl fmt::Display for InterAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            InterAlgorithm::Counter => "counter broadcast",
            InterAlgorithm::Dissemination => "dissemination",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<T: Setting + fmt::Debug>() {
        for (i, c) in T::CHOICES.iter().enumerate() {
            assert_eq!(c.value.index(), i);
            assert_eq!(T::from_index(i), Some(c.value));
            assert_eq!(T::parse(&c.name.to_string_lossy().to_uppercase()), Ok(c.value));
            assert!(T::help().contains(&format!("'{}' (", c.name.to_string_lossy())));
        }
        assert_eq!(T::from_index(T::CHOICES.len()), None);
        let e = T::parse("bogus").unwrap_err();
        assert!(e.contains("'bogus'") && e.contains(&T::valid()) && e.contains(T::PARAM), "{e}");
        assert_eq!(e.lines().count(), 1);
        assert_eq!(T::CHOICES[0].name.to_bytes(), b"auto", "auto is every setting's default");
    }

    #[test]
    fn every_table_parses_displays_and_helps_from_one_place() {
        roundtrip::<Algorithm>();
        roundtrip::<Option<Idle>>();
        roundtrip::<Option<InterAlgorithm>>();
        assert_eq!(Algorithm::parse(" Counter "), Ok(Algorithm::Counter));
        assert_eq!(Algorithm::valid(), "auto, toggle, counter, linear, line, polled");
        assert_eq!(Algorithm::Toggle.to_string(), "toggle");
    }

    #[test]
    fn auto_follows_the_node_size_and_its_cores() {
        let auto = |n, own| Algorithm::Auto.for_node(n, own);
        assert_eq!(
            (auto(2, true), auto(2, false), auto(8, false)),
            (Algorithm::Line, Algorithm::Line, Algorithm::Line)
        );
        assert_eq!(
            (auto(3, true), auto(9, true), auto(192, true)),
            (Algorithm::Polled, Algorithm::Polled, Algorithm::Polled)
        );
        assert_eq!((auto(9, false), auto(192, false)), (Algorithm::Toggle, Algorithm::Toggle));
        assert_eq!(Algorithm::Counter.for_node(192, true), Algorithm::Counter);
    }
}
