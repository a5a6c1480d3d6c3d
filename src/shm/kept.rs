//! Segments kept after their communicator is freed, for the next one.
//!
//! Setting a device up costs system calls and page faults: the creator's
//! memfd_create, ftruncate, mmap and first touch of each page (about 10 µs
//! for 2 ranks), a peer's open of `/proc/<pid>/fd/<fd>` and mmap (about 5),
//! and the munmap and close when the communicator is freed (3-5 more). A
//! program that creates and frees communicators pays them every time.
//! So a creator keeps a few freed segments, mapped and with their fd open,
//! and hands one to its next communicator of the same size once every rank
//! that mapped it has let it go (the segment's `users` word is 0): no rank
//! can still be in a barrier on it then. Its peers keep their mappings of
//! a few, keyed by the offer that brought them, and find them again when
//! the creator offers the same segment; its header's token tells them
//! whether it is the same one.
//!
//! Bounded: at most `coll_hwbarr_kept_segments` (`DEFAULT`) segments and
//! as many mappings kept per process, and at most `FDS` creator fds open
//! beyond the exchange (live communicators' included; a segment sealed
//! beyond that closes its fd as before and is not kept); 0 keeps none.
//! Everything kept is released when the process exits, as any mapping is.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Freed segments a creator keeps, with their fds, and mappings of other
/// ranks' a peer keeps, by default (`coll_hwbarr_kept_segments`).
pub const DEFAULT: usize = 4;
/// At most this many, whatever the parameter says.
pub const MOST: usize = 64;
/// Creator fds a process keeps open after their exchange.
pub const FDS: usize = 16;

/// A range this process mapped; unmapped when dropped.
pub struct Mapping {
    pub base: NonNull<u8>,
    pub len: usize,
}

// SAFETY: plain shared memory, unmapped once, from whichever thread drops it.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range, and nothing borrows it any
        // more: a segment hands its mapping over only when it is dropped.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A creator's freed segment: its mapping, its fd, its number of ranks.
pub struct Created {
    pub map: Mapping,
    pub fd: OwnedFd,
    pub ranks: usize,
}

/// What an offer names: the creator's pid and fd, and the length.
pub type Key = (u32, i32, u64);

/// One process's kept segments (`KEPT`; tests make their own).
pub struct Kept {
    created: Mutex<VecDeque<Created>>,
    mapped: Mutex<VecDeque<(Key, Mapping)>>,
    fds: AtomicUsize,
    /// Most segments, mappings and fds kept.
    limits: [AtomicUsize; 3],
}

/// The process's.
pub static KEPT: Kept = Kept::new(DEFAULT, DEFAULT, FDS);

impl Kept {
    /// At most `created` segments, `mapped` mappings and `fds` fds kept.
    pub const fn new(created: usize, mapped: usize, fds: usize) -> Kept {
        Kept {
            created: Mutex::new(VecDeque::new()),
            mapped: Mutex::new(VecDeque::new()),
            fds: AtomicUsize::new(0),
            limits: [AtomicUsize::new(created), AtomicUsize::new(mapped), AtomicUsize::new(fds)],
        }
    }

    /// Keep at most `n` segments and `n` mappings (at most `MOST`), and
    /// `FDS` fds; 0 or less: none, nor fds (`coll_hwbarr_kept_segments`).
    /// What is kept beyond goes at the next keep.
    pub fn set(&self, n: i64) {
        let n = usize::try_from(n).unwrap_or(0).min(MOST);
        self.limits[0].store(n, Relaxed);
        self.limits[1].store(n, Relaxed);
        self.limits[2].store(if n > 0 { FDS } else { 0 }, Relaxed);
    }

    fn limit(&self, i: usize) -> usize {
        self.limits[i].load(Relaxed)
    }

    /// Most fds kept.
    pub fn limit_fds(&self) -> usize {
        self.limit(2)
    }

    /// A sealed segment's creator asks to keep its fd open: true if the
    /// budget allows (the fd then counts until `fd_closed`).
    pub fn take_fd(&self) -> bool {
        let limit = self.limit(2);
        self.fds.fetch_update(Relaxed, Relaxed, |n| (n < limit).then_some(n + 1)).is_ok()
    }

    /// A counted fd was closed.
    pub fn fd_closed(&self) {
        let before = self.fds.fetch_sub(1, Relaxed);
        debug_assert!(before > 0, "an fd closed that was not counted");
    }

    /// Creator: keeps a freed segment (its fd counted); the oldest go if
    /// there are too many.
    pub fn keep_created(&self, c: Created) {
        let evicted = {
            let mut q = self.created.lock().unwrap_or_else(|e| e.into_inner());
            q.push_back(c);
            let over = q.len().saturating_sub(self.limit(0));
            q.drain(..over).collect::<Vec<_>>()
        };
        for _ in &evicted {
            self.fd_closed();
        }
    }

    /// Creator: a kept segment of `ranks` ranks that `free` says nobody
    /// uses any more (its fd stays counted). Kept segments `spoiled` says
    /// will never serve again (a failed communicator's) are released. Each
    /// is asked `free` first: `free`'s acquiring read that finds nobody
    /// makes every failure mark made before it visible to `spoiled`.
    pub fn take_created(
        &self,
        ranks: usize,
        free: impl Fn(&Mapping) -> bool,
        spoiled: impl Fn(&Mapping) -> bool,
    ) -> Option<Created> {
        let (found, gone) = {
            let mut q = self.created.lock().unwrap_or_else(|e| e.into_inner());
            let (mut found, mut gone, mut rest) = (None, Vec::new(), VecDeque::new());
            for c in q.drain(..) {
                let free = free(&c.map);
                if spoiled(&c.map) {
                    gone.push(c);
                } else if found.is_none() && free && c.ranks == ranks {
                    found = Some(c);
                } else {
                    rest.push_back(c);
                }
            }
            *q = rest;
            (found, gone)
        };
        for _ in &gone {
            self.fd_closed();
        }
        found
    }

    /// Peer: keeps its mapping of a freed segment, found again by `key`.
    pub fn keep_mapped(&self, key: Key, map: Mapping) {
        let evicted = {
            let mut q = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
            // One mapping per key: an older one is of a segment gone since.
            let stale = extract(&mut q, |(k, _)| *k == key);
            q.push_back((key, map));
            let over = q.len().saturating_sub(self.limit(1));
            (stale, q.drain(..over).collect::<Vec<_>>())
        };
        drop(evicted);
    }

    /// Peer: the mapping kept under `key`, if any.
    pub fn take_mapped(&self, key: Key) -> Option<Mapping> {
        let mut q = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
        let at = q.iter().position(|(k, _)| *k == key)?;
        q.remove(at).map(|(_, m)| m)
    }

    /// Segments and mappings kept now, and fds counted.
    pub fn counts(&self) -> (usize, usize, usize) {
        let c = self.created.lock().unwrap_or_else(|e| e.into_inner()).len();
        let m = self.mapped.lock().unwrap_or_else(|e| e.into_inner()).len();
        (c, m, self.fds.load(Relaxed))
    }
}

/// Removes and returns the entries of `q` that `out` picks, in order.
fn extract<T>(q: &mut VecDeque<T>, out: impl Fn(&T) -> bool) -> Vec<T> {
    let mut taken = Vec::new();
    let mut i = 0;
    while i < q.len() {
        if out(&q[i]) {
            taken.extend(q.remove(i));
        } else {
            i += 1;
        }
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameter's value bounds what is kept; 0 keeps nothing, no fd
    /// either, and what is kept beyond a lowered bound goes at the next keep.
    #[test]
    fn the_parameter_bounds_what_is_kept() {
        let k = Kept::new(4, 4, FDS);
        k.set(0);
        assert!(!k.take_fd());
        k.set(-3);
        assert!(!k.take_fd());
        k.set(1_000);
        assert_eq!((k.limit(0), k.limit(1), k.limit(2)), (MOST, MOST, FDS));
        k.set(2);
        assert_eq!((k.limit(0), k.limit(1), k.limit(2)), (2, 2, FDS));
        let page = |_: i32| {
            // SAFETY: an anonymous private page, owned by the Mapping.
            let p = unsafe {
                libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
            };
            assert_ne!(p, libc::MAP_FAILED);
            Mapping { base: NonNull::new(p.cast()).unwrap(), len: 4096 }
        };
        for (i, m) in (0..3).map(page).enumerate() {
            k.keep_mapped((1, i as i32, 4096), m);
        }
        assert_eq!(k.counts().1, 2, "the oldest went");
        assert!(k.take_mapped((1, 0, 4096)).is_none());
        k.set(0);
        k.keep_mapped((1, 9, 4096), page(0));
        assert_eq!(k.counts().1, 0, "lowered to 0: all went");
    }
}
