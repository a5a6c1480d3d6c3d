//! A timing probe of the request path (cargo feature `probe`, `make
//! probe`; never in a normal build, where every stamp compiles to nothing):
//! time-stamp-counter stamps at named points of the persistent and the
//! blocking barrier, summed up per pair of consecutive points at component
//! close. It answers where a persistent barrier's time goes between seeing
//! its release and its next arrival, the part that blocking barriers skip
//! (docs/benchmarks.md).

/// Where a stamp is taken.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "probe"), allow(dead_code))]
pub(crate) enum Point {
    /// A progress pass claimed an express barrier: its release is seen.
    Seen = 1,
    /// ... and completed its request.
    Completed,
    /// MPI_Start called hwbarr.
    Started,
    /// An express barrier entered the device in MPI_Start.
    Arrived,
    /// ... and completed at once (its arrival was the last).
    DoneAtStart,
    /// MPI_Barrier called hwbarr.
    BarrierIn,
    /// ... and hwbarr returns from it.
    BarrierOut,
    /// Open MPI's progress called hwbarr's callback, with modules watched.
    PassIn,
    /// ... and the callback returns.
    PassOut,
}

#[cfg(not(feature = "probe"))]
#[inline(always)]
pub(crate) fn stamp(_: Point) {}

/// The diagnostic feature `pairs` (`core::line::pairs`): on stderr at
/// component close, one line per process (nothing without it).
pub(crate) fn report_pairs() {
    #[cfg(feature = "pairs")]
    {
        let (n, p) = crate::core::line::pairs::counts();
        if n > 0 {
            let rank = crate::ompi::report::world_rank_label();
            eprintln!("hwbarr pairs rank {rank}: releases={n} paired={p} share={:.3}", p as f64 / n as f64);
        }
    }
}

#[cfg(not(feature = "probe"))]
pub(crate) fn report() {}

#[cfg(feature = "probe")]
pub(crate) use on::{report, stamp};

#[cfg(feature = "probe")]
mod on {
    use super::Point;
    use std::collections::BTreeMap;
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::atomic::{AtomicU64, AtomicUsize};
    use std::sync::OnceLock;
    use std::time::Instant;

    /// Stamps kept: 4 Mi (32 MiB), about a million barriers.
    const N: usize = 1 << 22;
    const TIME: u64 = (1 << 56) - 1;
    static BUF: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    /// The first stamp's clocks, to convert counter ticks to ns.
    static START: OnceLock<(Instant, u64)> = OnceLock::new();

    fn tsc() -> u64 {
        // SAFETY: rdtsc reads the time-stamp counter; no memory is touched.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// The point in the top byte, the counter below. Plain load and store
    /// of the index: the probed programs stamp from one thread.
    #[inline(always)]
    pub(crate) fn stamp(p: Point) {
        let i = NEXT.load(Relaxed);
        if i < N {
            if i == 0 {
                START.get_or_init(|| (Instant::now(), tsc()));
            }
            BUF[i].store((p as u64) << 56 | (tsc() & TIME), Relaxed);
            NEXT.store(i + 1, Relaxed);
        }
    }

    fn name(code: u64) -> &'static str {
        const NAMES: [&str; 10] =
            ["?", "seen", "completed", "started", "arrived", "done-at-start", "barrier-in", "barrier-out", "pass-in", "pass-out"];
        NAMES.get(code as usize).copied().unwrap_or("?")
    }

    /// Per pair of consecutive points (the first tenth of the stamps left
    /// out as warm-up): count, the mean of the fastest 98%, and that mean
    /// less one stamp's own cost ("net"), in ns; then the chains that
    /// docs/benchmarks.md reads. On stderr, one block per process.
    pub(crate) fn report() {
        let n = NEXT.load(Relaxed).min(N);
        let Some(&(t0, c0)) = START.get() else { return };
        if n < 1000 {
            return;
        }
        let ticks_per_ns = (tsc() - c0) as f64 / t0.elapsed().as_nanos().max(1) as f64;
        let mut pairs: BTreeMap<(u64, u64), Vec<u64>> = BTreeMap::new();
        for i in n / 10 + 1..n {
            let (a, b) = (BUF[i - 1].load(Relaxed), BUF[i].load(Relaxed));
            let d = (b & TIME).wrapping_sub(a & TIME);
            pairs.entry((a >> 56, b >> 56)).or_default().push(d);
        }
        // What a stamp adds to an interval: the time per stamp of a million
        // stamps in a row, timed by the clock (the counter ticks in steps
        // of several ns on some virtual machines, which a difference of two
        // reads would alias).
        const CAL: usize = 1 << 20;
        NEXT.store(0, Relaxed);
        let t = Instant::now();
        for _ in 0..CAL {
            stamp(Point::Seen);
        }
        let cost = t.elapsed().as_nanos() as f64 / CAL as f64;
        let rank = crate::ompi::report::world_rank_label();
        let mut net = BTreeMap::new();
        let mut out = format!("hwbarr probe rank {rank}: {ticks_per_ns:.3} ticks/ns, a stamp costs {cost:.1} ns\n");
        for ((a, b), mut v) in pairs {
            v.sort_unstable();
            let k = (v.len() * 98 / 100).max(1);
            let mean = v[..k].iter().sum::<u64>() as f64 / k as f64 / ticks_per_ns;
            net.insert((a, b), mean - cost);
            out += &format!(
                "hwbarr probe rank {rank}: {:>13} -> {:<13} n={:<8} mean={mean:6.1} net={:6.1} ns\n",
                name(a),
                name(b),
                v.len(),
                mean - cost
            );
        }
        let g = |a: Point, b: Point| net.get(&(a as u64, b as u64)).copied().unwrap_or(f64::NAN);
        use Point::*;
        let (complete, pass_end, ompi, start) =
            (g(Seen, Completed), g(Completed, PassOut), g(PassOut, Started), g(Started, Arrived));
        out += &format!(
            "hwbarr probe rank {rank}: persistent, release seen in progress -> next arrival {:.1} ns: \
             complete {complete:.1} + rest of hwbarr's pass {pass_end:.1} + Open MPI (rest of opal_progress, \
             MPI_Wait's return, MPI_Start) {ompi:.1} + hwbarr's start and arrival {start:.1}; \
             a pass of hwbarr's callback {:.1}, Open MPI between passes {:.1}\n",
            complete + pass_end + ompi + start,
            g(PassIn, PassOut),
            g(PassOut, PassIn)
        );
        out += &format!(
            "hwbarr probe rank {rank}: persistent, released at start: arrival -> completed {:.1}, \
             -> next MPI_Start in hwbarr {:.1} ns; blocking: Open MPI between MPI_Barrier's exit and next entry {:.1} ns\n",
            g(Arrived, DoneAtStart),
            g(DoneAtStart, Started),
            g(BarrierOut, BarrierIn)
        );
        eprint!("{out}");
    }
}
