#!/usr/bin/env bash
# scripts/modulefile.sh PREFIX COMPONENT_DIR OMPI_PKGLIBDIR OMPI_VERSION
#
# Writes PREFIX/modulefiles/hwbarr/openmpi-OMPI_VERSION, an environment
# module (Tcl: read by Lmod and by Environment Modules alike) that makes
# that Open MPI load the hwbarr installed in COMPONENT_DIR.
#
# Open MPI has no "extra component directory" parameter: setting
# mca_base_component_path replaces its default list. So the module sets the
# whole path with Open MPI's own directory first (a component found twice
# is taken from the first directory, so nothing of Open MPI's is shadowed),
# then hwbarr's, then the per-user directory of the default list: last,
# because Open MPI 4.1 stops reading the path at a directory that does not
# exist, as ~/.openmpi/components often does not. setenv: unloading the
# module unsets it (Lmod 8.6's pushenv left it set).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 PREFIX COMPONENT_DIR OMPI_PKGLIBDIR OMPI_VERSION" >&2; exit 2; }
prefix=$1 dir=$2 pkglib=$3 version=$4
[ -n "$pkglib" ] || { echo "modulefile: the Open MPI's component directory is unknown (is its ompi_info runnable?)" >&2; exit 1; }
[ -n "$version" ] || { echo "modulefile: the Open MPI's version is unknown (is its mpicc runnable?)" >&2; exit 1; }
mdir="$prefix/modulefiles/hwbarr"
file="$mdir/openmpi-$version"
install -d "$mdir"
cat > "$file" <<EOF
#%Module1.0
## hwbarr for Open MPI $version (written by make install PREFIX=$prefix)

proc ModulesHelp { } {
    puts stderr "hwbarr: the toggle-wire and DMA-counter barriers as an Open MPI coll component."
    puts stderr "Makes Open MPI $version (components in $pkglib) load hwbarr from $dir."
}
module-whatis "hwbarr barrier component for Open MPI $version"

# Open MPI's own components first, then hwbarr, then the per-user
# directory of Open MPI's default list (last: 4.1 stops reading the path at
# a directory that does not exist).
setenv OMPI_MCA_mca_base_component_path "$pkglib:$dir:\$env(HOME)/.openmpi/components"
EOF
chmod 0644 "$file"
echo "module file $file"
echo "  module use $prefix/modulefiles && module load hwbarr/openmpi-$version"
