//! hwbarr's MCA parameters (`coll_hwbarr_*`): registered with Open MPI's
//! variable system so that `ompi_info --param coll hwbarr --level 9` lists
//! them with their help strings, and settable as usual (`--mca`, env,
//! param files).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;
use std::ptr::addr_of_mut;

use crate::ffi::{
    mca_base_component_t, mca_base_component_var_register, mca_base_var_info_lvl_t as Lvl,
    mca_base_var_scope_t as Scope, mca_base_var_type_t as Ty,
};

/// Default priority: above coll/tuned (30), so installing hwbarr is enough
/// for it to serve the barrier on the communicators it accepts.
pub const DEFAULT_PRIORITY: c_int = 40;

/// The barrier algorithm a communicator gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// TUC toggle-wire barrier on the node's shared-memory device.
    Toggle,
    /// Blue Gene DMA-counter barrier on the node's shared-memory device.
    Counter,
    /// coll/basic's linear barrier over the point-to-point engine.
    Linear,
    /// Pick from facts (ranks, oversubscription).
    Auto,
}

impl Algorithm {
    pub const VALID: &'static str = "toggle, counter, linear, auto";

    /// Parses an `algorithm` value (case-insensitive); the error names the
    /// valid values.
    pub fn parse(s: &str) -> Result<Algorithm, String> {
        use Algorithm::*;
        parse_choice("algorithm", s, &[("toggle", Toggle), ("counter", Counter), ("linear", Linear), ("auto", Auto)])
    }
}

/// Parses the value `s` of the string parameter `coll_hwbarr_<param>`
/// (case-insensitive; empty means `auto`) against `choices`. The error is
/// the one line to report, naming the valid values.
pub fn parse_choice<T: Copy>(param: &str, s: &str, choices: &[(&str, T)]) -> Result<T, String> {
    let v = s.trim().to_ascii_lowercase();
    let v = if v.is_empty() { "auto" } else { v.as_str() };
    choices.iter().find(|(name, _)| *name == v).map(|&(_, t)| t).ok_or_else(|| {
        let valid: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
        format!(
            "invalid value '{s}' for MCA parameter coll_hwbarr_{param} (valid values: {}); \
             hwbarr is disabled for this job, other components serve MPI_Barrier",
            valid.join(", ")
        )
    })
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            Algorithm::Toggle => "toggle",
            Algorithm::Counter => "counter",
            Algorithm::Linear => "linear",
            Algorithm::Auto => "auto",
        })
    }
}

/// A snapshot of the parameters, as Open MPI set them.
#[derive(Clone, Debug)]
pub struct Params {
    pub priority: c_int,
    pub algorithm: Result<Algorithm, String>,
    pub verbose: c_int,
    pub spin: c_int,
    /// `idle`, parsed: None = auto.
    pub idle: Result<Option<crate::wait::Idle>, String>,
    /// `inter`, parsed: None = auto.
    pub inter: Result<Option<crate::inter::InterAlgorithm>, String>,
}

impl Params {
    /// The first invalid value, as the one line to report.
    pub fn error(&self) -> Option<&str> {
        self.algorithm
            .as_ref()
            .err()
            .or(self.idle.as_ref().err())
            .map(String::as_str)
    }
}

// Storage Open MPI's variable system writes into (it needs stable addresses).
static mut PRIORITY: c_int = DEFAULT_PRIORITY;
static mut VERBOSE: c_int = 0;
static mut SPIN: c_int = -1;
static mut IDLE: *mut c_char = c"auto".as_ptr() as *mut c_char;
static mut INTER: *mut c_char = c"auto".as_ptr() as *mut c_char;
static mut ALGORITHM: *mut c_char = c"auto".as_ptr() as *mut c_char;

/// Reads the current parameter values.
pub fn current() -> Params {
    // SAFETY: Open MPI writes these only while registering or setting
    // variables, which it does before asking the component anything; the
    // string storage is either our static default or a string Open MPI
    // allocated and keeps alive.
    unsafe {
        let text = |p: *mut c_char| {
            if p.is_null() {
                "auto".into()
            } else {
                CStr::from_ptr(p).to_string_lossy()
            }
        };
        let alg = text(*addr_of_mut!(ALGORITHM));
        let idle = text(*addr_of_mut!(IDLE));
        let inter = text(*addr_of_mut!(INTER));
        Params {
            priority: *addr_of_mut!(PRIORITY),
            algorithm: Algorithm::parse(&alg),
            verbose: *addr_of_mut!(VERBOSE),
            spin: *addr_of_mut!(SPIN),
            idle: crate::wait::Idle::parse(&idle),
            inter: crate::inter::InterAlgorithm::parse(&inter),
        }
    }
}

/// Registers every parameter for `component`; called by Open MPI through
/// the component's `mca_register_component_params`.
///
/// # Safety
/// `component` must point to hwbarr's component structure.
pub unsafe fn register(component: *const mca_base_component_t) -> c_int {
    let reg = |name: &CStr, help: &CStr, ty: Ty, lvl: Lvl, storage: *mut c_void| {
        // SAFETY: names and help are NUL-terminated statics; storage is one
        // of our statics, of the type `ty` says.
        unsafe {
            mca_base_component_var_register(
                component,
                name.as_ptr(),
                help.as_ptr(),
                ty,
                std::ptr::null_mut(),
                0,
                0,
                lvl,
                Scope::MCA_BASE_VAR_SCOPE_READONLY,
                storage,
            )
        }
    };
    let results = [
        reg(
            c"priority",
            c"Priority of the hwbarr coll component (default 40, above coll/tuned's 30: installing hwbarr \
              makes it serve MPI_Barrier on every communicator it accepts; 0 or less disables it)",
            Ty::MCA_BASE_VAR_TYPE_INT,
            Lvl::OPAL_INFO_LVL_6,
            addr_of_mut!(PRIORITY).cast(),
        ),
        reg(
            c"algorithm",
            c"Barrier algorithm: 'toggle' (TUC toggle-wire barrier on shared memory), 'counter' \
              (Blue Gene DMA-counter barrier on shared memory), 'linear' (coll/basic's linear barrier \
              over point-to-point), 'auto' (choose from rank count and oversubscription). \
              Valid values: toggle, counter, linear, auto",
            Ty::MCA_BASE_VAR_TYPE_STRING,
            Lvl::OPAL_INFO_LVL_5,
            addr_of_mut!(ALGORITHM).cast(),
        ),
        reg(
            c"verbose",
            c"Verbosity of hwbarr: 0 silent, 1 one line per communicator saying which algorithm serves \
              it (from its rank 0), 2 also one line per rank and communicator at release with the \
              number of barriers hwbarr served",
            Ty::MCA_BASE_VAR_TYPE_INT,
            Lvl::OPAL_INFO_LVL_5,
            addr_of_mut!(VERBOSE).cast(),
        ),
        reg(
            c"spin",
            c"Polls of the barrier's shared word between two turns of Open MPI's progress engine while a \
              rank waits (-1: automatic, 256 when every rank on the node has a core, 1 when cores are shared: \
              ranks outnumber them or mpi_yield_when_idle is set; 0: never turn progress while waiting - for \
              testing only: a peer's pending rendezvous then deadlocks)",
            Ty::MCA_BASE_VAR_TYPE_INT,
            Lvl::OPAL_INFO_LVL_9,
            addr_of_mut!(SPIN).cast(),
        ),
        reg(
            c"idle",
            c"What a rank waiting in a barrier does between rounds of polls: 'spin' (keep the core), \
              'yield' (sched_yield), 'sleep' (sleep on the barrier's shared word until the releasing rank \
              wakes it - a futex; no system call when nobody sleeps), 'auto' (sleep when ranks outnumber \
              cores, yield when mpi_yield_when_idle is set, spin otherwise). Valid values: auto, spin, yield, sleep",
            Ty::MCA_BASE_VAR_TYPE_STRING,
            Lvl::OPAL_INFO_LVL_9,
            addr_of_mut!(IDLE).cast(),
        ),
        reg(
            c"inter",
            c"Barrier among node leaders on communicators that span nodes, over point-to-point: \
              'counter' (the patent's broadcast: one zero-byte message to every other leader, one round), \
              'dissemination' (log2(nodes) rounds), 'auto' (counter up to 3 nodes, dissemination above). \
              Valid values: auto, counter, dissemination",
            Ty::MCA_BASE_VAR_TYPE_STRING,
            Lvl::OPAL_INFO_LVL_5,
            addr_of_mut!(INTER).cast(),
        ),
    ];
    results.into_iter().find(|&r| r < 0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_the_four_and_names_them_otherwise() {
        assert_eq!(Algorithm::parse("Toggle"), Ok(Algorithm::Toggle));
        assert_eq!(Algorithm::parse(" counter "), Ok(Algorithm::Counter));
        assert_eq!(Algorithm::parse("linear"), Ok(Algorithm::Linear));
        assert_eq!(Algorithm::parse("auto"), Ok(Algorithm::Auto));
        let e = Algorithm::parse("tree").unwrap_err();
        assert!(e.contains("'tree'") && e.contains(Algorithm::VALID), "{e}");
        assert_eq!(e.lines().count(), 1);
    }
}
