//! The build's version decision (build-support/abi.rs) on the headers of
//! each release line, and its one message for the ones we do not support.

#[path = "../build-support/abi.rs"]
mod abi;

fn mpi_h(major: u32, minor: u32, release: u32) -> String {
    format!(
        "#define OMPI_MAJOR_VERSION {major}\n#define OMPI_MINOR_VERSION {minor}\n#define OMPI_RELEASE_VERSION {release}\n"
    )
}

const COLL_41: &str = "#define MCA_COLL_BASE_VERSION_2_0_0 \\\n  OMPI_MCA_BASE_VERSION_2_1_0(\"coll\", 2, 0, 0)\n";
const COLL_50: &str = "#define MCA_COLL_BASE_VERSION_2_4_0 \\\n  OMPI_MCA_BASE_VERSION_2_1_0(\"coll\", 2, 4, 0)\n";
const COLL_MAIN: &str = "#define MCA_COLL_BASE_VERSION_3_0_0 \\\n  OMPI_MCA_BASE_VERSION_2_1_0(\"coll\", 3, 0, 0)\n";

#[test]
fn supported_lines_get_their_coll_api() {
    let a = abi::decide(&mpi_h(4, 1, 4), COLL_41).unwrap();
    assert_eq!((a.version, a.coll, a.barrier_init), ((4, 1, 4), (2, 0, 0), "MPIX_Barrier_init"));
    let a = abi::decide(&mpi_h(5, 0, 10), COLL_50).unwrap();
    assert_eq!((a.version, a.coll, a.barrier_init), ((5, 0, 10), (2, 4, 0), "MPI_Barrier_init"));
    assert!(a.help_files);
    let a = abi::decide(&mpi_h(6, 0, 0), COLL_MAIN).unwrap();
    assert_eq!((a.version, a.coll, a.barrier_init), ((6, 0, 0), (3, 0, 0), "MPI_Barrier_init"));
    assert!(!a.help_files, "6.0 compiles help texts into libmpi");
}

#[test]
fn unsupported_versions_get_one_message_naming_the_supported_ones() {
    for (h, c, says) in [
        (mpi_h(3, 1, 6), COLL_41, "Open MPI 3.1.6 is not supported"),
        (mpi_h(6, 1, 0), COLL_MAIN, "Open MPI 6.1.0 is not supported"),
        (mpi_h(7, 0, 0), COLL_MAIN, "Open MPI 7.0.0 is not supported"),
        (mpi_h(4, 0, 7), COLL_41, "Open MPI 4.0.7 is not supported"),
        (mpi_h(5, 1, 0), COLL_MAIN, "Open MPI 5.1.0 is not supported"),
        ("#define MPICH_VERSION \"4.1\"\n".to_string(), "", "not Open MPI's"),
    ] {
        let e = abi::decide(&h, c).unwrap_err();
        assert!(e.contains(says) && e.contains(abi::SUPPORTED), "{e}");
    }
}

#[test]
fn a_supported_version_without_its_coll_header_says_how_to_get_it() {
    let e = abi::decide(&mpi_h(5, 0, 10), "").unwrap_err();
    assert!(e.contains("--with-devel-headers") && e.contains("build-ompi.sh"), "{e}");
    // 5.0 headers claiming main's coll 3.0.0 are refused too.
    assert!(abi::decide(&mpi_h(5, 0, 10), COLL_MAIN).is_err());
    // 6.0 headers without coll 3.0.0: the same advice.
    let e = abi::decide(&mpi_h(6, 0, 0), COLL_50).unwrap_err();
    assert!(e.contains("--with-devel-headers"), "{e}");
}
