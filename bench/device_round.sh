#!/bin/sh
# One full round on a GPU machine, from a build made elsewhere (carried in
# build/: `make all tests`, then `make -C examples O=$PWD/build/examples
# FLOWGEN_BUILD=$PWD/build`, so that test_examples finds jit_sample built
# where the static Lua and jansson are).  Results land in $OUT (or
# ./device-out).
# usage: sh bench/device_round.sh [tests|gpu|gpu-programs|check|cluster-sanitize|sanitize|bench|precisions|sweep|grid|gemm|gemm-tune|large|tune|tune-tests|wgmma|rmma|probe|profile|steps|small|wgstream|wgstream3|rmma3|digits|all]...
# Planner overrides (docs/tuning.md) go to build/bench and build/sanitize as
# --tune, to test_gpu_sample as FLOWGEN_TEST_TUNE; no environment variable
# tunes the library.
#   tests     the GPU tests (FLOWGEN_REQUIRE_GPU=1: none may skip)
#   gpu       test_gpu_sample one test at a time, those named in $GPU_TESTS
#             (default: all, in order; a cold round of them takes more
#             than 10 minutes, so a round under a time limit splits them)
#   gpu-programs  the other test programs that use a GPU: test_cli_runtime,
#             test_examples, test_faults
#   cluster-sanitize  compute-sanitizer racecheck, synccheck and memcheck
#             over the cluster kernel alone, unfolded (D=64, H=256) and
#             folded (D=64, H=128): build/sanitize --light --only cluster
#             --shape D,H (seconds a tool on an H200, not the whole sanitize
#             part's minutes)
#   sanitize  compute-sanitizer memcheck, racecheck, synccheck and initcheck
#             over build/sanitize (every strategy of a few shapes; --light
#             for all but memcheck; SANITIZE_TIMEOUT seconds per tool)
#   bench     build/bench and PyTorch on the default shapes and batches
#   sweep     fp32 against PyTorch over D x H x B (bench/compare.py)
#   precisions  every precision at the default shape, B from 1 to 1048576,
#             and PyTorch in each precision beside it (PYTORCH_BATCHES);
#             sh bench/plot.sh out.png precisions.json pytorch-*.json
#             plots them
#   tune      the matrix-unit kernel's dials (--tune mma.*) at
#             B=65536 and B=1000 in fp32, tf32 and bf16, and the tiled
#             kernels' (tiles in flight, tile depth, cluster split) at B=1
#             and 64 on shapes with large weights (tiled.*)
#   large     fp32 at B = 2048, 4096 and 65536 on shapes with H >= 512
#             (LARGE_SHAPES, LARGE_BATCHES), gemm instead of mma at H=512,
#             and PyTorch beside it (--quick both)
#   tune-tests  test_gpu_sample and build/sanitize (memcheck) under the
#             tiled kernels' tuned configurations
#   grid      the grid strategy's shapes at B = 1, 8 and 64, then
#             compute-sanitizer memcheck, racecheck and synccheck over its
#             kernels (build/sanitize --only grid)
#   gemm      the gemm strategy: its GPU tests (as planned and with two
#             blocks per SM of 32-row tiles), the large shapes at B = 4096
#             and 65536, then compute-sanitizer memcheck, racecheck and
#             synccheck over its kernels (--only gemm)
#   gemm-tune the gemm strategy with two blocks per SM of 32-row tiles
#             (gemm.per_sm=2,gemm.rows=32) at B = 4096 and 65536 (at 65536
#             also instead of mma on H=512), then gemm.per_sm=2,
#             gemm.rows=128 and gemm.chunk=64 at B=4096
#   check     after kernel changes: every GPU test (as tests), then the
#             points they move: D=64, H=256 in fp32, tf32 and bf16 at
#             B = 8, 1000 and 65536; D=128 and 512, H=512 at 2048 and 65536
#   wgmma     the wgmma variants (bf16, fp16 on sm_90a): their GPU tests, bf16
#             and fp16 at the default shape beside the mma kernel
#             (--tune skip=wgmma64:wgmma), with 64 outputs a wgmma
#             (wgmma.n=64), the one-warpgroup variant from B=73 to 8448
#             beside mma16 (skip=rmma and skip=rmma:wgmma64),
#             compute-sanitizer over each
#   rmma      the register-resident kernel (bf16, fp16): its GPU tests, bf16
#             and fp16 at the default shape from B=1 to 8448 beside the plan
#             without it (skip=rmma) and with it to 8448 (rmma=:8448),
#             compute-sanitizer over it (from the first batch: rmma=1:, and
#             to 2112: rmma=1:2112)
#   probe     build/probe (make probe): on-chip latencies, mma.sync's rate
#             on one SM, the SM clock between small kernels, the cluster
#             kernel's exchange alone, its blocks' loads of their weights
#   profile   ncu (where the machine lets it read the counters) over one
#             B=8 launch of the cluster kernel (fp32) and of rmma (bf16) at
#             the default shape: warp stalls (by reason and by SASS line,
#             profile-*-sass.csv), pipes, shared-memory traffic;
#             PROFILE_PRECISIONS, PROFILE_KERNELS (a regex) and PROFILE_BATCH
#             profile others (e.g. tf32, wgstream, 65536)
#   steps     fp32 and bf16 at D=64, H=256 with S = 1 to 32 at B = 1 and 8:
#             the fixed cost and the cost of a step
#   wgstream  the streamed warpgroup kernel (tf32): its GPU tests, then tf32
#             at B = 2113 to 262144 with and without it and tuned,
#             compute-sanitizer over it
#   wgstream3 fp32 as tf32x3 on the streamed kernel: its GPU tests, fp32
#             at B = 1057 to 262144 with and without it, compute-sanitizer
#             over it
#   rmma3     fp32 as tf32x3 on the register-resident kernel over clusters
#             of 4: its GPU tests, fp32 from B=180 to 4224 over
#             RMMA3_SHAPES (RMMA3_BATCHES), beside it by 8 samples a
#             cluster only (skip=rmma3_r16) and without it (skip=rmma3),
#             compute-sanitizer over it, the cluster kernel's tests
#   small     bf16 and fp16 at small batches: the plan (the cluster kernel
#             before rmma where D >= 64) beside rmma=1: and skip=rmma over
#             shapes ($SMALL_SHAPES), its GPU tests, sanitizers
#   digits    the built-in digits model sampled on the GPU, then evaluated
# PRECISION_BATCHES, PYTORCH_BATCHES and SWEEP_SHAPES / SWEEP_BATCHES narrow those parts;
# SWEEP_NAME names the sweep's files (default sweep), SWEEP_ARGS adds bench
# options (e.g. --no-baseline); FLOWGEN_NO_TORCH=1
# leaves PyTorch out.  ROUND_TAR=1 packs the files a round leaves in $OUT
# into one, $OUT/round.tar.gz (for a machine that returns few files).
#   all       (or no part) every part but check, cluster-sanitize, large, tune, tune-tests,
#             gemm, gemm-tune, wgmma, rmma, probe, profile, steps, small, wgstream, wgstream3 and rmma3 (sanitize and sweep cover the gemm
#             variant too)
set -u
out=${OUT:-device-out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
if [ $# -eq 0 ] || [ "$*" = all ]; then set -- tests sanitize bench precisions sweep grid digits; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
if [ ! build/examples/jit_sample -nt build/libflowgen.a ]; then
  echo "device_round.sh: build/examples/jit_sample is missing or older than build/libflowgen.a:" \
    "test_examples will try to rebuild it here (see the header)" >&2
fi
have_torch() { [ "${FLOWGEN_NO_TORCH:-0}" != 1 ] && python3 -c 'import torch' 2>/dev/null; }
status=0
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# sanitizer NAME TOOL [ARGS]: build/sanitize ARGS under compute-sanitizer's
# TOOL (SANITIZE_TIMEOUT seconds), log in $out/NAME-TOOL.log.
sanitizer() {
  s_name=$1 s_tool=$2
  shift 2
  if timeout "${SANITIZE_TIMEOUT:-600}" "$cs" --tool "$s_tool" --error-exitcode 1 build/sanitize \
       "$@" > "$out/$s_name-$s_tool.log" 2>&1; then
    echo "$s_name: $s_tool clean"
  else
    echo "$s_name: $s_tool FAILED"; status=1
  fi
  tail -n 3 "$out/$s_name-$s_tool.log"
}
# filtered_tests NAME PATTERN: test_gpu_sample's tests whose names match
# PATTERN (under the caller's FLOWGEN_TEST_TUNE, if any), log in
# $out/NAME-tests.log.
filtered_tests() {
  echo "$2"
  FLOWGEN_REQUIRE_GPU=1 FLOWGEN_TEST_FILTER="$2" timeout 200 \
    build/tests/test_gpu_sample > "$out/$1-tests.log" 2>&1 || status=1
  grep -E '^# |FAILED|PASSED' "$out/$1-tests.log"
}
# time_tunes NAME PRECISIONS BATCHES TUNE...: build/bench at the default
# shape (or $TUNE_SHAPES) under each --tune (an empty one: the plan as
# it is), the lines also in $out/NAME.txt; each under TUNE_TIMEOUT seconds
# (default 120).
time_tunes() {
  t_name=$1 t_precisions=$2 t_batches=$3
  shift 3
  for t in "$@"; do
    echo "--tune $t"
    timeout "${TUNE_TIMEOUT:-120}" build/bench --tune "$t" --quick --no-startup --no-baseline --precisions "$t_precisions" \
      --shapes "${TUNE_SHAPES:-64,256,32}" --batches "$t_batches" 2>&1 | grep 'B=' | tee -a "$out/$t_name.txt" || status=1
  done
}
for what in "$@"; do
  case $what in
  tests)
    FLOWGEN_REQUIRE_GPU=1 FLOWGEN_BIN=$PWD/build/flowgen FLOWGEN_SOURCE_DIR=$PWD \
      sh tests/run.sh build/tests/test_* > "$out/tests.log" 2>&1 || status=1
    grep -E '^# |FAILED|tests:' "$out/tests.log" | tail -80 ;;
  gpu)
    names=${GPU_TESTS:-$(sed -n 's/.*cmocka_unit_test(\(test_[a-z0-9_]*\)).*/\1/p' tests/test_gpu_sample.c)}
    for n in $names; do
      if FLOWGEN_REQUIRE_GPU=1 FLOWGEN_TEST_FILTER=$n build/tests/test_gpu_sample >> "$out/gpu-tests.log" 2>&1; then
        echo "$n passed"
      else
        echo "$n FAILED"; status=1
      fi
    done ;;
  gpu-programs)
    FLOWGEN_REQUIRE_GPU=1 FLOWGEN_BIN=$PWD/build/flowgen FLOWGEN_SOURCE_DIR=$PWD \
      sh tests/run.sh build/tests/test_cli_runtime build/tests/test_examples build/tests/test_faults \
      > "$out/gpu-programs.log" 2>&1 || status=1
    grep -E 'FAILED|tests:' "$out/gpu-programs.log" ;;
  cluster-sanitize)
    for shape in 64,256 64,128; do
      for tool in racecheck synccheck memcheck; do
        sanitizer "cluster-d${shape%,*}-h${shape#*,}" $tool --light --only cluster --shape $shape
      done
    done ;;
  sanitize)
    for tool in memcheck racecheck synccheck initcheck; do
      if [ $tool = memcheck ]; then sanitizer sanitize $tool; else sanitizer sanitize $tool --light; fi
    done ;;
  bench)
    build/bench --json "$out/bench.json" | tee "$out/bench.txt" || status=1
    if have_torch; then
      python3 bench/pytorch_baseline.py --json "$out/pytorch.json" | tee "$out/pytorch.txt" || status=1
    fi ;;
  sweep)
    shapes="2,2,32;2,8,32;16,16,32;16,64,32;64,64,32;64,256,32;128,128,32;128,512,32"
    shapes=${SWEEP_SHAPES:-$shapes;512,512,32;512,2048,32;1024,1024,32;1024,4096,32}
    batches=${SWEEP_BATCHES:-1,64,4096,65536}
    name=${SWEEP_NAME:-sweep}
    # shellcheck disable=SC2086 # SWEEP_ARGS: extra bench options, split
    build/bench --no-startup ${SWEEP_ARGS:-} --shapes "$shapes" --batches $batches \
      --json "$out/$name.json" > "$out/$name.txt" || status=1
    if have_torch; then
      python3 bench/pytorch_baseline.py --shapes "$shapes" --batches $batches \
        --json "$out/$name-pytorch.json" > "$out/$name-pytorch.txt" || status=1
      python3 bench/compare.py "$out/$name.json" "$out/$name-pytorch.json" | tee "$out/$name-compare.txt"
    else
      cat "$out/$name.txt"
    fi ;;
  precisions)
    batches=1,2,4,8,16,32,64,128,256,512,1000,1024,2048,4096,8192,16384,32768,65536
    batches=${PRECISION_BATCHES:-$batches,100000,131072,262144,524288,1048576}
    build/bench --precisions fp32,tf32,bf16,fp16 --batches $batches --shapes 64,256,32 \
      --no-startup --no-baseline --json "$out/precisions.json" > "$out/precisions.txt" || status=1
    grep -E ' B=(1|8|64|1000|65536|1048576) ' "$out/precisions.txt"
    if have_torch; then
      for p in fp32 tf32 bf16 fp16; do
        python3 bench/pytorch_baseline.py --precision $p --batches "${PYTORCH_BATCHES:-1,8,64,512,4096,65536,1048576}" \
          --json "$out/pytorch-$p.json" | tee "$out/pytorch-$p.txt" || status=1
      done
    fi ;;
  tune)
    : > "$out/tune.txt"
    for t in "" mma.stages=2 mma.chunk=16 mma.chunk=64 mma.rows=32 mma.rows=32,mma.per_sm=2 \
             mma.rows=32,mma.chunk=16,mma.per_sm=2 mma.rows=16,mma.per_sm=2; do
      echo "--tune $t" >> "$out/tune.txt"
      build/bench --tune "$t" --quick --no-startup --no-baseline --precisions fp32,tf32,bf16 \
        --shapes 64,256,32 --batches 1000,65536 >> "$out/tune.txt" 2>&1 || status=1
    done
    for t in "" tiled.chunk=128 tiled.stages=3 tiled.stages=4 tiled.stages=4,tiled.chunk=64 \
             tiled.stages=6,tiled.chunk=64 tiled.blocks=4; do
      echo "--tune $t" >> "$out/tune.txt"
      build/bench --tune "$t" --quick --no-startup --no-baseline \
        --shapes "128,512,32;512,512,32;1024,1024,32;512,2048,32" --batches 1,64 \
        >> "$out/tune.txt" 2>&1 || status=1
    done
    grep -E 'tune|B=' "$out/tune.txt" ;;
  large)
    shapes=${LARGE_SHAPES:-128,512,32;512,512,32;1024,1024,32;512,2048,32}
    batches=${LARGE_BATCHES:-2048,4096,65536}
    timeout "${LARGE_TIMEOUT:-280}" build/bench --quick --no-startup --no-baseline --shapes "$shapes" \
      --batches $batches --json "$out/large.json" > "$out/large.txt" 2>&1 || status=1
    grep 'B=' "$out/large.txt"
    echo "--tune skip=mma16:mma (gemm instead of mma at H=512)"
    timeout 100 build/bench --tune skip=mma16:mma --quick --no-startup --no-baseline \
      --shapes "128,512,32;512,512,32" --batches 65536 2>&1 | grep 'B=' || status=1
    if have_torch; then
      timeout "${LARGE_TIMEOUT:-280}" python3 bench/pytorch_baseline.py --quick --shapes "$shapes" \
        --batches $batches --json "$out/large-pytorch.json" > "$out/large-pytorch.txt" || status=1
      python3 bench/compare.py "$out/large.json" "$out/large-pytorch.json" | tee "$out/large-compare.txt"
    fi ;;
  tune-tests)
    for t in tiled.stages=4,tiled.chunk=64 tiled.stages=3; do
      FLOWGEN_TEST_TUNE=$t FLOWGEN_REQUIRE_GPU=1 build/tests/test_gpu_sample > "$out/tune-tests-$t.log" 2>&1 \
        && echo "tune-tests $t: test_gpu_sample passed" || { echo "tune-tests $t: FAILED"; status=1; }
      timeout "${SANITIZE_TIMEOUT:-600}" "$cs" --tool memcheck --error-exitcode 1 \
        build/sanitize --tune "$t" > "$out/tune-sanitize-$t.log" 2>&1 \
        && echo "tune-tests $t: memcheck clean" || { echo "tune-tests $t: memcheck FAILED"; status=1; }
    done ;;
  grid)
    build/bench --quick --no-startup --no-baseline --batches 1,8,64 \
      --shapes "128,512,32;512,512,32;1024,1024,32;512,2048,32;1024,4096,32;33,1000,32" \
      --json "$out/grid.json" > "$out/grid.txt" 2>&1 || status=1
    grep 'B=' "$out/grid.txt"
    for tool in memcheck racecheck synccheck; do sanitizer grid $tool --light --only grid; done ;;
  gemm)
    for t in "" gemm.per_sm=2,gemm.rows=32; do
      echo "--tune $t"
      FLOWGEN_TEST_TUNE=$t filtered_tests "gemm-${t:-default}" 'test_gemm_*'
    done
    timeout "${LARGE_TIMEOUT:-280}" build/bench --quick --no-startup --no-baseline \
      --shapes "128,512,32;512,512,32;1024,1024,32;512,2048,32;1024,4096,32" --batches 4096,65536 \
      --json "$out/gemm.json" 2>&1 | grep 'B=' || status=1
    for tool in memcheck racecheck synccheck; do sanitizer gemm $tool --light --only gemm; done ;;
  gemm-tune)
    shapes="128,512,32;512,512,32;1024,1024,32;512,2048,32"
    echo "--tune gemm.per_sm=2,gemm.rows=32"
    timeout 250 build/bench --tune gemm.per_sm=2,gemm.rows=32 --quick --no-startup --no-baseline \
      --shapes "$shapes;1024,4096,32" --batches 4096,65536 --json "$out/gemm-gblocks2-gmt1.json" \
      2>&1 | grep 'B=' || status=1
    echo "--tune skip=mma16:mma,gemm.per_sm=2,gemm.rows=32"
    timeout 60 build/bench --tune skip=mma16:mma,gemm.per_sm=2,gemm.rows=32 --quick --no-startup --no-baseline \
      --shapes "128,512,32;512,512,32" --batches 65536 --json "$out/gemm-nomma.json" \
      2>&1 | grep 'B=' || status=1
    for t in gemm.per_sm=2 gemm.rows=128 gemm.chunk=64; do
      echo "--tune $t"
      timeout 100 build/bench --tune "$t" --quick --no-startup --no-baseline \
        --shapes "$shapes" --batches 4096 --json "$out/gemm-$(echo "$t" | tr =,. ___).json" 2>&1 | grep 'B=' || status=1
    done ;;
  check)
    FLOWGEN_REQUIRE_GPU=1 FLOWGEN_BIN=$PWD/build/flowgen FLOWGEN_SOURCE_DIR=$PWD \
      timeout "${CHECK_TIMEOUT:-420}" sh tests/run.sh build/tests/test_* > "$out/tests.log" 2>&1 || status=1
    grep -E 'FAILED|tests:' "$out/tests.log" | tail -20
    timeout 150 build/bench --quick --no-startup --no-baseline --precisions fp32,tf32,bf16 \
      --shapes 64,256,32 --batches 8,1000,65536 --json "$out/check-default.json" 2>&1 | grep 'B=' || status=1
    timeout 150 build/bench --quick --no-startup --no-baseline \
      --shapes "128,512,32;512,512,32" --batches 2048,65536 --json "$out/check-large.json" \
      2>&1 | grep 'B=' || status=1 ;;
  wgmma)
    filtered_tests wgmma 'test_wgmma_*'
    for t in skip=wgmma64:wgmma "" wgmma.n=64; do
      echo "--tune $t"
      timeout 120 build/bench --tune "$t" --quick --no-startup --no-baseline --precisions bf16,fp16 \
        --shapes 64,256,32 --batches 8,1000,65536,1048576 2>&1 | grep 'B=' || status=1
    done
    for t in skip=rmma skip=rmma:wgmma64; do  # the one-warpgroup variant, and mma16 with one wave of wgmma
      echo "--tune $t"
      timeout 100 build/bench --tune "$t" --quick --no-startup --no-baseline --precisions bf16 \
        --shapes 64,256,32 --batches 73,256,1000,2112,2113,4096,8448 2>&1 | grep 'B=' || status=1
    done
    for tool in memcheck racecheck synccheck; do
      sanitizer wgmma $tool --light --only wgmma
    done ;;
  rmma)
    filtered_tests rmma 'test_rmma_*'
    for t in skip=rmma "" rmma=:8448; do
      echo "--tune $t"
      timeout 150 build/bench --tune "$t" --quick --no-startup --no-baseline --precisions bf16,fp16 \
        --shapes 64,256,32 --batches 1,8,64,256,1000,2112,4224,8448 2>&1 | grep 'B=' || status=1
    done
    for tool in memcheck racecheck synccheck; do
      # from a block of one sample, then the multi-stage cases
      sanitizer rmma $tool --light --only rmma --tune rmma=1:,rmma_c2=1:,rmma3_r8=1:
      sanitizer rmma-stages $tool --light --only rmma --tune rmma=1:2112,rmma_c2=1:2112
    done ;;
  probe)
    build/probe | tee "$out/probe.txt" || status=1 ;;
  profile)
    ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for p in ${PROFILE_PRECISIONS:-fp32 bf16}; do
      timeout 300 "$ncu" --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section LaunchStats --section SourceCounters --print-details all \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
        -o "$out/profile-$p" -k "regex:${PROFILE_KERNELS:-cluster4_r1|rmma}" -s 20 -c 1 build/bench --quick \
        --no-startup --no-baseline --warmup-ms 0 --precisions $p --shapes 64,256,32 --batches "${PROFILE_BATCH:-8}" \
        > "$out/profile-$p.log" 2>&1 || status=1
      "$ncu" --import "$out/profile-$p.ncu-rep" --print-details all > "$out/profile-$p.txt" 2>&1
      "$ncu" --import "$out/profile-$p.ncu-rep" --page source --csv --print-source sass \
        > "$out/profile-$p-sass.csv" 2>&1
      grep -E 'stalled|Issued|Pipe|Warp Cycles|Eligible|Duration|Throughput|L2|Hit' "$out/profile-$p.txt" | head -80
    done ;;
  small)
    # bf16 and fp16 at small batches: the cluster kernel's first wave
    # before rmma (the plan) beside rmma from the first batch (rmma=1:) and
    # the cluster kernel throughout (skip=rmma), over shapes ($SMALL_SHAPES);
    # its GPU tests; compute-sanitizer over the cluster kernel (build/sanitize
    # has a bf16 case).
    filtered_tests small 'test_low_precision_small_batches'
    TUNE_SHAPES=${SMALL_SHAPES:-"64,256,32;64,128,32;32,128,32;16,64,32;32,256,32;64,64,32"}
    time_tunes small bf16 1,8,30,31,45,60,90 "" rmma=1: skip=rmma
    TUNE_SHAPES=
    time_tunes small fp16 1,8,30 "" rmma=1:
    for tool in racecheck synccheck; do
      sanitizer small $tool --light --only cluster
    done ;;
  wgstream)
    # The streamed warpgroup kernel (tf32 on wgmma, weights from L2): its GPU
    # tests; where they pass, tf32 at B = 2113 to 262144 as planned, without
    # it (the mma kernels), in blocks alone (wgstream.blocks=1), with 32
    # outputs a chunk (wgstream.n=32); compute-sanitizer over it (from its
    # first batch, 2113).
    filtered_tests wgstream 'test_wgstream_strategy'
    if grep -q PASSED "$out/wgstream-tests.log"; then
      time_tunes wgstream tf32 2113,16896,65536,262144 "" skip=wgstream wgstream.blocks=1 wgstream.n=32
      for tool in memcheck racecheck synccheck; do
        sanitizer wgstream $tool --light --only wgstream
        sanitizer wgstream1 $tool --light --only wgstream --tune wgstream.blocks=1
      done
    fi ;;
  wgstream3)
    # fp32 as tf32x3 on the streamed warpgroup kernel: its GPU tests; where
    # they pass, fp32 at B = 1057 to 262144 as planned, without it
    # (skip=wgstream3: the tiled kernel, then the mma kernel) and over
    # clusters of 2 (wgstream.blocks=2);
    # compute-sanitizer over it.
    filtered_tests wgstream3 'test_wgstream3_strategy'
    if grep -q PASSED "$out/wgstream3-tests.log"; then
      time_tunes wgstream3 fp32 1057,2113,4225,8448,8449,16896,65536,262144 "" skip=wgstream3 wgstream.blocks=2
      for tool in memcheck racecheck synccheck; do
        sanitizer wgstream3 $tool --light --only wgstream3
      done
    fi ;;
  rmma3)
    # fp32 as tf32x3 on the register-resident kernel over clusters of 4:
    # its GPU tests; where they pass, fp32 from B=180 to 4224 as planned
    # over RMMA3_SHAPES, by 8 samples a cluster only (skip=rmma3_r16) and
    # without it (skip=rmma3: the cluster kernel, the 8-row tiled kernel,
    # wgstream3) at
    # fewer points, compute-sanitizer over it; then the cluster kernel's
    # tests, whose plans it changed.
    filtered_tests rmma3 'test_rmma3_strategy'
    if grep -q PASSED "$out/rmma3-tests.log"; then
      shapes=${RMMA3_SHAPES:-"64,256,32;32,256,32;17,200,32;32,128,32;128,128,32;16,64,32"}
      TUNE_SHAPES=$shapes time_tunes rmma3 fp32 \
        ${RMMA3_BATCHES:-180,181,240,241,480,720,960,1440,1920,2880,3360,4224} ""
      TUNE_SHAPES=$shapes time_tunes rmma3-r8 fp32 480,960,1440,2880 skip=rmma3_r16
      TUNE_SHAPES="64,256,32;16,64,32" time_tunes rmma3-before fp32 181,240,480,960,1440,2880 skip=rmma3
      for tool in memcheck racecheck synccheck; do
        sanitizer rmma3 $tool --light --only rmma3
      done
    fi
    filtered_tests rmma3-cluster 'test_cluster_*' ;;
  steps)
    # The fixed cost (launch, weights into registers) and the cost of a
    # step: T(S) = a + b S at B = 1 and 8, each precision's small-batch kernel.
    shapes="64,256,1;64,256,2;64,256,4;64,256,8;64,256,16;64,256,32"
    timeout 200 build/bench --quick --no-startup --no-baseline --precisions fp32,bf16 \
      --shapes "$shapes" --batches 1,8 2>&1 | grep 'B=' | tee -a "$out/steps.txt" || status=1 ;;
  digits)
    build/flowgen sample --device gpu --batch 1000 --seed 7 -o "$out/digits.npy" -v || status=1
    build/flowgen sample --device gpu --batch 100 --seed 7 --png "$out/digits.png" || status=1
    (cd examples/digits && python3 evaluate.py "$out/digits.npy") | tee "$out/digits.txt" || status=1 ;;
  *) echo "device_round.sh: unknown part '$what'" >&2; exit 2 ;;
  esac
done
if [ "${ROUND_TAR:-0}" = 1 ]; then
  (cd "$out" && find . -type f ! -name round.tar.gz ! -name .round-files | sort > .round-files &&
     tar czf round.tar.gz -T .round-files && xargs rm -f < .round-files && rm -f .round-files) || status=1
fi
exit $status
