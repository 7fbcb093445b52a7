#!/bin/sh
# A round on a GPU machine from a build made elsewhere and carried in build/
# (bench/device_pack.sh makes one, with a warmed module cache for
# BENCH_CACHE_DIR: the programs that need a GPU, stripped, about 24 MB).
# `tests` takes about 200 s (TEST_SHARDS=8).
# Logs and JSON are written to a work folder and packed into
# $OUT/round.tar.gz (or ./device-out/round.tar.gz) after each part and each
# test program (a device call brings back at most 8 files; a round cut
# short keeps what was packed); the last lines printed are a summary.
#
# usage: sh bench/device_round.sh [PART...]     (no part: tests sanitize bench)
#   tests      every test program, GPU required (FLOWGEN_REQUIRE_GPU=1)
#   sanitize   compute-sanitizer memcheck over build/sanitize (every
#              strategy and precision of a few shapes, once each), then
#              racecheck and synccheck (--light: the smallest of each)
#   bench      build/bench's default shapes and start-up costs; PyTorch
#              beside it where torch is installed
#   precisions every precision at the default shape, B = 1 to 1048576, and
#              PyTorch in each precision (PRECISION_BATCHES narrows it)
#   sweep      shapes x batches x precisions against PyTorch in the same
#              precision (bench/compare.py; SWEEP_SHAPES, SWEEP_BATCHES,
#              SWEEP_PRECISIONS, default fp32), each point's TFLOP/s also
#              as a share of PyTorch's plain GEMM of its hidden width and
#              batch (bench/gemm_peak.py); bench/plot_speedup.sh draws
#              the JSON it leaves.  The wide models' sweep:
#              SWEEP_SHAPES="32,512,4;256,2048,16;1024,4096,16;..."
#              SWEEP_BATCHES=1,8,64,1024,4096,65536
#              SWEEP_PRECISIONS=fp32,tf32,bf16,fp16 (SWEEP_RANDOM=N: N
#              shapes more, D 1-1024, H 512-4096, S 4-32, drawn with
#              SWEEP_SEED, printed); a precision at a time, each packed
#              when done (the eight shapes of docs/performance.md, two
#              precisions: 5 minutes on an H100).  BEFORE=another build's
#              bench (BEFORE_CACHE_DIR: its kernels, which that build's
#              `flowgen cache warm --dir` fills) times the same points
#              too: sweep-before-grid.md beside sweep-grid.md, both
#              against the same PyTorch run
#   compare    the same points timed by $BEFORE (another build's bench) and
#              by build/bench, interleaved; bench/before_after.py prints the
#              ratios (COMPARE_SHAPES, COMPARE_BATCHES, COMPARE_PRECISIONS;
#              BENCH_TUNE applies to all).  ALSO="name=path ...": more
#              builds' bench in the same rounds, each against BEFORE and
#              build/bench against each.  BENCH_CACHE_DIR serves them all,
#              BEFORE_CACHE_DIR (if given) BEFORE (device_pack.sh --before
#              and --also pack them so)
#   startup    `flowgen sample -v` cold (flowgen's cache and the driver's,
#              which NVRTC reads and fills too, both empty) and warm at B =
#              8, 1000 and 65536, by $BEFORE_FLOWGEN (another build's
#              flowgen, if given) and build/flowgen, then `cache list`;
#              then each variant of the default plan compiled alone, cold
#   gemm       gemm on each precision's operands (fp32 as tf32x3; the
#              plan where the mma kernel does not fit):
#              compute-sanitizer over its build/sanitize cases, on wgmma
#              and on mma.sync (gemm.per_sm=2), and gemm_b1024's split
#              tiles (from batch 2, gemm.split_cost=0), then the tiled
#              kernel, gemm on mma.sync and gemm, the same points
#              interleaved (GEMM_SHAPES, GEMM_BATCHES)
#   profile    Nsight Compute (ncu, clocks left alone) over one launch of
#              the gemm variant (bf16 on wgmma; PROFILE_SHAPES, PROFILE_BATCH,
#              PROFILE_PRECISION, PROFILE_TUNE), every section: speed of
#              light, memory and L2 traffic, warp stalls, the tensor pipes'
#              use, and the instructions the warps wait at most
#              (bench/ncu_hot.py over the SASS source page); the reports
#              come back too
#   digits     the built-in digits model sampled on the GPU and evaluated
#   family     the model family's cost table beside the seed (bench --family)
#   python     the package from this tree (python/ on the path, build/'s
#              libflowgen.so and flowgen): pytest python/tests (the torch and
#              GPU tests, torchrun with two ranks on one GPU included), then
#              bench/python_call.py with torch.compile (PYTHON_BATCHES; the
#              max-autotune column at PYTHON_MAX_BATCHES).  Where Lua 5.4,
#              jansson or pytest are missing, build/pylib carries them (its
#              .so files and a site/ of unpacked wheels); `make pyext` builds
#              python/flowgen/_fast.abi3.so, the launch calls without ctypes
#              (stable ABI: it loads in any Python from 3.10), which
#              travels beside build/ (git ignores it).
# --tune reaches bench and sanitize through BENCH_TUNE (docs/tuning.md);
# BENCH_CACHE_DIR: sweep and compare read their kernels from this cache
# folder (`flowgen cache warm --arch sm_90a ...` fills one on a machine
# without a GPU), else they compile them.
set -u
dest=${OUT:-device-out}
mkdir -p "$dest" && dest=$(cd "$dest" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/round.XXXXXX")
# $pack: the work folder as it is now into $dest/round.tar.gz, through a
# temporary file of the packing process's own (the tests' wrappers below
# run it side by side as each program ends)
pack=$out.pack
# shellcheck disable=SC2016 # $$: the packing process's own
printf '#!/bin/sh\ntar -C "%s" -czf "%s.$$.tgz" . 2>/dev/null\nmv -f "%s.$$.tgz" "%s"\n' \
  "$out" "$out" "$out" "$dest/round.tar.gz" > "$pack"
chmod +x "$pack"
[ $# -eq 0 ] && set -- tests sanitize bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
have_torch() { python3 -c 'import torch' 2>/dev/null; }
tune=${BENCH_TUNE:+--tune $BENCH_TUNE}
cachedir=${BENCH_CACHE_DIR:+--cache-dir $BENCH_CACHE_DIR}
status=0
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
summary=""
note() { summary="$summary
$*"; }
# compute-sanitizer memcheck (every case), racecheck and synccheck (the
# smallest of each: --light) over `build/sanitize ARGS...`: a log
# $out/NAME-TOOL.log and a summary line "LABEL: TOOL clean" each.
# merge_json OUT IN...: bench's JSON files as one (their results in order)
merge_json() {
  python3 -c 'import json, sys
runs = [json.load(open(f)) for f in sys.argv[2:]]
runs[0]["results"] = [r for run in runs for r in run["results"]]
json.dump(runs[0], open(sys.argv[1], "w"), indent=1)' "$@"
}

sanitize_cases() {
  name=$1 label=$2
  shift 2
  for tool in memcheck racecheck synccheck; do
    light=--light
    [ $tool = memcheck ] && light=
    log=$out/$name-$tool.log
    # shellcheck disable=SC2086 # $light: empty or one option
    if timeout "${SANITIZE_TIMEOUT:-300}" "$cs" --tool $tool --error-exitcode 1 \
         build/sanitize $light "$@" > "$log" 2>&1; then
      note "$label: $tool clean ($(grep -c ' relerr ' "$log") launches)"
    else
      note "$label: $tool FAILED ($name-$tool.log)"; status=1
      tail -n 20 "$log"
    fi
  done
}

for part in "$@"; do
  case $part in
  tests)
    # test_gpu_sample (over 5 minutes alone) as TEST_SHARDS (default 4)
    # shards side by side, given first (run.sh starts programs in the
    # order given).  Each program through a wrapper that keeps its log in
    # $out/tests as it runs (run.sh prints a program's output when it
    # ends: a round cut short would otherwise leave nothing).
    shards=$(mktemp -d)
    mkdir -p "$out/tests"
    wrap() {  # wrap NAME ENV PROGRAM: $shards/NAME runs it into $out/tests/NAME.log, then packs
      # shellcheck disable=SC2016 # $? and $rc: the wrapper's own
      printf '#!/bin/sh\n%s "%s" > "%s" 2>&1\nrc=$?\n"%s"\ncat "%s"\nexit $rc\n' \
        "$2" "$3" "$out/tests/$1.log" "$pack" "$out/tests/$1.log" > "$shards/$1"
      chmod +x "$shards/$1"
    }
    n=${TEST_SHARDS:-4} i=0
    while [ "$i" -lt "$n" ]; do
      wrap "test_gpu_sample.$i" "FLOWGEN_TEST_SHARD=$i/$n" "$PWD/build/tests/test_gpu_sample"
      i=$((i + 1))
    done
    others=""
    for t in build/tests/test_*; do
      [ "$t" = build/tests/test_gpu_sample ] && continue
      wrap "${t##*/}" "" "$PWD/$t"
      others="$others $shards/${t##*/}"
    done
    # shellcheck disable=SC2086 # $others: the other test programs' wrappers
    FLOWGEN_REQUIRE_GPU=1 FLOWGEN_BIN=$PWD/build/flowgen FLOWGEN_SOURCE_DIR=$PWD \
      sh tests/run.sh "$shards"/test_gpu_sample.* $others > "$out/tests.log" 2>&1 || status=1
    rm -rf "$shards"
    grep -E 'FAILED|ERROR' "$out/tests.log" | head -40
    note "$(tail -n 3 "$out/tests.log")" ;;
  sanitize)
    # shellcheck disable=SC2086 # $tune: empty or one option
    sanitize_cases sanitize sanitize $tune ;;
  bench)
    # shellcheck disable=SC2086
    build/bench $tune --json "$out/bench.json" > "$out/bench.txt" || status=1
    cat "$out/bench.txt"
    if have_torch; then
      python3 bench/pytorch_baseline.py --json "$out/pytorch.json" > "$out/pytorch.txt" || status=1
      python3 bench/compare.py "$out/bench.json" "$out/pytorch.json" | tail -n 20
    fi ;;
  family)
    # shellcheck disable=SC2086
    build/bench $tune --family --json "$out/family.json" > "$out/family.txt" || status=1
    sed -n '/^the family/,$p' "$out/family.txt" ;;
  precisions)
    batches=${PRECISION_BATCHES:-1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,65536,262144,1048576}
    # shellcheck disable=SC2086
    build/bench $tune --precisions fp32,tf32,bf16,fp16 --batches $batches --shapes 64,256,32 \
      --no-startup --no-baseline --json "$out/precisions.json" > "$out/precisions.txt" || status=1
    grep -E ' B=(1|8|64|1024|65536|1048576) ' "$out/precisions.txt"
    if have_torch; then
      for p in fp32 tf32 bf16 fp16; do
        python3 bench/pytorch_baseline.py --precision $p --batches "$batches" \
          --json "$out/pytorch-$p.json" > "$out/pytorch-$p.txt" || status=1
      done
    fi ;;
  sweep)
    shapes=${SWEEP_SHAPES:-"16,64,32;64,256,32;128,512,32;512,2048,32;1024,4096,32"}
    batches=${SWEEP_BATCHES:-1,64,4096,65536}
    precisions=${SWEEP_PRECISIONS:-fp32}
    if [ "${SWEEP_RANDOM:-0}" -gt 0 ]; then
      # SWEEP_RANDOM more shapes drawn in the wide models' range (the seed
      # printed; SWEEP_SEED replays it)
      seed=${SWEEP_SEED:-$(date +%s)}
      drawn=$(python3 -c 'import random, sys
r = random.Random(int(sys.argv[1]))
print(";".join("%d,%d,%d" % (r.randint(1, 1024), r.randint(512, 4096), r.choice((4, 8, 16, 32)))
               for _ in range(int(sys.argv[2]))))' "$seed" "$SWEEP_RANDOM") || exit 2
      echo "sweep: random shapes (SWEEP_SEED=$seed): $drawn" | tee "$out/sweep-random.txt"
      shapes="$shapes;$drawn"
    fi
    # a precision at a time, flowgen (and BEFORE) then PyTorch, packed
    # after each (a round cut short keeps the precisions done)
    peers="" ours="" theirs=""
    for p in $(echo "$precisions" | tr , ' '); do
      ours="$ours $out/sweep-$p.json"
      # shellcheck disable=SC2086
      build/bench $tune $cachedir --quick --no-startup --no-baseline --precisions "$p" \
        --shapes "$shapes" --batches $batches --json "$out/sweep-$p.json" > "$out/sweep-$p.txt" || status=1
      if [ -n "${BEFORE:-}" ]; then
        # the same points by another build's bench (the issue's "before"),
        # its kernels from BEFORE_CACHE_DIR through FLOWGEN_CACHE_DIR (a
        # bench of any age reads it; `flowgen cache warm` by that build's
        # flowgen fills it)
        theirs="$theirs $out/sweep-before-$p.json"
        ${BEFORE_CACHE_DIR:+env FLOWGEN_CACHE_DIR="$BEFORE_CACHE_DIR"} "$BEFORE" --quick --no-startup \
          --no-baseline --precisions "$p" --shapes "$shapes" --batches "$batches" \
          --json "$out/sweep-before-$p.json" > "$out/sweep-before-$p.txt" 2>&1 || status=1
      fi
      if have_torch; then
        python3 bench/pytorch_baseline.py --quick --precision "$p" --shapes "$shapes" \
          --batches "$batches" --json "$out/sweep-pytorch-$p.json" > "$out/sweep-pytorch-$p.txt" \
          || status=1
        peers="$peers $out/sweep-pytorch-$p.json"
      fi
      "$pack"
    done
    # each build's precisions in one file, as compare.py reads it
    # shellcheck disable=SC2086 # $ours, $theirs: one file a precision
    merge_json "$out/sweep.json" $ours || status=1
    # shellcheck disable=SC2086
    [ -z "$theirs" ] || merge_json "$out/sweep-before.json" $theirs || status=1
    if have_torch; then
      # PyTorch's plain GEMM of each hidden width and batch: the yardstick
      # for flowgen's TFLOP/s
      python3 bench/gemm_peak.py --precisions "$precisions" --shapes "$shapes" --batches "$batches" \
        --json "$out/sweep-gemm-peak.json" > "$out/sweep-gemm-peak.txt" 2>&1 || status=1
      # shellcheck disable=SC2086 # $peers: one file a precision
      python3 bench/compare.py "$out/sweep.json" $peers --peak "$out/sweep-gemm-peak.json" \
        > "$out/sweep-compare.txt" 2>&1
      # shellcheck disable=SC2086
      python3 bench/compare.py "$out/sweep.json" $peers --grid > "$out/sweep-grid.md" 2>/dev/null
      if [ -n "$theirs" ]; then
        # shellcheck disable=SC2086
        python3 bench/compare.py "$out/sweep-before.json" $peers --grid > "$out/sweep-before-grid.md" 2>/dev/null
        # shellcheck disable=SC2086
        python3 bench/compare.py "$out/sweep-before.json" $peers > "$out/sweep-before-compare.txt" 2>&1
        grep '^compare' "$out/sweep-before-compare.txt" | sed 's/^compare/before/'
      fi
      grep -E 'SLOWER|^compare' "$out/sweep-compare.txt" | tail -n 40
    fi ;;
  compare)
    [ -x "${BEFORE:-}" ] || { echo "device_round.sh: compare needs BEFORE=path/to/bench" >&2; exit 2; }
    shapes=${COMPARE_SHAPES:-"64,256,32;16,64,32;32,128,32;128,512,16"}
    batches=${COMPARE_BATCHES:-1,8,64,512,4096,65536,1048576}
    precisions=${COMPARE_PRECISIONS:-fp32,tf32,bf16,fp16}
    also=""
    for b in ${ALSO:-}; do
      case ${b%%=*} in
        before | after | "" | *[!a-z0-9_]*)
          echo "device_round.sh: ALSO: '$b' is not name=path (a name of a-z, 0-9 and _, not before or after)" >&2
          exit 2 ;;
      esac
      [ -x "${b#*=}" ] || { echo "device_round.sh: ALSO: ${b%%=*}: no program ${b#*=}" >&2; exit 2; }
      also="$also ${b%%=*}"
    done
    # Each program twice, interleaved: a point's spread between the two
    # runs of one program says what a difference between programs means.
    for round in 1 2; do
      for who in before $also after; do
        prog=build/bench dirs=$cachedir
        if [ "$who" = before ]; then
          prog=$BEFORE
          # (its kernels from BEFORE_CACHE_DIR where given, as the sweep's)
          [ -n "${BEFORE_CACHE_DIR:-}" ] && dirs="--cache-dir $BEFORE_CACHE_DIR"
        fi
        for b in ${ALSO:-}; do [ "${b%%=*}" = "$who" ] && prog=${b#*=}; done
        # shellcheck disable=SC2086 # $tune, $dirs: empty or one option
        "$prog" $tune $dirs --quick --no-startup --no-baseline --precisions "$precisions" --shapes "$shapes" \
          --batches "$batches" --json "$out/compare-$who-$round.json" > "$out/compare-$who-$round.txt" 2>&1 \
          || { status=1; tail -n 5 "$out/compare-$who-$round.txt"; }
        "$pack"  # a compare cut short keeps the runs done
      done
    done
    python3 bench/before_after.py "$out"/compare-before-*.json -- "$out"/compare-after-*.json \
      | tee "$out/compare.txt" | tail -n 25
    for who in $also; do
      echo "== $who against before"
      python3 bench/before_after.py "$out"/compare-before-*.json -- "$out/compare-$who"-*.json \
        | tee "$out/compare-$who.txt" | tail -n 25
      echo "== after against $who"
      python3 bench/before_after.py "$out/compare-$who"-*.json -- "$out"/compare-after-*.json \
        | tee "$out/compare-after-$who.txt" | tail -n 25
    done ;;
  startup)
    for who in before after; do
      prog=build/flowgen
      if [ $who = before ]; then
        [ -x "${BEFORE_FLOWGEN:-}" ] || continue
        prog=$BEFORE_FLOWGEN
      fi
      for b in 8 1000 65536; do
        cache=$(mktemp -d)
        for run in cold warm; do
          start=$(date +%s%N)
          # NVRTC (CUDA 12.9 on) keeps its results in the driver's cache:
          # a fresh one a batch, or "cold" would read what earlier runs built
          CUDA_CACHE_PATH=$cache/driver FLOWGEN_CACHE_DIR=$cache "$prog" sample --device gpu --batch $b --seed 1 \
            -o "$cache/x.npy" -v > "$out/startup-run.txt" 2>&1
          echo "== $who B=$b $run: process $((($(date +%s%N) - start) / 1000000)) ms"
          grep -E 'open|part' "$out/startup-run.txt"
        done
        [ $who = after ] && [ $b = 8 ] && FLOWGEN_CACHE_DIR=$cache "$prog" cache list
        rm -rf "$cache"
      done
    done > "$out/startup.txt" 2>&1 || status=1
    # every variant of the default plan alone, cold: `--batch N --emit
    # cubin` (the variant and the pack kernel) with a fresh driver cache
    build/flowgen --describe --arch sm_90a | python3 -c '
import json, sys
for v in json.load(sys.stdin)["variants"]: print(v["strategy"], max(v["min_batch"], 1))' \
      > "$out/variants.txt" || status=1
    while read -r strategy b; do
      cache=$(mktemp -d)
      start=$(date +%s%N)
      CUDA_CACHE_PATH=$cache build/flowgen --arch sm_90a --batch "$b" --emit cubin -o "$cache/k.cubin" \
        >> "$out/startup.txt" 2>&1 || status=1
      echo "== variant $strategy (B=$b) alone, cold: $((($(date +%s%N) - start) / 1000000)) ms" \
        >> "$out/startup.txt"
      rm -rf "$cache"
    done < "$out/variants.txt"
    cat "$out/startup.txt" ;;
  gemm)
    for unit in wgmma mma; do
      # (from batch 1057: its tiles of 128 rows as well as of 64)
      t=only=tiled:gemm,gemm=1057:
      [ $unit = mma ] && t=$t,gemm.per_sm=2
      for shape in 33,2048 64,2048; do
        # (no commas in the logs' names: they do not come back)
        sanitize_cases "gemm-$unit-$(echo "$shape" | tr , x)" "gemm $unit $shape" \
          --tune $t --only gemm --shape $shape
      done
    done
    # its split tiles, wherever they can be (from batch 2)
    sanitize_cases gemm-split "gemm split 64,2048" --tune only=tiled:gemm_b1024:gemm,gemm.split_cost=0 \
      --only gemm_b1024 --shape 64,2048
    shapes=${GEMM_SHAPES:-"256,2048,16;1024,1024,16;1024,4096,16;32,4096,4"}
    batches=${GEMM_BATCHES:-1057,4096,65536}
    for round in 1 2; do
      for who in tiled mma gemm; do
        t=only=tiled
        [ $who = mma ] && t=only=tiled:gemm,gemm.per_sm=2
        [ $who = gemm ] && t=only=tiled:gemm
        build/bench --quick --no-startup --no-baseline --tune $t --precisions fp32,tf32,bf16,fp16 \
          --shapes "$shapes" --batches "$batches" --json "$out/gemm-$who-$round.json" \
          > "$out/gemm-$who-$round.txt" 2>&1 || { status=1; tail -n 5 "$out/gemm-$who-$round.txt"; }
      done
    done
    python3 bench/before_after.py "$out"/gemm-tiled-*.json -- "$out"/gemm-gemm-*.json \
      | tee "$out/gemm.txt" | tail -n 40
    # mma.sync against wgmma (two blocks a SM against one)
    python3 bench/before_after.py "$out"/gemm-mma-*.json -- "$out"/gemm-gemm-*.json \
      | tee "$out/gemm-wgmma.txt" | tail -n 40 ;;
  python)
    # the package from this tree, for these commands only
    py() {
      PYTHONPATH="$PWD/python:$PWD/build/pylib/site" FLOWGEN_LIBRARY="$PWD/build/libflowgen.so" \
        FLOWGEN_BIN="$PWD/build/flowgen" LD_LIBRARY_PATH="$PWD/build/pylib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        python3 "$@"
    }
    py -m pytest -q -rs python/tests > "$out/pytest.log" 2>&1 || status=1
    note "pytest: $(tail -n 1 "$out/pytest.log")"
    grep -E 'FAILED|ERROR' "$out/pytest.log" | head -20
    py bench/python_call.py --batches "${PYTHON_BATCHES:-1,8,64,1024,4096,65536}" \
      --skip compile-max --runs 100 --json "$out/python-call.json" > "$out/python-call.txt" 2>&1 \
      || status=1
    py bench/python_call.py --batches "${PYTHON_MAX_BATCHES:-8,65536}" --runs 100 --skip compile \
      --json "$out/python-call-max.json" > "$out/python-call-max.txt" 2>&1 || status=1
    tail -n 40 "$out/python-call.txt" "$out/python-call-max.txt" ;;
  profile)
    ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for shape in $(echo "${PROFILE_SHAPES:-256,2048,16;1024,1024,16}" | tr ';' ' '); do
      name=profile-$(echo "$shape" | tr , x)
      # the sixth launch: the bench's warm-up is behind it; every section,
      # the report kept (ncu --import reads it again)
      timeout "${PROFILE_TIMEOUT:-240}" "$ncu" --clock-control none --kernel-name regex:gemm \
        --launch-skip 5 --launch-count 1 --set full --import-source no -f -o "$out/$name" \
        build/bench --quick --no-startup --no-baseline --tune "${PROFILE_TUNE:-only=tiled:gemm}" \
        --precisions "${PROFILE_PRECISION:-bf16}" --shapes "$shape" --batches "${PROFILE_BATCH:-4096}" \
        > "$out/$name-run.txt" 2>&1 || { status=1; tail -n 20 "$out/$name-run.txt"; continue; }
      "$ncu" --import "$out/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1 || status=1
      grep -E 'Throughput|Duration|Busy|Hit Rate|Stall|Issued|Pipe|Warp Cycles|Occupancy' "$out/$name.txt" | head -n 40
      # where the warps wait, instruction by instruction (bench/ncu_hot.py)
      "$ncu" --import "$out/$name.ncu-rep" --page source --print-source sass --csv > "$out/$name-sass.csv" 2>&1 \
        && python3 bench/ncu_hot.py "$out/$name-sass.csv" --top 30 | tee "$out/$name-hot.txt" || status=1
    done ;;
  digits)
    build/flowgen sample --device gpu --batch 1000 --seed 7 -o "$out/digits.npy" -v || status=1
    (cd examples/digits && python3 evaluate.py "$out/digits.npy") | tee "$out/digits.txt" || status=1 ;;
  *) echo "device_round.sh: unknown part '$part'" >&2; exit 2 ;;
  esac
  "$pack"
done
echo "---- summary$summary"
echo "---- logs: $dest/round.tar.gz"
rm -rf "$out" "$pack"
exit $status
