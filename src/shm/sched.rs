//! The scheduler as a waiter meets it: a yield that tells whether it
//! handed the core to another task (the `contention` module counts them to
//! find a core the rank shares), and a thread that makes room on a CPU it
//! shares by moving to another its affinity allows (`make_room`).

/// Yields the core; whether another task ran meanwhile (this thread's
/// involuntary context switches went up).
pub fn yield_and_tell() -> bool {
    let before = involuntary_switches();
    // SAFETY: sched_yield has no preconditions.
    unsafe { libc::sched_yield() };
    matches!((before, involuntary_switches()), (Some(b), Some(a)) if a > b)
}

/// This thread's involuntary context switches so far (None if the kernel
/// will not say).
fn involuntary_switches() -> Option<libc::c_long> {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer it is given,
    // which points to one.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, u.as_mut_ptr()) };
    // SAFETY: zeroed, then filled by getrusage: every field is an integer.
    (r == 0).then(|| unsafe { u.assume_init() }.ru_nivcsw)
}

/// This thread's CPU affinity (None if the kernel will not say: more CPUs
/// than a `cpu_set_t` holds).
pub fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: a cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most the given size into `set`.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    (r == 0).then_some(set)
}

/// Sets this thread's CPU affinity; whether the kernel took it.
pub fn set_affinity(set: &libc::cpu_set_t) -> bool {
    // SAFETY: `set` is an initialised set of the size given.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) == 0 }
}

/// The CPUs in `set`, lowest first.
pub fn cpus(set: &libc::cpu_set_t) -> impl Iterator<Item = usize> + '_ {
    // SAFETY: CPU_ISSET reads the set, at indices below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(move |&c| unsafe { libc::CPU_ISSET(c, set) })
}

/// Pins this thread to `cpu`; whether the kernel took it.
pub fn pin_to(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: a cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sets a bit below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut one) };
    set_affinity(&one)
}

/// The CPU this thread runs on (None if the kernel will not say).
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// What a thread asked to make room (`make_room`) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aside {
    /// Its affinity allows no other CPU (or the kernel would not say).
    Nowhere,
    /// It could have moved and was not asked to, or the kernel refused.
    Stayed,
    /// It moved to another CPU.
    Moved,
    /// It moved, and the kernel would not give it its affinity back: it
    /// keeps only the CPUs it was moved among (`room`).
    Stuck,
}

/// Where a thread on CPU `at` may go of the CPUs it is `allowed`: those
/// that share its L3 cache (`near`, itself included), so that a barrier's
/// lines still pass within one cache; all the others if none of them is
/// allowed.
fn room(allowed: &[usize], at: usize, near: Option<&[usize]>) -> Vec<usize> {
    let others = || allowed.iter().copied().filter(move |&c| c != at);
    let close: Vec<usize> = others().filter(|c| near.is_some_and(|n| n.contains(c))).collect();
    if close.is_empty() {
        others().collect()
    } else {
        close
    }
}

/// Where this thread's affinity allows another CPU than the one it runs
/// on: moves it there if `go`, to one that shares its L3 cache if it may
/// (`room`), and gives it its affinity back (the set it read; on kernels
/// that keep a thread's own request, 6.2 and later, the thread then keeps
/// that set where a cpuset widened later would have widened it). The
/// kernel picks the CPU among those (on recent kernels it rotates through
/// them, on older ones it takes the lowest): not necessarily an idle one
/// where there are more than one.
///
/// Two ranks that take turns on one CPU by yielding stay there while
/// another CPU idles: each ran a moment ago, so the idle CPU's balancer
/// takes both for cache-hot and leaves them (12-57 ms measured here; two
/// processes that spin instead, 4-26 ms), and a nap did not help inside
/// MPI launches: the kernel woke every napping rank on the CPU it left
/// (docs/benchmarks.md, "Ranks that start on one CPU").
pub fn make_room(go: bool) -> Aside {
    let (Some(allowed), Some(at)) = (affinity(), current_cpu()) else { return Aside::Nowhere };
    // SAFETY: CPU_COUNT reads an initialised set.
    if !cpus(&allowed).any(|c| c == at) || unsafe { libc::CPU_COUNT(&allowed) } < 2 {
        return Aside::Nowhere;
    }
    if !go {
        return Aside::Stayed;
    }
    // (Under loom, whose models never get here, `topology` is not built.)
    #[cfg(not(loom))]
    let near = crate::topology::l3_cpus(std::path::Path::new("/sys/devices/system/cpu"), at);
    #[cfg(loom)]
    let near: Option<Vec<usize>> = None;
    let to = room(&cpus(&allowed).collect::<Vec<_>>(), at, near.as_deref());
    // SAFETY: a cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut elsewhere: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in to {
        // SAFETY: sets a bit below CPU_SETSIZE (`c` came from a set).
        unsafe { libc::CPU_SET(c, &mut elsewhere) };
    }
    // Moves this thread at once: its CPU is not in the set. The set it had
    // holds the CPU it is on then, so it stays there.
    if !set_affinity(&elsewhere) {
        return Aside::Stayed;
    }
    let now = current_cpu();
    if !(set_affinity(&allowed) || set_affinity(&allowed)) {
        return Aside::Stuck;
    }
    if now.is_some_and(|n| n != at) {
        Aside::Moved
    } else {
        Aside::Stayed
    }
}

#[cfg(test)]
mod tests {
    use super::room;

    /// A thread moves within its L3 where it may, else anywhere allowed;
    /// never to the CPU it is on.
    #[test]
    fn room_keeps_to_the_l3() {
        let all: Vec<usize> = (0..8).collect();
        assert_eq!(room(&all, 2, Some(&[2, 3])), [3]);
        assert_eq!(room(&all, 2, Some(&[0, 1, 2, 3])), [0, 1, 3]);
        assert_eq!(room(&all, 2, Some(&[2])), [0, 1, 3, 4, 5, 6, 7], "alone in its L3");
        assert_eq!(room(&all, 2, None), [0, 1, 3, 4, 5, 6, 7], "no L3 known");
        assert_eq!(room(&[2, 6], 2, Some(&[2, 3])), [6], "its L3's other CPU not allowed");
        assert_eq!(room(&[0, 1], 1, Some(&[0, 1])), [0]);
    }
}
