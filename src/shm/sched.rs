//! The scheduler as a waiter meets it: a yield that tells whether it
//! handed the core to another task (the `contention` module counts them to
//! find a core the rank shares).

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

/// What a thread asked to make room (`make_room`) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aside {
    /// Its affinity allows no other CPU (or the kernel would not say).
    Nowhere,
    /// It could have moved and was not asked to.
    Stayed,
    /// It moved to another CPU.
    Moved,
}

/// Where this thread's affinity allows another CPU than the one it runs
/// on: moves it there if `go` (the kernel picks which CPU), and gives it
/// its affinity back. Two ranks that take turns on one CPU by yielding
/// stay there while another CPU idles: each ran a moment ago, so the idle
/// CPU's balancer takes both for cache-hot and leaves them (20-50 ms
/// measured here, where a spinner's peer, kept waiting a whole time slice,
/// is taken over within a few), and a nap does not help either: the
/// kernel mostly wakes it on the CPU it left.
pub fn make_room(go: bool) -> Aside {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most `size` bytes into `allowed`;
    // sched_getcpu has no preconditions.
    let (got, cpu) = unsafe { (libc::sched_getaffinity(0, size, &mut allowed), libc::sched_getcpu()) };
    let at = match usize::try_from(cpu) {
        Ok(at) if got == 0 && at < libc::CPU_SETSIZE as usize => at,
        _ => return Aside::Nowhere,
    };
    // SAFETY: CPU_ISSET and CPU_COUNT read the set, `at` is below CPU_SETSIZE.
    if !unsafe { libc::CPU_ISSET(at, &allowed) } || unsafe { libc::CPU_COUNT(&allowed) } < 2 {
        return Aside::Nowhere;
    }
    if !go {
        return Aside::Stayed;
    }
    let mut elsewhere = allowed;
    // SAFETY: clears a bit below CPU_SETSIZE.
    unsafe { libc::CPU_CLR(at, &mut elsewhere) };
    // SAFETY: both sets are initialised and `size` bytes long. The first
    // call moves this thread at once (its CPU is not in the set); the
    // second gives back the set it had, which holds the CPU it is on now,
    // so it stays there.
    let now = unsafe {
        if libc::sched_setaffinity(0, size, &elsewhere) != 0 {
            return Aside::Stayed;
        }
        let now = libc::sched_getcpu();
        libc::sched_setaffinity(0, size, &allowed);
        now
    };
    if now >= 0 && now != cpu {
        Aside::Moved
    } else {
        Aside::Stayed
    }
}
