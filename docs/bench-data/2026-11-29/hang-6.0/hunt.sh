#!/bin/bash
# hunt.sh <dir> <n> <pin>: launches threads_bench until one hangs (>20 s), then dumps gdb backtraces
dir=$1; n=$2; pin=$3
pre=<prefix of 6.0.0a1>; export PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib
for i in $(seq 1 $n); do
  THREADS_BENCH_PIN=$pin mpirun --allow-run-as-root --map-by :OVERSUBSCRIBE --bind-to none -np 2 --mca mca_base_component_path $dir:$pre/lib/openmpi --mca coll hwbarr,tuned,basic,libnbc,self -x THREADS_BENCH_PIN <checkout>/target/ompi-6.0.0a1/release/examples/threads_bench ${T:-4} ${IT:-200000} > <tmp>/hunt.out 2>&1 &
  mp=$!
  for t in $(seq 1 40); do sleep 0.5; kill -0 $mp 2>/dev/null || break; done
  if kill -0 $mp 2>/dev/null; then
    echo "launch $i HUNG"
    for p in $(pgrep -f "examples/threads_bench"); do echo "== pid $p"; gdb -p $p -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E "^#|^Thread" | head -120; done > <tmp>/hang-bt.txt
    cp <tmp>/hunt.out <tmp>/hung.out; kill $mp; sleep 1; pkill -f "examples/threads_bench"; exit 1
  fi
  wait $mp; echo "launch $i rc=$? $(tail -1 <tmp>/hunt.out | cut -c1-60)"
done
