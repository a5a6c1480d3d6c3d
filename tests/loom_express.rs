//! Model check of the express lane (`express`) with loom, every
//! interleaving and weak-memory outcome up to loom's preemption bound, on
//! the real lane code with threads that poll a bounded number of times:
//! - two pollers race the issuer's own poll for one released barrier:
//!   claimed exactly once, with its request;
//! - a poller races the issuer, which claims barrier 1 and publishes
//!   barrier 2 with the same ticket, not released: barrier 2 is never
//!   claimed (only the generation tells the two words apart);
//! - a poller races the issuer taking a released barrier back (as a
//!   barrier issued behind it does): claimed or taken, exactly once;
//! - a progress pass that finds the lane idle and drops its owner from the
//!   list (`Watch::disarm`) races an issuer that publishes and arms: the
//!   new barrier is never left out of the list;
//! - a barrier moved from the lane to the queue (`take_queued`, under the
//!   queue's lock) while another thread asks whether anything is in flight
//!   (`idle`: the blocking direct path, an express start) or a progress
//!   pass decides to drop the owner: the barrier is never missed; and, the
//!   barrier released, a poller claiming it while the adopter takes it or
//!   finds the lane empty and lowers `queued` again: "idle" is heard only
//!   once the barrier is claimed;
//! - Open MPI revokes the communicator (fault tolerance) while a poller
//!   and the issuer poll a barrier that its last arrival may release
//!   meanwhile: it ends exactly once, with success only if released.
//!
//! The checks can fail: `a_stale_word_swapped_blindly_is_caught` runs the
//! second model with a claim that swaps instead of comparing, and loom
//! finds barrier 2 claimed before its release; `a_disarm_without_its_second_look_is_caught`
//! drops the owner without looking again, and loom finds the barrier lost;
//! the `*_adopted_the_wrong_way_round_is_caught` tests empty the lane
//! before raising `queued`, and loom finds the barrier missed;
//! `a_release_test_blind_to_the_revocation_is_caught` ignores the failure
//! word, and loom finds the barrier never ended.
//!
//! Run: RUSTFLAGS="--cfg loom" cargo test --release --test loom_express
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};
use loom::thread;
use mca_coll_hwbarr::express::{Express, Packed, Polled, Watch};

#[derive(Clone, Copy, Debug, PartialEq)]
struct Ticket(u64);

impl Packed for Ticket {
    fn pack(self) -> u64 {
        self.0
    }
    fn unpack(bits: u64) -> Ticket {
        Ticket(bits)
    }
}

/// Every barrier carries this ticket; requests are numbered from 1.
const TICKET: Ticket = Ticket(5);

struct World {
    lane: Express<Ticket, usize>,
    /// Barriers the issuer entered, and those released. Like the counter
    /// core's, the device test says whether the barrier the rank is in now
    /// is released: it cannot tell a stale ticket from the current one.
    entered: AtomicUsize,
    released: AtomicUsize,
    /// Times request k (index k-1) was claimed or taken.
    ended: [AtomicUsize; 2],
}

impl World {
    fn new() -> Arc<World> {
        Arc::new(World {
            lane: Express::default(),
            entered: AtomicUsize::new(0),
            released: AtomicUsize::new(0),
            ended: [AtomicUsize::new(0), AtomicUsize::new(0)],
        })
    }

    fn enter(&self, req: usize) {
        self.entered.store(req, SeqCst);
        self.lane.publish(req, TICKET);
    }

    /// One poll, as a progress pass makes it; true if it claimed.
    fn poll(&self) -> bool {
        let polled = self.lane.poll(|t| {
            assert_eq!(t, TICKET);
            Ok::<_, ()>(self.released.load(SeqCst) >= self.entered.load(SeqCst))
        });
        match polled {
            Polled::Claimed(req, Ok(())) => {
                assert!(self.released.load(SeqCst) >= req, "request {req} claimed before its release");
                self.ended[req - 1].fetch_add(1, SeqCst);
                true
            }
            Polled::Claimed(_, Err(())) => unreachable!(),
            _ => false,
        }
    }

    fn ended(&self, req: usize) -> usize {
        self.ended[req - 1].load(SeqCst)
    }
}

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

fn pollers(w: &Arc<World>, threads: usize, polls: usize) -> Vec<thread::JoinHandle<()>> {
    (0..threads)
        .map(|_| {
            let w = w.clone();
            thread::spawn(move || {
                for _ in 0..polls {
                    w.poll();
                }
            })
        })
        .collect()
}

#[test]
fn a_released_barrier_is_claimed_once() {
    check(|| {
        let w = World::new();
        w.enter(1);
        w.released.store(1, SeqCst);
        let ps = pollers(&w, 2, 1);
        w.poll();
        ps.into_iter().for_each(|p| p.join().unwrap());
        // Whoever did not get it, a later pass does.
        w.poll();
        assert_eq!(w.ended(1), 1);
        assert!(w.lane.is_empty());
    });
}

/// The issuer claims barrier 1 itself, then enters barrier 2 with the same
/// ticket; `poll` is the claim under test.
fn stale_word_model(poll: fn(&World)) {
    check(move || {
        let w = World::new();
        w.enter(1);
        w.released.store(1, SeqCst);
        let p = {
            let w = w.clone();
            thread::spawn(move || {
                poll(&w);
                poll(&w);
            })
        };
        if !w.lane.is_empty() {
            while !w.poll() && !w.lane.is_empty() {
                thread::yield_now();
            }
        }
        w.enter(2);
        p.join().unwrap();
        assert_eq!(w.ended(1), 1);
        assert_eq!(w.ended(2), 0, "barrier 2 claimed unreleased");
    });
}

#[test]
fn a_stale_word_claims_nothing() {
    stale_word_model(|w| {
        w.poll();
    });
}

/// A claim that swaps the word out without comparing it with the one it
/// tested: a poller that tested barrier 1 takes barrier 2.
#[test]
#[should_panic(expected = "claimed before its release")]
fn a_stale_word_swapped_blindly_is_caught() {
    stale_word_model(|w| {
        let mut tested = false;
        if let Polled::Pending = w.lane.poll(|_| {
            tested = w.released.load(SeqCst) >= w.entered.load(SeqCst);
            Ok::<_, ()>(false)
        }) {
            if tested {
                if let Some((req, _)) = w.lane.take_queued(&AtomicBool::new(false)) {
                    assert!(w.released.load(SeqCst) >= req, "request {req} claimed before its release");
                    w.ended[req - 1].fetch_add(1, SeqCst);
                }
            }
        }
    });
}

#[test]
fn a_barrier_taken_back_is_claimed_by_nobody_else() {
    check(|| {
        let w = World::new();
        w.enter(1);
        w.released.store(1, SeqCst);
        let ps = pollers(&w, 1, 2);
        if let Some((req, t)) = w.lane.take_queued(&AtomicBool::new(false)) {
            assert_eq!((req, t), (1, TICKET), "took another barrier");
            w.ended[0].fetch_add(1, SeqCst);
        }
        ps.into_iter().for_each(|p| p.join().unwrap());
        assert_eq!(w.ended(1), 1);
    });
}

/// The owner starts watched (in the list, armed) and idle. A progress pass
/// (holding the list's lock, as `ompi::progress` does) finds nothing in
/// flight and drops the owner, deciding with `disarm`; meanwhile the
/// issuer publishes a barrier (never released here) and arms, putting the
/// owner back in the list when `arm` says so. In the end the barrier must
/// be in a listed lane.
fn watch_model(disarm: fn(&Watch, &Express<Ticket, usize>) -> bool) {
    check(move || {
        let lane: Arc<Express<Ticket, usize>> = Arc::default();
        let watch = Arc::new(Watch::default());
        let listed = Arc::new(Mutex::new(true));
        assert!(watch.arm());
        let pass = {
            let (lane, watch, listed) = (lane.clone(), watch.clone(), listed.clone());
            thread::spawn(move || {
                let mut l = listed.lock().unwrap();
                if *l && lane.poll(|_| Ok::<_, ()>(false)) != Polled::Pending && disarm(&watch, &lane) {
                    *l = false;
                }
            })
        };
        lane.publish(1, TICKET);
        if watch.arm() {
            *listed.lock().unwrap() = true;
        }
        pass.join().unwrap();
        assert!(!lane.is_empty());
        assert!(*listed.lock().unwrap(), "a barrier in flight left out of progress's list");
    });
}

#[test]
fn a_barrier_issued_as_progress_drops_its_owner_stays_watched() {
    watch_model(|w, lane| w.disarm(|| !lane.is_empty()));
}

#[test]
#[should_panic(expected = "left out of progress's list")]
fn a_disarm_without_its_second_look_is_caught() {
    watch_model(|w, _| w.disarm(|| false));
}

/// How a barrier moves from the lane to the queue.
type Adopt = fn(&Express<Ticket, usize>, &AtomicBool);

/// As `ompi::server` does: `take_queued` (the queue then holds it, so
/// `queued` stays raised).
fn adopt(lane: &Express<Ticket, usize>, queued: &AtomicBool) {
    assert!(lane.take_queued(queued).is_some());
}

/// The lane emptied first (through a flag nobody reads), `queued` raised
/// after.
fn adopt_wrong_way_round(lane: &Express<Ticket, usize>, queued: &AtomicBool) {
    assert!(lane.take_queued(&AtomicBool::new(false)).is_some());
    queued.store(true, SeqCst);
}

/// A lane holding barrier 1 (not released), its `queued` flag, and a
/// spawned thread moving the barrier to the queue with `adopt`.
fn lane_being_adopted(adopt: Adopt) -> (Arc<Express<Ticket, usize>>, Arc<AtomicBool>, thread::JoinHandle<()>) {
    let lane: Arc<Express<Ticket, usize>> = Arc::default();
    let queued = Arc::new(AtomicBool::new(false));
    lane.publish(1, TICKET);
    let adopter = {
        let (lane, queued) = (lane.clone(), queued.clone());
        thread::spawn(move || adopt(&lane, &queued))
    };
    (lane, queued, adopter)
}

/// Barrier 1 (not released) in the lane; one thread moves it to the queue
/// while another asks whether anything is in flight, as the blocking direct
/// path and an express start do: it must never hear "idle". (Both are
/// spawned threads: loom 0.7 explores the main thread's accesses after a
/// spawn against the spawned thread's read-modify-writes only partly.)
fn adopt_vs_idle_model(adopt: Adopt) {
    check(move || {
        let (lane, queued, adopter) = lane_being_adopted(adopt);
        let asker = thread::spawn(move || lane.idle(&queued));
        adopter.join().unwrap();
        assert!(!asker.join().unwrap(), "the direct path would enter the device twice");
    });
}

#[test]
fn a_barrier_on_its_way_to_the_queue_is_in_flight() {
    adopt_vs_idle_model(adopt);
}

#[test]
#[should_panic(expected = "enter the device twice")]
fn a_barrier_adopted_the_wrong_way_round_is_caught() {
    adopt_vs_idle_model(adopt_wrong_way_round);
}

/// Barrier 1 (not released) in the lane of a listed owner; one thread moves
/// it to the queue while a progress pass (another spawned thread, as above)
/// finds nothing in the lane and decides whether to drop the owner
/// (`in_flight` = not `idle`). The owner must stay listed.
fn adopt_vs_drop_model(adopt: Adopt) {
    check(move || {
        let watch = Arc::new(Watch::default());
        assert!(watch.arm());
        let (lane, queued, adopter) = lane_being_adopted(adopt);
        let pass = thread::spawn(move || {
            lane.poll(|_| Ok::<_, ()>(false)) == Polled::Empty
                && lane.idle(&queued)
                && watch.disarm(|| !lane.idle(&queued))
        });
        adopter.join().unwrap();
        assert!(!pass.join().unwrap(), "a barrier in flight left out of progress's list");
    });
}

#[test]
fn a_barrier_on_its_way_to_the_queue_keeps_its_owner_watched() {
    adopt_vs_drop_model(adopt);
}

#[test]
#[should_panic(expected = "left out of progress's list")]
fn a_drop_racing_a_barrier_adopted_the_wrong_way_round_is_caught() {
    adopt_vs_drop_model(adopt_wrong_way_round);
}

/// Barrier 1, released, in the lane: a poller claims it while an adopter
/// (holding the queue's lock) takes it or, finding it gone, lowers `queued`
/// again (its queue is empty), and a third thread asks whether anything is
/// in flight. Hearing "idle" while the adopter holds the barrier in its
/// queue would let the direct path overtake it.
#[test]
fn a_claim_racing_an_adoption_and_its_restore() {
    check(|| {
        let lane: Arc<Express<Ticket, usize>> = Arc::default();
        let queued = Arc::new(AtomicBool::new(false));
        lane.publish(1, TICKET);
        let poller = {
            let lane = lane.clone();
            thread::spawn(move || matches!(lane.poll(|_| Ok::<_, ()>(true)), Polled::Claimed(1, Ok(()))))
        };
        let adopter = {
            let (lane, queued) = (lane.clone(), queued.clone());
            thread::spawn(move || {
                let got = lane.take_queued(&queued).is_some();
                if !got {
                    queued.store(false, SeqCst);
                }
                got
            })
        };
        let asker = thread::spawn(move || lane.idle(&queued));
        let (claimed, adopted, idle) = (poller.join().unwrap(), adopter.join().unwrap(), asker.join().unwrap());
        assert!(claimed != adopted, "claimed or adopted, exactly once");
        assert!(!(idle && adopted), "idle while the barrier waits in the queue");
    });
}

/// Open MPI revokes the communicator (the module hook, `Comm::revoked`:
/// it marks the device's failure word, from whichever thread turns
/// progress) while a poller and the issuer poll a barrier in the lane that
/// its last arrival may or may not release meanwhile. The release test
/// reads the failure word as `device::tested` does (`heeds`): a barrier
/// not done on a marked device ends with the error.
fn revocation_model(heeds: bool) {
    check(move || {
        let lane: Arc<Express<Ticket, usize>> = Arc::default();
        let released = Arc::new(AtomicBool::new(false));
        let revoked = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicUsize::new(0));
        lane.publish(1, TICKET);
        let poll = {
            let (lane, released, revoked, ended) = (lane.clone(), released.clone(), revoked.clone(), ended.clone());
            move || {
                let was_released = || released.load(SeqCst);
                let test = |_| match was_released() {
                    true => Ok(true),
                    false if heeds && revoked.load(SeqCst) => Err(75),
                    false => Ok(false),
                };
                match lane.poll(test) {
                    Polled::Claimed(1, outcome) => {
                        assert!(outcome.is_err() || was_released(), "success without a release");
                        ended.fetch_add(1, SeqCst);
                    }
                    Polled::Claimed(req, _) => panic!("claimed request {req}"),
                    _ => {}
                }
            }
        };
        let poller = {
            let poll = poll.clone();
            thread::spawn(move || poll())
        };
        let last_arrival = {
            let (released, revoked) = (released.clone(), revoked.clone());
            // Not released at all when the revocation came first (a
            // process died before it arrived).
            thread::spawn(move || {
                if !revoked.load(SeqCst) {
                    released.store(true, SeqCst)
                }
            })
        };
        revoked.store(true, SeqCst);
        poll();
        poller.join().unwrap();
        last_arrival.join().unwrap();
        // Whoever did not end it, the next pass does: released or revoked.
        poll();
        assert_eq!(ended.load(SeqCst), 1, "the barrier must end exactly once");
        assert!(lane.is_empty());
    });
}

/// The barrier ends exactly once, with success only if it was released,
/// and a pass after the revocation always ends it.
#[test]
fn a_revocation_racing_the_pollers_ends_the_barrier_once() {
    revocation_model(true);
}

/// A release test that ignores the failure word leaves the barrier
/// waiting for an arrival that never comes: loom finds it.
#[test]
#[should_panic(expected = "the barrier must end exactly once")]
fn a_release_test_blind_to_the_revocation_is_caught() {
    revocation_model(false);
}
