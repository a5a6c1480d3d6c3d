//! The line barrier on the candidate line hwbarr's trial picks, for the
//! forked processes of an example (`shm::line_pick`).

use mca_coll_hwbarr::core::line;
use mca_coll_hwbarr::shm::segment::{Offer, Segment, LINE_SLOTS};

/// Rank `r`'s own mapping of the segment `offer` names (a process of
/// `n`, as a rank has its own), its line barrier moved to the fastest
/// candidate line by the trial, run as hwbarr runs it over a
/// communicator's first barriers, each look followed by `pauses` PAUSEs.
/// Every rank ends on rank 0's pick, at its count there.
pub fn on_picked_line(offer: &Offer, n: usize, r: usize, pauses: u32) -> Segment {
    let mut own = Segment::attach(offer, n).expect("the segment mapped again");
    own.start_line_trial(r, LINE_SLOTS, mca_coll_hwbarr::wait::now_ns);
    loop {
        let ended = own.line_step().expect("rank 0's pick");
        let c = line::arrive(own.line_wires(), r, own.line_mine());
        while !line::is_released(own.line_wires(), c) {
            for _ in 0..pauses {
                std::hint::spin_loop();
            }
        }
        if ended {
            return own;
        }
    }
}
