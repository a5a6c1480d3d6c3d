#!/usr/bin/env bash
# scripts/install.sh SO DIR: installs the built component as DIR/mca_coll_hwbarr.so
# and says which Open MPI will load it from there.
set -euo pipefail
so=$1 dir=$2
case "$dir" in /*) ;; *) dir=$PWD/$dir ;; esac
[ -f "$so" ] || { echo "install: $so not built (run make)" >&2; exit 1; }
install -d "$dir"
# (Each lookup may find nothing; under pipefail that must not end the script.)
built_for() { grep -aoE 'Open MPI [0-9]+\.[0-9]+\.[0-9]+' "$1" 2>/dev/null | head -1 || true; }
if [ -f "$dir/mca_coll_hwbarr.so" ]; then
  old=$(built_for "$dir/mca_coll_hwbarr.so"); new=$(built_for "$so")
  if [ -n "$old" ] && [ -n "$new" ] && [ "${old%.*}" != "${new%.*}" ]; then
    echo "install: replacing $dir/mca_coll_hwbarr.so built for $old by one for $new;" \
         "$old will now skip hwbarr with a one-line note (install each build into its Open MPI's own component dir to keep both)" >&2
  fi
fi
install -m 0644 "$so" "$dir/mca_coll_hwbarr.so"
# Its messages, where the component adds its own directory to Open MPI's
# help search path.
install -m 0644 "$(dirname "$0")/../share/help-coll-hwbarr.txt" "$dir/help-coll-hwbarr.txt"
# The release the component was built for is the one its own text names,
# whichever Open MPI is on PATH.
built=$(built_for "$so")
echo "installed $dir/mca_coll_hwbarr.so (built for ${built:-an Open MPI whose version it does not name})"
pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed 's/.*://' || true)
onpath=$(ompi_info --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1 || true)
# Release lines compared as above: the versions without their last number.
ours=${built#Open MPI }
if [ -n "$built" ] && [ -n "$onpath" ] && [ "${ours%.*}" != "${onpath%.*}" ]; then
  # The path hint below would name the wrong Open MPI's directory.
  echo "  the Open MPI on PATH is $onpath: run the component with the mpirun of $built" >&2
  exit 0
fi
# With a module file (make install PREFIX=...), that says how to load it.
[ -z "${HWBARR_MODULE:-}" ] || exit 0
if [ -z "$pkglib" ]; then
  echo "  no ompi_info on PATH: put $dir on the mca_base_component_path of the Open MPI it was built for" >&2
  exit 0
fi
case "$dir" in
  "$pkglib") ;;
  "$HOME/.openmpi/components")
    echo "  on the default component path of every Open MPI of this user: a build for another release line there would be replaced" ;;
  *) # The environment form: mpirun and ompi_info both honour it (5.0's
     # ompi_info ignores --mca NAME VALUE on its command line). The
     # per-user directory last: 4.1 stops reading the path at a directory
     # that does not exist.
     echo "  not on Open MPI's default component path: export OMPI_MCA_mca_base_component_path=$pkglib:$dir:$HOME/.openmpi/components" ;;
esac
