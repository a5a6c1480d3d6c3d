#!/bin/bash
# pairsx.sh <4.1|5.0.10|6.0.0a1> <rounds> dirs...: pairs.sh over several builds, interleaved launch by launch (shuffled each round)
v=$1; n=$2; shift 2
for r in $(seq $n); do for d in $(printf "%s\n" "$@" | shuf); do
echo "$(basename $d) $(bash $(dirname $0)/pairs.sh $v 1 $d)"; done; done
