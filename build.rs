//! Generates the FFI layer from the Open MPI headers installed on this
//! machine and compiles our C glue. Nothing of Open MPI is vendored.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fail(msg: &str) -> ! {
    eprintln!("\nhwbarr build: {msg}\n");
    panic!("hwbarr build: {msg}");
}

/// Runs `mpicc --showme:<what>` and splits its answer into paths.
fn showme(what: &str) -> Option<Vec<PathBuf>> {
    let out = Command::new("mpicc")
        .arg(format!("--showme:{what}"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(PathBuf::from)
            .collect(),
    )
}

/// Include and library directories: under $OMPI_PREFIX if given, else from mpicc.
fn ompi_dirs() -> (Vec<PathBuf>, Vec<PathBuf>) {
    if let Some(prefix) = env::var_os("OMPI_PREFIX") {
        let p = PathBuf::from(prefix);
        let incs = vec![p.join("include"), p.join("include/openmpi")];
        return (incs, vec![p.join("lib"), p.join("lib64")]);
    }
    match (showme("incdirs"), showme("libdirs")) {
        (Some(i), Some(l)) => (i, l),
        _ => fail(
            "mpicc not found: install Open MPI 4.1 with its development headers \
             (Debian: apt-get install openmpi-bin libopenmpi-dev), or set OMPI_PREFIX=<install prefix>",
        ),
    }
}

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=ompi-headers");
    println!("cargo:rerun-if-env-changed=OMPI_PREFIX");

    let (incs, libs) = ompi_dirs();
    let has = |rel: &str| incs.iter().any(|d| d.join(rel).exists());
    if !has("ompi/mca/coll/coll.h") || !has("ompi_config.h") {
        fail(&format!(
            "Open MPI's component headers (ompi/mca/coll/coll.h) are not under {:?}: \
             install libopenmpi-dev (Debian) or point OMPI_PREFIX at a full Open MPI 4.1 install",
            incs
        ));
    }

    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    cc::Build::new()
        .file(root.join("ompi-headers/hwbarr_shim.c"))
        .includes(&incs)
        .include(root.join("ompi-headers"))
        .warnings(false)
        .compile("hwbarr_shim");

    for l in &libs {
        if Path::new(l).exists() {
            println!("cargo:rustc-link-search=native={}", l.display());
        }
    }
    println!("cargo:rustc-link-lib=dylib=mpi");
    println!("cargo:rustc-link-lib=dylib=open-pal");

    let mut b = bindgen::Builder::default()
        .header(root.join("wrapper.h").to_string_lossy())
        .clang_arg(format!("-I{}", root.display()))
        .allowlist_type("mca_coll_base_component_2_0_0_t")
        .allowlist_type("mca_coll_base_module_2_3_0_t")
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
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("ompi_bindings.rs");
    bindings.write_to_file(out).expect("write bindings");
}
