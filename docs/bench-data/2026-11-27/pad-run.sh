#!/bin/bash
# Runs "$@" with, when PAD_ON=1, a rank-dependent 16-3999 bytes more environment, which
# moves the stack when address-space randomization is off (kernel.randomize_va_space 0).
# Use: mpirun ... -x PAD_ON=1 ./pad-run.sh ./program
if [ "$PAD_ON" = 1 ]; then
  export PADDING=$(printf '%*s' $(( (OMPI_COMM_WORLD_RANK * 1237) % 4000 + 16 )) '')
fi
exec "$@"
