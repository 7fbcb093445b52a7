#!/bin/sh
# The reference for a change that must not move the generated kernels: runs
# a flowgen binary over a fixed grid of specs and keeps, for each, its
# --describe JSON (ID.json) and its source (ID.cu), or its refusal (ID.err:
# the exit status and the message).  Compare two such folders with
# tests/plan/compare.sh.
#
# usage: sh tests/plan/snapshot.sh OUTDIR [FLOWGEN]
#   FLOWGEN            the binary (default build/flowgen): build the base
#                      commit's elsewhere (git worktree add) for "before"
#   SNAPSHOT_FILTER    a grep -E pattern: only the specs whose ID matches
#                      (e.g. 'sm_90a' or '^d64_h256_')
#   SNAPSHOT_JOBS      flowgen runs at a time (default 2)
#   SNAPSHOT_TUNE      --tune for every spec (default none)
#
# The grid: shapes (D,H) below x steps {1, 32} x the four solvers x the four
# precisions x sm_75 ... sm_120 (sm_90a too), plus the host launcher for a
# subset (IDs ending in _hl).  About 5,700 specs: a few minutes on 2 cores.
set -eu

if [ "${1:-}" = --one ]; then  # one spec: --one OUTDIR FLOWGEN ID ARGS...
  out=$2 flowgen=$3 id=$4
  shift 4
  tune=${SNAPSHOT_TUNE:+--tune $SNAPSHOT_TUNE}
  # shellcheck disable=SC2086 # $tune: empty or two words
  if "$flowgen" "$@" $tune --describe > "$out/$id.json" 2> "$out/$id.msg"; then
    # shellcheck disable=SC2086
    "$flowgen" "$@" $tune > "$out/$id.cu"
    rm -f "$out/$id.msg"
  else
    status=$?
    { echo "exit $status"; cat "$out/$id.msg"; } > "$out/$id.err"
    rm -f "$out/$id.json" "$out/$id.msg"
  fi
  exit 0
fi

[ $# -ge 1 ] || { echo "usage: sh tests/plan/snapshot.sh OUTDIR [FLOWGEN]" >&2; exit 2; }
out=$1
flowgen=${2:-build/flowgen}
[ -x "$flowgen" ] || { echo "snapshot.sh: $flowgen is not an executable" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
case $flowgen in /*) ;; *) flowgen=$PWD/$flowgen ;; esac

shapes="1,4 2,8 3,12 8,32 16,64 17,200 32,128 32,256 48,192 64,64 64,128 64,256 80,160 100,100
128,128 128,512 256,512 256,1024 32,2048 64,4096 1024,1024 1024,4096"
specs() {
  for shape in $shapes; do
    d=${shape%,*} h=${shape#*,}
    for steps in 1 32; do
      for solver in euler midpoint heun rk4; do
        for precision in fp32 tf32 bf16 fp16; do
          for arch in sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a sm_100 sm_120; do
            id=d${d}_h${h}_s${steps}_${solver}_${precision}_${arch}
            args="--dim $d --hidden $h --steps $steps --solver $solver --precision $precision --arch $arch"
            echo "$id $args"
            # the host launcher: every variant kind of a few archs
            case $steps.$solver.$arch in
            32.euler.sm_80 | 32.euler.sm_90 | 32.euler.sm_90a | 32.rk4.sm_90a)
              echo "${id}_hl $args --host-launcher" ;;
            esac
          done
        done
      done
    done
  done
}

specs | grep -E -e "${SNAPSHOT_FILTER:-.}" |
  xargs -P "${SNAPSHOT_JOBS:-2}" -L 1 sh "$0" --one "$out" "$flowgen"
echo "snapshot.sh: $(ls "$out" | grep -c '\.json$') specs generated, $(ls "$out" | grep -c '\.err$') refused, in $out"
