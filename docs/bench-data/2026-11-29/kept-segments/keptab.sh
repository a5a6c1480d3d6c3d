#!/bin/bash
# keptab.sh version rounds dirs... : dupcost2 300 per config per round, shuffled (4.1 or an Open MPI version under <cache>).
# label may end in -k0 (coll_hwbarr_kept_segments 0); each config with line_candidates 1 and 4; plus tuned.
ver=$1; rounds=$2; shift 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$ver" = 4.1 ]; then pre=/usr; prog=<tmp>/dupcost2; else pre=<cache>/openmpi-$ver; prog=<tmp>/dupcost2-$ver; fi
PATH=$pre/bin:$PATH; export LD_LIBRARY_PATH=$pre/lib
P=$($pre/bin/ompi_info --path pkglibdir --parsable | sed 's/.*://')
cfgs=()
for e in "$@"; do for lc in 1 4; do cfgs+=("$e:$lc"); done; done
cfgs+=("tuned:0")
for r in $(seq $rounds); do
  for c in $(printf '%s\n' "${cfgs[@]}" | shuf); do
    dir=${c%%:*}; lc=${c##*:}
    if [ "$dir" = tuned ]; then
      out=$(timeout 120 mpirun -np 2 --bind-to core --mca coll ^hwbarr $prog 300 2>&1 | grep barriers=)
      echo "tuned $out"; continue
    fi
    label=$(basename $dir); extra=""
    case $label in *-k0) extra="--mca coll_hwbarr_kept_segments 0"; dir=${dir%-k0};; esac
    out=$(timeout 120 mpirun -np 2 --bind-to core --mca mca_base_component_path $dir:$P --mca coll_hwbarr_priority 100 --mca coll_hwbarr_line_candidates $lc $extra $prog 300 2>&1 | grep barriers=)
    echo "$label-lc$lc $out"
  done
done
