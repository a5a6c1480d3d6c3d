#!/usr/bin/env bash
# `make probe`: barrier_osu's persistent mode at 2 ranks bound apart, against
# the diagnostic build (feature `probe`) in COMPONENT_DIR (first on the path, so
# that it shadows an installed hwbarr), PROBE_LAUNCHES times.
# usage: scripts/probe.sh <barrier_osu binary>
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
for _ in $(seq "${PROBE_LAUNCHES:-3}"); do
  mpirun -np 2 --bind-to core --mca mca_base_component_path "$COMPONENT_DIR:$PKGLIBDIR" \
    "$1" persistent 1000000 1000
done
