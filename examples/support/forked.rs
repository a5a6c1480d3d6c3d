//! Plain processes for the measurements without MPI (`sched_floor`,
//! `line_gap`): memory shared with forked children, the children
//! themselves, each bound to a cpu if asked.

/// Anonymous memory shared with the children we fork.
pub fn shared<T>(count: usize) -> &'static [T] {
    let bytes = std::mem::size_of::<T>() * count;
    // SAFETY: a fresh zero-filled shared mapping; every T used here
    // (atomics) is valid as all-zero bytes. Never unmapped: the process
    // exits after the measurement.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert!(p != libc::MAP_FAILED, "mmap failed");
        std::slice::from_raw_parts(p.cast::<T>(), count)
    }
}

/// Runs `body(i)` in `n` forked children and waits for all of them.
#[allow(dead_code)] // not every example forks unbound children
pub fn in_children(n: usize, body: impl Fn(usize)) {
    in_children_on(n, None, body)
}

/// As `in_children`; with `cpus`, child i is bound to cpu i mod `cpus`.
pub fn in_children_on(n: usize, cpus: Option<usize>, body: impl Fn(usize)) {
    let mut pids = Vec::new();
    for i in 0..n {
        // SAFETY: single-threaded here; the child only runs `body` and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            if let Some(c) = cpus {
                pin_to(i % c);
            }
            body(i);
            // SAFETY: leave the child without running the parent's atexit.
            unsafe { libc::_exit(0) };
        }
        pids.push(pid);
    }
    for pid in pids {
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
}

pub fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; we set one CPU for ourselves.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
