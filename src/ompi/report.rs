//! What hwbarr tells its users, through Open MPI's own facilities:
//! warnings are topics of a help file (`share/help-coll-hwbarr.txt`,
//! installed next to the component, whose directory is added to Open MPI's
//! help search path), rendered by Open MPI's help system in its usual boxed
//! form; diagnostics (`coll_hwbarr_verbose`) go to an Open MPI output
//! stream. If the help file is not beside the component (a copied .so), a
//! warning is one plain `coll:hwbarr:` line instead. Open MPI 6.0's help
//! system knows only the texts compiled into Open MPI and no longer reads
//! files (it prints a "Sorry!" box for any other): there hwbarr renders the
//! same topics itself, in the same box, from the help file compiled into
//! the .so.
//!
//! A warning is written by the one process that speaks for the event
//! (world rank 0 for the job, a communicator's rank 0 for it), in a single
//! write, rather than sent through mpirun's aggregation (`opal_show_help`):
//! measured here, Open MPI 4.1.4 loses such messages when several processes
//! send at once ("ORTE_ERROR_LOG: Data unpack would read past end of
//! buffer" in show_help.c, Open MPI's own messages included), and 5.0.10
//! folds distinct messages of one topic into one, or prints them twice when
//! aggregation is off.

use std::ffi::{c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed};
use std::sync::Mutex;

use crate::ompi::ffi;

/// This process's rank in its job (MPI_COMM_WORLD's), for messages:
/// mpirun's `OMPI_COMM_WORLD_RANK`, else what a direct launch sets
/// (`PMIX_RANK` under `srun --mpi=pmix`, `PMI_RANK` under PMI-2); None in a
/// process no launcher started (ompi_info, a singleton).
pub fn world_rank() -> Option<String> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"].iter().find_map(|v| std::env::var(v).ok())
}

/// [`world_rank`] for a message's "world rank N" prefix: "?" where no
/// launcher said it.
pub fn world_rank_label() -> String {
    world_rank().unwrap_or_else(|| "?".into())
}

/// The help file's name, as Open MPI looks it up.
pub const HELP_FILE: &str = "help-coll-hwbarr.txt";

/// The topics of the help file. Each takes the one-line summary.
#[derive(Clone, Copy, Debug)]
pub enum Topic {
    InvalidValue,
    VersionMismatch,
    SoleComponent,
    NoDevice,
    Disagreement,
    NotHwbarr,
    InternalError,
    Stalled,
}

impl Topic {
    fn key(self) -> &'static CStr {
        match self {
            Topic::InvalidValue => c"invalid-value",
            Topic::VersionMismatch => c"version-mismatch",
            Topic::SoleComponent => c"sole-component",
            Topic::NoDevice => c"no-device",
            Topic::Disagreement => c"disagreement",
            Topic::NotHwbarr => c"not-hwbarr",
            Topic::InternalError => c"internal-error",
            Topic::Stalled => c"stalled",
        }
    }
}

/// The help file as built into the .so, for release lines whose help
/// system reads no files (`ffi::abi::HELP_FILES`).
const HELP_TEXT: &str = include_str!("../../share/help-coll-hwbarr.txt");

/// The line Open MPI's help system draws above and below a message.
const DASH_LINE: &str = "--------------------------------------------------------------------------\n";

/// The text of `[topic]` in a help file: the lines up to the next topic,
/// without `#` comment lines (the help file format Open MPI reads).
fn topic_text(file: &str, topic: &str) -> Option<String> {
    let head = format!("[{topic}]");
    let mut lines = file.lines().skip_while(|l| l.trim_end() != head);
    lines.next()?;
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with('[')).filter(|l| !l.starts_with('#')).collect();
    Some(body.iter().map(|l| format!("{l}\n")).collect())
}

/// `topic` of the built-in help file with `summary` as its `%s`, boxed as
/// Open MPI's help system boxes a message with an error header.
fn render_builtin(topic: Topic, summary: &str) -> Option<String> {
    let text = topic_text(HELP_TEXT, topic.key().to_str().ok()?)?;
    let text = text.replacen("%s", summary, 1);
    Some(format!("{DASH_LINE}{text}{DASH_LINE}"))
}

static HELP_FOUND: AtomicBool = AtomicBool::new(false);
static STREAM: AtomicI32 = AtomicI32::new(-1);
static VERBOSITY: AtomicI32 = AtomicI32::new(0);

/// The directory our own .so was loaded from.
fn component_dir() -> Option<PathBuf> {
    // SAFETY: Dl_info is a C struct of pointers and integers; all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr on the address of one of our own statics, with a
    // valid out-structure; dli_fname is a NUL-terminated path when set.
    let ok = unsafe { libc::dladdr(std::ptr::addr_of!(HELP_FOUND).cast(), &mut info) } != 0;
    if !ok || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: see above.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_str().ok()?;
    Path::new(path).parent().map(Path::to_path_buf)
}

/// At component registration: find the help file and open the output
/// stream. Safe to call more than once.
pub fn init() {
    if !ffi::abi::HELP_FILES {
        return;
    }
    if let Some(dir) = component_dir().filter(|d| d.join(HELP_FILE).is_file()) {
        if !HELP_FOUND.swap(true, Relaxed) {
            if let Ok(c) = CString::new(dir.to_string_lossy().as_bytes()) {
                // SAFETY: a NUL-terminated path; Open MPI copies it.
                unsafe { ffi::hwb_show_help_add_dir(c.as_ptr()) };
            }
        }
    }
}

/// Opens (once) the diagnostics stream at `verbosity`.
pub fn set_verbosity(verbosity: c_int) {
    VERBOSITY.store(verbosity, Relaxed);
    if STREAM.load(Relaxed) < 0 {
        // SAFETY: opens an Open MPI output stream; no pointers involved.
        let s = unsafe { ffi::hwb_output_open(verbosity) };
        STREAM.store(s, Relaxed);
    }
}

/// A warning under `topic`, with a one-line `summary`. The caller decides
/// which rank speaks.
pub fn warn(topic: Topic, summary: &str) {
    // One at a time: Open MPI's help system is not thread-safe, and
    // threads of one process (MPI_THREAD_MULTIPLE) can fall back at once.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let line = summary.replace('\n', " ");
    if !ffi::abi::HELP_FILES {
        if let Some(text) = render_builtin(topic, &line) {
            use std::io::Write;
            let _ = std::io::stderr().write_all(text.as_bytes());
            return;
        }
    } else if HELP_FOUND.load(Relaxed) {
        if let Some(text) = render(topic, &line) {
            use std::io::Write;
            let _ = std::io::stderr().write_all(text.as_bytes());
            return;
        }
    }
    plain(&line);
}

/// The help system's rendering of `topic` with `summary`, if it has one.
fn render(topic: Topic, summary: &str) -> Option<String> {
    let c = CString::new(summary.as_bytes()).ok()?;
    // SAFETY: two NUL-terminated strings; the shim passes the summary as
    // the topic's "%s" and returns a malloc'ed string or NULL.
    let text = unsafe { ffi::take_string(ffi::hwb_help_string(topic.key().as_ptr(), c.as_ptr())) }?;
    // A topic the file lacks renders as Open MPI's "Sorry!" text.
    (!text.contains("Sorry!")).then_some(text)
}

/// A diagnostic line at verbosity `level` (1-3) of `coll_hwbarr_verbose`.
pub fn verbose(level: c_int, msg: &str) {
    if level > VERBOSITY.load(Relaxed) {
        return;
    }
    let s = STREAM.load(Relaxed);
    if s < 0 {
        plain(msg);
        return;
    }
    if let Ok(c) = CString::new(format!("coll:hwbarr: {msg}")) {
        // SAFETY: an open stream and a NUL-terminated line printed as %s.
        unsafe { ffi::hwb_output(s, c.as_ptr()) };
    }
}

/// One line to stderr in a single write, so that lines of ranks sharing a
/// terminal do not interleave.
fn plain(msg: &str) {
    use std::io::Write;
    let line = format!("coll:hwbarr: {msg}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Runs `f`, turning a panic into `fail` plus one warning: no panic may
/// unwind into Open MPI's C frames. Every `extern "C"` entry goes through it.
pub fn guard<T>(what: &str, fail: T, f: impl FnOnce() -> T) -> T {
    contain(|| what.to_string(), f).unwrap_or(fail)
}

/// Runs `f`; a panic in it (a bug of hwbarr's) ends as None plus one
/// warning that names `what` (made only then) and the panic's message.
/// Inlined: on a barrier's fast path it costs no call, only an unwind
/// table entry; the warning is made off that path (`panicked`).
#[inline(always)]
pub fn contain<T>(what: impl FnOnce() -> String, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(payload) => {
            panicked(what, payload);
            None
        }
    }
}

/// The warning for a panic that `contain` caught, contained itself, so
/// that `contain` needs no second containment around it: a panic while the
/// warning is made (in `what`, formatting, writing) leaves a fixed line
/// instead, and the payload is dropped apart, once nothing unwinds (a
/// panic in its drop then only leaks it; during an unwind it would abort).
#[cold]
#[inline(never)]
fn panicked(what: impl FnOnce() -> String, payload: Box<dyn std::any::Any + Send>) {
    let said = catch_unwind(AssertUnwindSafe(|| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        warn(Topic::InternalError, &format!("internal error in {}: {msg}", what()));
    }));
    if let Err(p) = said {
        std::mem::forget(p);
        let fallback = catch_unwind(|| plain("internal error, and another while reporting it"));
        if let Err(p) = fallback {
            std::mem::forget(p);
        }
    }
    #[cfg(test)]
    tests::WARNED.with(|w| w.set(w.get() + 1));
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        // Its drop panicked: leak what it left.
        std::mem::forget(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Warnings (or their fixed fallback) `panicked` made on this thread.
        pub static WARNED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// A panic is contained with one warning, and so is one while it is
    /// reported: in the `what` of the warning, in the drop of the panic's
    /// payload, or both at once.
    #[test]
    fn contain_keeps_every_panic_in() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("the payload's drop panics too");
            }
        }
        let warned = || WARNED.with(|w| w.get());
        let w0 = warned();
        assert_eq!(contain(|| "a test".into(), || 5), Some(5));
        assert_eq!(warned(), w0);
        assert_eq!(contain(|| "a test".into(), || -> i32 { panic!("injected") }), None);
        assert_eq!(contain(|| panic!("the warning's what panics"), || -> i32 { panic!("injected") }), None);
        assert_eq!(contain(|| "a test".into(), || -> i32 { std::panic::panic_any(Bomb) }), None);
        assert_eq!(contain(|| panic!("the warning's what panics"), || -> i32 { std::panic::panic_any(Bomb) }), None);
        assert_eq!(warned(), w0 + 4);
    }

    #[test]
    fn every_topic_is_in_the_built_in_help_file() {
        for t in [
            Topic::InvalidValue,
            Topic::VersionMismatch,
            Topic::SoleComponent,
            Topic::NoDevice,
            Topic::Disagreement,
            Topic::NotHwbarr,
            Topic::InternalError,
            Topic::Stalled,
        ] {
            let r = render_builtin(t, "SUMMARY LINE").unwrap_or_else(|| panic!("{t:?} missing"));
            assert!(r.starts_with(DASH_LINE) && r.ends_with(DASH_LINE), "{r}");
            assert!(r.contains("SUMMARY LINE") && !r.contains("%s"), "{t:?}: {r}");
            assert!(!r.lines().any(|l| l.starts_with('#') || l.starts_with('[')), "{t:?}: {r}");
        }
        assert!(topic_text(HELP_TEXT, "no-such-topic").is_none());
    }

    #[test]
    fn a_topic_ends_at_the_next_one_and_skips_comments() {
        let f = "# head\n[a]\nline 1\n# note\n\nline 2\n[b]\nother\n";
        assert_eq!(topic_text(f, "a").unwrap(), "line 1\n\nline 2\n");
        assert_eq!(topic_text(f, "b").unwrap(), "other\n");
    }
}
