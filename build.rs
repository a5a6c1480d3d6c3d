//! Generates the FFI layer from the Open MPI headers installed on this
//! machine and compiles our C glue. Nothing of Open MPI is vendored.
//!
//! One tree, two ABIs: the Open MPI version is read from the headers we are
//! given (`mpicc` on PATH, or `$OMPI_PREFIX`) and decides the coll interface
//! version the component announces. Everything version-dependent is decided
//! here and in the C shim; the Rust logic sees one set of unversioned names.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build-support/abi.rs"]
mod abi;
use abi::SUPPORTED;

/// Stops the build with one message (cargo shows the script's stderr).
fn fail(msg: &str) -> ! {
    eprintln!("\nhwbarr build: {msg}\n");
    std::process::exit(1);
}

/// Runs `<mpicc> --showme:<what>` and splits its answer into paths.
fn showme(mpicc: &Path, what: &str) -> Option<Vec<PathBuf>> {
    let out = Command::new(mpicc).arg(format!("--showme:{what}")).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).split_whitespace().map(PathBuf::from).collect())
}

/// Include and library directories: from `$OMPI_PREFIX/bin/mpicc` if
/// given (falling back to the usual layout), else from the mpicc on PATH.
fn ompi_dirs() -> (Vec<PathBuf>, Vec<PathBuf>) {
    if let Some(prefix) = env::var_os("OMPI_PREFIX") {
        let p = PathBuf::from(prefix);
        let mpicc = p.join("bin/mpicc");
        if let (Some(i), Some(l)) = (showme(&mpicc, "incdirs"), showme(&mpicc, "libdirs")) {
            return (i, l);
        }
        return (vec![p.join("include"), p.join("include/openmpi")], vec![p.join("lib"), p.join("lib64")]);
    }
    match (showme(Path::new("mpicc"), "incdirs"), showme(Path::new("mpicc"), "libdirs")) {
        (Some(i), Some(l)) => (i, l),
        _ => fail(&format!(
            "mpicc not found: install Open MPI with its development headers ({SUPPORTED}; \
             Debian 12: apt-get install openmpi-bin libopenmpi-dev), or set OMPI_PREFIX=<install prefix> \
             (scripts/build-ompi.sh builds a 5.0 or 6.0 release into one)"
        )),
    }
}

/// The first header named `rel` under the include directories.
fn find(incs: &[PathBuf], rel: &str) -> Option<PathBuf> {
    incs.iter().map(|d| d.join(rel)).find(|p| p.exists())
}

/// Stops the build, naming the Open MPI and how to get them, when the
/// headers a component needs are not installed.
fn headers_present(incs: &[PathBuf], (a, b, c): (u32, u32, u32)) {
    for h in ["ompi/mca/coll/coll.h", "ompi_config.h", "ompi/request/request.h"] {
        if find(incs, h).is_none() {
            let how = match env::var("OMPI_PREFIX") {
                Ok(p) => format!(
                    "the Open MPI at {p} was installed without them: rebuild it with configure \
                     --with-devel-headers, or with scripts/build-ompi.sh TARBALL {p}, which also adds the \
                     headers that --with-devel-headers forgets"
                ),
                Err(_) => "install the development headers (Debian: libopenmpi-dev), or point OMPI_PREFIX at \
                     an Open MPI built with scripts/build-ompi.sh"
                    .to_string(),
            };
            fail(&format!("Open MPI {a}.{b}.{c} has no component headers ({h} is not under {incs:?}): {how}"));
        }
    }
}

fn abi(incs: &[PathBuf]) -> abi::Abi {
    let mpi_h = find(incs, "mpi.h").unwrap_or_else(|| fail(&format!("mpi.h not found under {incs:?}")));
    let text = std::fs::read_to_string(&mpi_h).unwrap_or_default();
    if let Some(v) = abi::version(&text).filter(|v| abi::supported_line(v.0, v.1)) {
        headers_present(incs, v);
    }
    let coll = find(incs, "ompi/mca/coll/coll.h").and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    abi::decide(&text, &coll).unwrap_or_else(|e| fail(&format!("{e} (headers: {})", mpi_h.display())))
}

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=ompi-headers");
    println!("cargo:rerun-if-changed=build-support");
    println!("cargo:rerun-if-env-changed=OMPI_PREFIX");
    println!("cargo:rerun-if-env-changed=PATH");

    let (incs, libs) = ompi_dirs();
    let abi = abi(&incs);
    for i in &incs {
        println!("cargo:rerun-if-changed={}", i.join("mpi.h").display());
    }

    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    cc::Build::new()
        .file(root.join("ompi-headers/hwbarr_shim.c"))
        .includes(&incs)
        .include(root.join("ompi-headers"))
        .warnings(true)
        .extra_warnings(true)
        // Open MPI's own headers trip these; our code does not need them.
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-sign-compare")
        .compile("hwbarr_shim");

    for l in &libs {
        if Path::new(l).exists() {
            println!("cargo:rustc-link-search=native={}", l.display());
        }
    }
    // The component names the library that holds Open MPI's internals as
    // its one Open MPI dependency, as Open MPI's own DSO components do:
    // libmpi on 4.1 and 5.0, libopen_mpi on 6.0 (where libmpi is only the
    // API). A process that loaded libmpi into a local scope (Python's
    // ctypes, the mpi4py wheel) leaves those symbols invisible to later
    // dlopens; through this dependency the component finds the very library
    // the process runs, and Open PAL behind it, in its own scope. Not Open
    // PAL by name: its soname differs on every release line (.40, .80, .0),
    // while libmpi's is shared by 4.1 and 5.0 (.40), so a component of the
    // other of those two lines binds to the running libmpi and reaches our
    // version check (component.rs) instead of pulling a second Open PAL in.
    // Between 6.0 and the others the names differ: a foreign component
    // pulls its own line's library in if the library path has it (and is
    // refused by that check), or fails in dlopen with Open MPI's message
    // naming the library; either way the job runs on.
    let internals = if libs.iter().any(|l| l.join("libopen_mpi.so").exists()) { "open_mpi" } else { "mpi" };
    println!("cargo:rustc-cdylib-link-arg=-l{internals}");
    for kind in ["tests", "examples"] {
        println!("cargo:rustc-link-arg-{kind}=-lmpi");
        println!("cargo:rustc-link-arg-{kind}=-lopen-pal");
    }

    let mut b = bindgen::Builder::default()
        .header(root.join("wrapper.h").to_string_lossy())
        .clang_arg(format!("-I{}", root.display()))
        // libclang 14 (Debian 12) stops at 5.0's _Float16 typedef; the type
        // is never used by what we bind.
        .clang_arg("-D_Float16=short")
        .allowlist_type("mca_coll_base_component_t")
        .allowlist_type("mca_coll_base_module_t")
        .allowlist_function("hwb_.*")
        .allowlist_function("opal_progress")
        .allowlist_function("opal_progress_(un)?register")
        .allowlist_function("mca_base_component_var_register")
        .allowlist_var("MCA_BASE_VERSION_(MAJOR|MINOR|RELEASE)")
        .allowlist_var("OMPI_(MAJOR|MINOR|RELEASE)_VERSION")
        .allowlist_var("MCA_COLL_BASE_TAG_BARRIER")
        .allowlist_var("OMPI_SUCCESS|OMPI_ERROR|OMPI_ERR_.*")
        .allowlist_var("MCA_BASE_METADATA_PARAM_NONE")
        .allowlist_var("MPI_ANY_SOURCE")
        .allowlist_var("MPI_ERR_REQUEST")
        .rustified_enum("mca_base_var_type_t")
        .rustified_enum("mca_base_var_info_lvl_t")
        .rustified_enum("mca_base_var_scope_t")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false);
    for i in &incs {
        b = b.clang_arg(format!("-I{}", i.display()));
    }
    let bindings = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || b.generate())).unwrap_or_else(|_| {
        fail("bindgen could not run libclang: install libclang-dev (Debian: apt-get install libclang-dev)")
    });
    let bindings = bindings.unwrap_or_else(|e| fail(&format!("bindgen failed on wrapper.h: {e}")));
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    bindings.write_to_file(out.join("ompi_bindings.rs")).expect("write bindings");

    // The version facts the Rust side needs, as constants.
    let (v, c) = (abi.version, abi.coll);
    std::fs::write(
        out.join("ompi_abi.rs"),
        format!(
            "/// The Open MPI release hwbarr was built against, as words (also\n\
             /// findable in the .so: scripts/install.sh and the tests read it).\n\
             pub const BUILT_FOR: &str = \"Open MPI {}.{}.{}\";\n\
             /// The Open MPI release hwbarr was built against.\n\
             pub const OMPI_VERSION: (u32, u32, u32) = ({}, {}, {});\n\
             /// The coll framework interface version the component announces.\n\
             pub const COLL_API_VERSION: (i32, i32, i32) = ({}, {}, {});\n\
             /// The MPI name of the persistent barrier in this release.\n\
             pub const BARRIER_INIT_NAME: &str = {:?};\n\
             /// Open MPI's help system reads help files from disk (false on\n\
             /// 6.0, which knows only the texts compiled into it).\n\
             pub const HELP_FILES: bool = {};\n",
            v.0, v.1, v.2, v.0, v.1, v.2, c.0, c.1, c.2, abi.barrier_init, abi.help_files
        ),
    )
    .expect("write ompi_abi.rs");
}
