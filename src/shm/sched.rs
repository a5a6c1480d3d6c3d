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
