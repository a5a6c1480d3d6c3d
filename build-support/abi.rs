//! Which Open MPI release lines hwbarr builds for, decided from the text
//! of the headers (`mpi.h`, `ompi/mca/coll/coll.h`). Used by build.rs and
//! unit-tested by tests/build_abi.rs; no I/O here.

/// The release lines hwbarr supports, and the coll interface of each.
pub const SUPPORTED: &str = "Open MPI 4.1.x (coll API 2.0.0), 5.0.x (coll API 2.4.0) and 6.0.x (coll API 3.0.0)";

/// What differs between the supported release lines.
#[derive(Debug, PartialEq, Eq)]
pub struct Abi {
    /// Open MPI major, minor, release (from mpi.h).
    pub version: (u32, u32, u32),
    /// The coll framework's interface version the component announces.
    pub coll: (u32, u32, u32),
    /// The persistent barrier's MPI name.
    pub barrier_init: &'static str,
    /// Open MPI's help system reads help files from disk (4.1, 5.0); on
    /// 6.0 it knows only the texts compiled into Open MPI itself.
    pub help_files: bool,
}

/// The integer a `#define NAME <int>` line gives in `text`.
fn define(text: &str, name: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("#define") && w.next() == Some(name)).then(|| w.next()?.parse().ok())?
    })
}

/// The Open MPI release a `mpi.h` names, if it is Open MPI's.
pub fn version(mpi_h: &str) -> Option<(u32, u32, u32)> {
    Some((
        define(mpi_h, "OMPI_MAJOR_VERSION")?,
        define(mpi_h, "OMPI_MINOR_VERSION")?,
        define(mpi_h, "OMPI_RELEASE_VERSION")?,
    ))
}

/// Whether hwbarr builds for this release line (given its headers).
pub fn supported_line(major: u32, minor: u32) -> bool {
    matches!((major, minor), (4, 1) | (5, 0) | (6, 0))
}

/// Decides the ABI from `mpi.h` and `coll.h` (empty when missing); the
/// error is the one message the build prints.
pub fn decide(mpi_h: &str, coll_h: &str) -> Result<Abi, String> {
    let Some((major, minor, release)) = version(mpi_h) else {
        return Err(format!("this mpi.h is not Open MPI's (no OMPI_MAJOR_VERSION): hwbarr supports {SUPPORTED}"));
    };
    let has = |m: &str| coll_h.contains(&format!("#define {m}"));
    let version = (major, minor, release);
    match (major, minor) {
        (4, 1) if has("MCA_COLL_BASE_VERSION_2_0_0") => {
            Ok(Abi { version, coll: (2, 0, 0), barrier_init: "MPIX_Barrier_init", help_files: true })
        }
        (5, 0) if has("MCA_COLL_BASE_VERSION_2_4_0") => {
            Ok(Abi { version, coll: (2, 4, 0), barrier_init: "MPI_Barrier_init", help_files: true })
        }
        (6, 0) if has("MCA_COLL_BASE_VERSION_3_0_0") => {
            Ok(Abi { version, coll: (3, 0, 0), barrier_init: "MPI_Barrier_init", help_files: false })
        }
        (m, n) if supported_line(m, n) => Err(format!(
            "Open MPI {major}.{minor}.{release}: its coll interface header ompi/mca/coll/coll.h is missing or \
             unexpected. Install the development headers (Debian: libopenmpi-dev; from source: configure \
             --with-devel-headers, or scripts/build-ompi.sh)"
        )),
        _ => Err(format!("Open MPI {major}.{minor}.{release} is not supported: hwbarr builds for {SUPPORTED}")),
    }
}
