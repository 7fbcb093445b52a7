#!/bin/sh
# One full round on a GPU machine, from a build made elsewhere (carried in
# build/): the GPU tests, then the benchmarks.  Results land in $OUT (or
# ./device-out).  Usage: sh bench/device_round.sh [tests|bench|all]
set -u
what=${1:-all}
out=${OUT:-device-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
status=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  FLOWGEN_REQUIRE_GPU=1 FLOWGEN_BIN=$PWD/build/flowgen FLOWGEN_SOURCE_DIR=$PWD \
    sh tests/run.sh build/tests/test_* > "$out/tests.log" 2>&1 || status=1
  grep -E '^# |FAILED|tests:' "$out/tests.log" | tail -60
fi
if { [ "$what" = bench ] || [ "$what" = all ]; } && [ -x build/bench ]; then
  build/bench --json "$out/bench.json" | tee "$out/bench.txt" || status=1
  if python3 -c 'import torch' 2>/dev/null; then
    python3 bench/pytorch_baseline.py --json "$out/pytorch.json" | tee "$out/pytorch.txt" || status=1
  fi
fi
exit $status
