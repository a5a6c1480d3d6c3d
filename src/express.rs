//! The express lane of a communicator's barriers in flight: one barrier
//! entered on the device with nothing queued before it (the usual case of
//! MPI_Ibarrier and of a started persistent barrier), kept in one atomic
//! word instead of the queue (`engine`) and its lock.
//!
//! A request waits in MPI_Wait by turning Open MPI's progress, so whatever
//! a progress pass costs delays the moment its barrier is seen released.
//! Through the queue that pass took two locks and walked the queue; here
//! it is one load of the word, the device's release test, and one
//! compare-and-swap by whichever pass sees the release first: that pass
//! alone completes the request.
//!
//! The word holds the ticket (where the rank stands on the device,
//! `Packed`), a presence bit and a generation that changes with every
//! barrier published; the request handle sits beside it. A poller reads the
//! word, then the handle, tests the release, and claims the barrier by
//! swapping that very word for "empty": a barrier claimed meanwhile and a
//! new one published in its place carry another generation, so the swap
//! fails and nothing completes twice or early. (It could succeed only if
//! 2^29 barriers on one communicator completed between a poller's load
//! and its swap.)

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Where a rank stands in a barrier, packed into `PAYLOAD_BITS` bits.
pub trait Packed: Copy {
    fn pack(self) -> u64;
    fn unpack(bits: u64) -> Self;
}

/// A request handle kept in a word: any raw pointer, or an index in tests.
pub trait Handle: Copy {
    fn to_bits(self) -> usize;
    fn from_bits(bits: usize) -> Self;
}

impl<T> Handle for *mut T {
    fn to_bits(self) -> usize {
        self.expose_provenance()
    }
    fn from_bits(bits: usize) -> Self {
        std::ptr::with_exposed_provenance_mut(bits)
    }
}

impl Handle for usize {
    fn to_bits(self) -> usize {
        self
    }
    fn from_bits(bits: usize) -> Self {
        bits
    }
}

/// Bits of a packed ticket.
pub const PAYLOAD_BITS: u32 = 34;
const PRESENT: u64 = 1 << PAYLOAD_BITS;
const GEN_SHIFT: u32 = PAYLOAD_BITS + 1;
const PAYLOAD: u64 = PRESENT - 1;

/// How a poll of the express lane ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polled<R, E> {
    /// Nothing in the lane.
    Empty,
    /// A barrier in flight, not released yet (or claimed by another poller).
    Pending,
    /// This poll claimed the barrier: complete `R` with the outcome.
    Claimed(R, Result<(), E>),
}

/// One barrier in flight, or none. One issuer at a time (MPI orders a
/// communicator's collectives); any number of pollers.
pub struct Express<T, R> {
    /// 0: empty; else generation, presence bit, packed ticket.
    word: AtomicU64,
    /// The request of the barrier in `word`, written before it is published.
    req: AtomicUsize,
    /// Barriers published so far (the issuer's count; the generation).
    issued: AtomicU32,
    _types: std::marker::PhantomData<(T, R)>,
}

impl<T, R> Default for Express<T, R> {
    fn default() -> Self {
        Express {
            word: AtomicU64::new(0),
            req: AtomicUsize::new(0),
            issued: AtomicU32::new(0),
            _types: Default::default(),
        }
    }
}

impl<T: Packed, R: Handle> Express<T, R> {
    /// No barrier in the lane. SeqCst: a progress pass that stops watching
    /// the lane reads this after clearing its mark (`Watch::disarm`).
    pub fn is_empty(&self) -> bool {
        self.word.load(Ordering::SeqCst) == 0
    }

    /// Publishes the barrier `ticket` of request `req`. The lane must be
    /// empty, and only the communicator's one issuer calls this.
    pub fn publish(&self, req: R, ticket: T) {
        let bits = ticket.pack();
        debug_assert!(bits & !PAYLOAD == 0, "ticket wider than the payload");
        let gen = self.issued.load(Ordering::Relaxed).wrapping_add(1) & ((1 << (64 - GEN_SHIFT)) - 1);
        self.issued.store(gen, Ordering::Relaxed);
        // The handle first: a poller that sees the word (Acquire) sees it.
        self.req.store(req.to_bits(), Ordering::Relaxed);
        let prev = self.word.swap((u64::from(gen) << GEN_SHIFT) | PRESENT | (bits & PAYLOAD), Ordering::SeqCst);
        debug_assert_eq!(prev, 0, "published over a barrier in flight");
    }

    /// Tests the barrier in the lane with `released` and claims it when that
    /// says it is over (or failed): exactly one poll claims each barrier.
    pub fn poll<E>(&self, released: impl FnOnce(T) -> Result<bool, E>) -> Polled<R, E> {
        let w = self.word.load(Ordering::Acquire);
        if w == 0 {
            return Polled::Empty;
        }
        // Read before the claim: once the word is empty the issuer may
        // publish the next barrier's handle.
        let req = R::from_bits(self.req.load(Ordering::Relaxed));
        let outcome = match released(T::unpack(w & PAYLOAD)) {
            Ok(false) => return Polled::Pending,
            Ok(true) => Ok(()),
            Err(e) => Err(e),
        };
        match self.word.compare_exchange(w, 0, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => Polled::Claimed(req, outcome),
            Err(_) => Polled::Pending,
        }
    }

    /// Takes the barrier out of the lane, released or not, to queue it
    /// ahead of a barrier issued behind it; None if the lane is empty.
    /// Raises `queued` first: a reader that finds the lane empty (`idle`
    /// looks at the lane, then at `queued`) must not miss the barrier on
    /// its way to the queue. The caller holds the queue's lock, and lowers
    /// `queued` again if it got nothing and its queue is empty.
    pub fn take_queued(&self, queued: &AtomicBool) -> Option<(R, T)> {
        if self.is_empty() {
            return None;
        }
        queued.store(true, Ordering::SeqCst);
        self.take()
    }

    /// Nothing in flight: the lane empty, then (in that order, against
    /// `take_queued`) nothing queued. A lane emptied by a claim is fine: a
    /// claimed barrier was released.
    pub fn idle(&self, queued: &AtomicBool) -> bool {
        self.is_empty() && !queued.load(Ordering::SeqCst)
    }

    /// Takes the barrier out of the lane, released or not; None if empty.
    fn take(&self) -> Option<(R, T)> {
        loop {
            let w = self.word.load(Ordering::Acquire);
            if w == 0 {
                return None;
            }
            let req = R::from_bits(self.req.load(Ordering::Relaxed));
            if self.word.compare_exchange(w, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                return Some((req, T::unpack(w & PAYLOAD)));
            }
        }
    }
}

/// Whether progress watches the lane's owner: the handshake between an
/// issuer, which publishes a barrier and then `arm`s, and the progress pass
/// that finds nothing in flight and `disarm`s to drop the owner from its
/// list. Either the pass sees the new barrier and keeps the owner, or the
/// issuer sees the mark cleared and puts the owner back: a barrier is never
/// left where no progress pass looks.
#[derive(Default)]
pub struct Watch {
    watched: AtomicBool,
}

impl Watch {
    /// After publishing (with a SeqCst write, as `Express::publish` does):
    /// true if the caller must put the owner in progress's list. Already
    /// watched (the usual case in a loop of barriers): a load, no write.
    pub fn arm(&self) -> bool {
        // A store then a load on each side (Dekker): SeqCst orders them.
        crate::sync::seq_cst_loads();
        !self.watched.load(Ordering::SeqCst) && !self.watched.swap(true, Ordering::SeqCst)
    }

    /// A progress pass found nothing in flight: clears the mark and looks
    /// again (`in_flight`, with SeqCst reads). True: drop the owner from
    /// the list; false: something was issued meanwhile, keep it.
    pub fn disarm(&self, in_flight: impl Fn() -> bool) -> bool {
        self.watched.store(false, Ordering::SeqCst);
        crate::sync::seq_cst_loads();
        if in_flight() {
            self.watched.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool as StdBool, AtomicU64 as StdU64, Ordering::SeqCst};
    use std::sync::Arc;

    impl Packed for u64 {
        fn pack(self) -> u64 {
            self
        }
        fn unpack(bits: u64) -> u64 {
            bits
        }
    }

    #[test]
    fn publish_poll_take() {
        let x: Express<u64, usize> = Express::default();
        let queued = AtomicBool::new(false);
        assert!(x.is_empty() && x.idle(&queued));
        assert_eq!(x.poll(|_| Ok::<_, ()>(true)), Polled::Empty);
        x.publish(7, (1 << PAYLOAD_BITS) - 1);
        assert!(!x.is_empty() && !x.idle(&queued));
        assert_eq!(x.poll(|t| Ok::<_, ()>(t == 0)), Polled::Pending);
        assert_eq!(x.poll(|t| Ok::<_, ()>(t == (1 << PAYLOAD_BITS) - 1)), Polled::Claimed(7, Ok(())));
        assert!(x.is_empty() && x.idle(&queued));
        x.publish(9, 3);
        assert_eq!(x.poll(|_| Err::<bool, _>(5)), Polled::Claimed(9, Err(5)));
        assert_eq!(x.take_queued(&queued), None);
        assert!(!queued.load(SeqCst), "nothing taken: queued untouched");
        x.publish(11, 4);
        assert_eq!(x.take_queued(&queued), Some((11, 4)));
        assert!(queued.load(SeqCst) && !x.idle(&queued));
    }

    /// A poller whose barrier is claimed by another, and a new barrier
    /// published with the same ticket, while it tests the release (here,
    /// inside its test): its claim fails, and the new barrier stays.
    #[test]
    fn a_stale_poll_claims_nothing() {
        let x: Express<u64, usize> = Express::default();
        let queued = AtomicBool::new(false);
        x.publish(1, 42);
        let polled = x.poll(|t| {
            assert_eq!(x.poll(|_| Ok::<_, ()>(true)), Polled::Claimed(1, Ok(())));
            x.publish(2, 42);
            Ok::<_, ()>(t == 42)
        });
        assert_eq!(polled, Polled::Pending);
        assert_eq!(x.take_queued(&queued), Some((2, 42)));
    }

    /// One issuer publishing barrier after barrier, all with the same
    /// ticket, three threads polling with a release test that, like the
    /// counter core's, only says whether the barrier entered last is
    /// released; every fifth barrier taken back by the issuer (as a barrier
    /// issued behind it does). Each barrier is claimed or taken exactly
    /// once, by its own handle, and never claimed before it is released.
    #[test]
    fn threads_claim_each_barrier_once_and_only_when_released() {
        const N: u64 = 5_000;
        let x: Arc<Express<u64, usize>> = Arc::default();
        let (entered, released) = (Arc::new(StdU64::new(0)), Arc::new(StdU64::new(0)));
        let claims: Arc<Vec<StdU64>> = Arc::new((0..N).map(|_| StdU64::new(0)).collect());
        let stop = Arc::new(StdBool::new(false));
        let pollers: Vec<_> = (0..3)
            .map(|_| {
                let (x, entered, released) = (x.clone(), entered.clone(), released.clone());
                let (claims, stop) = (claims.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(SeqCst) {
                        match x.poll(|t| Ok::<_, ()>(t == 9 && released.load(SeqCst) >= entered.load(SeqCst))) {
                            Polled::Claimed(r, Ok(())) => {
                                assert!(released.load(SeqCst) > r as u64, "claimed {r} before its release");
                                claims[r].fetch_add(1, SeqCst);
                            }
                            Polled::Claimed(_, Err(())) => unreachable!(),
                            _ => std::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();
        for k in 0..N {
            entered.store(k + 1, SeqCst);
            x.publish(k as usize, 9);
            if k % 7 == 0 {
                std::thread::yield_now();
            }
            // Every fifth barrier: taken back before its release (the take
            // wins) or, every tenth, right after it (racing the pollers).
            if k % 10 == 0 {
                released.store(k + 1, SeqCst);
            }
            if k % 5 == 0 {
                if let Some((r, t)) = x.take() {
                    assert_eq!((r as u64, t), (k, 9), "took another barrier");
                    claims[r].fetch_add(1, SeqCst);
                }
            }
            released.store(k + 1, SeqCst);
            while !x.is_empty() {
                std::hint::spin_loop();
            }
        }
        stop.store(true, SeqCst);
        pollers.into_iter().for_each(|h| h.join().unwrap());
        assert!(claims.iter().all(|c| c.load(SeqCst) == 1), "every barrier claimed or taken once");
    }
}
