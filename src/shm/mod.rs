//! The shared-memory layer, free of Open MPI: the segment a communicator's
//! ranks on one node share (`segment`), sleeping on its words (`futex`),
//! and the protocol by which waiters sleep and releasers wake them without
//! a lost wake-up (`sleep`, model-checked by `tests/loom_sleep.rs`), the
//! trial that picks the line barrier's fastest line (`line_pick`), the
//! segments a process keeps for its next communicators (`kept`), and the
//! scheduler as a waiter meets it: a yield that tells whether another task
//! ran, a thread that makes room on a CPU it shares (`sched`).

pub mod futex;
#[cfg(not(loom))]
pub mod kept;
#[cfg(not(loom))]
pub mod line_pick;
pub mod sched;
#[cfg(not(loom))]
pub mod segment;
pub mod sleep;
