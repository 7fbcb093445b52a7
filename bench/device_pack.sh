#!/bin/sh
# What a device round needs, made on a machine without a GPU: the build's
# GPU-facing programs, stripped, in DIR/build (about 24 MB: flowgen, bench,
# sanitize, the libraries, examples/, the test programs that need a GPU
# and libcmocka), and with --warm, a module cache in DIR/cache holding
# every variant of the wide models' sweep shapes (SWEEP_SHAPES, default
# the eight of docs/performance.md) in PRECISIONS (default all four),
# compiled for sm_90a.  On the GPU machine, with DIR carried:
#
#   rm -rf build && cp -a DIR/build build
#   FLOWGEN_CACHE_TRUST=any BENCH_CACHE_DIR=$PWD/DIR/cache sh bench/device_round.sh sweep
#
# (cp -a keeps the times: libflowgen.a no newer than examples/, so that
# test_examples does not build jit_sample again, which needs the static
# Lua and jansson the GPU machine lacks).  Any change to a template changes
# the kernels' cache keys: pack again after it.
#
# --before REV: another commit's bench, built in a git worktree (removed
# after), in DIR/before/bench, and its kernels of the same shapes and
# precisions warmed by its own flowgen into DIR/before/cache, for a sweep
# before and after in one run:
#
#   BEFORE=$PWD/DIR/before/bench BEFORE_CACHE_DIR=$PWD/DIR/before/cache \
#   FLOWGEN_CACHE_TRUST=any BENCH_CACHE_DIR=$PWD/DIR/cache sh bench/device_round.sh sweep
#
# --also NAME=REV (again for more): a third build (and fourth...) for
# `device_round.sh compare`'s ALSO, built so in DIR/NAME/bench, its kernels
# warmed into DIR/cache beside this build's (a kernel's key is its source:
# the builds' never collide).  Before, after and one more in one run:
#
#   BEFORE=$PWD/DIR/before/bench BEFORE_CACHE_DIR=$PWD/DIR/before/cache \
#   ALSO="NAME=$PWD/DIR/NAME/bench" FLOWGEN_CACHE_TRUST=any \
#   BENCH_CACHE_DIR=$PWD/DIR/cache sh bench/device_round.sh compare
#
# exit status: 0 packed, 1 a build failed, 2 a bad argument.
# usage: sh bench/device_pack.sh DIR [--warm] [--before REV] [--also NAME=REV]...
set -eu
usage() { echo "usage: sh bench/device_pack.sh DIR [--warm] [--before REV] [--also NAME=REV]..." >&2; exit 2; }
[ $# -ge 1 ] || usage
dir=$1
shift
warm="" before="" also=""
while [ $# -gt 0 ]; do
  case $1 in
    --warm) warm=1 ;;
    --before) [ $# -ge 2 ] || usage; before=$2; shift ;;
    --also)
      [ $# -ge 2 ] || usage
      case ${2%%=*} in
        before | after | build | cache | "" | *[!a-z0-9_]*)
          echo "device_pack.sh: --also: '$2' is not NAME=REV (a NAME of a-z, 0-9 and _, not before, after, build or cache)" >&2
          exit 2 ;;
      esac
      case $2 in *=?*) ;; *) echo "device_pack.sh: --also: '$2' names no commit" >&2; exit 2 ;; esac
      for a in $also; do
        [ "${a%%=*}" != "${2%%=*}" ] || { echo "device_pack.sh: --also: '${2%%=*}' twice" >&2; exit 2; }
      done
      also="$also $2"
      shift ;;
    *) usage ;;
  esac
  shift
done
for rev in ${before:+"--before=$before"} $also; do
  git rev-parse --verify --quiet "${rev#*=}^{commit}" > /dev/null \
    || { echo "device_pack.sh: ${rev%%=*}: no commit '${rev#*=}'" >&2; exit 2; }
done
shapes=${SWEEP_SHAPES:-"32,512,4;256,1024,16;1024,1024,16;256,2048,16;1024,4096,4;157,2150,4;469,3111,8;66,636,4"}
# warm_cache FLOWGEN CACHE: every shape in every precision into CACHE
warm_cache() {
  mkdir -p "$2"
  for s in $(echo "$shapes" | tr ';' ' '); do
    d=${s%%,*} rest=${s#*,}
    h=${rest%%,*} steps=${rest#*,}
    for p in $(echo "${PRECISIONS:-fp32,tf32,bf16,fp16}" | tr , ' '); do
      "$1" cache warm --dir "$2" --arch sm_90a --dim "$d" --hidden "$h" --steps "$steps" --precision "$p"
    done
  done
}
make -j"$(nproc)" all tests
make -C examples O="$PWD/build/examples" FLOWGEN_BUILD="$PWD/build"
rm -rf "$dir/build"
mkdir -p "$dir/build/tests"
cp -a build/flowgen build/bench build/sanitize build/libflowgen.a build/libflowgen.so* build/examples "$dir/build/"
# the test programs that need a GPU (the others run in CI)
for t in test_cache test_cache_load test_cli test_cli_runtime test_device test_digits test_examples \
         test_family test_gpu_sample test_output; do
  cp -a "build/tests/$t" "$dir/build/tests/"
done
cp -a build/tests/libcmocka.so.0 "$dir/build/tests/"
for f in "$dir/build/flowgen" "$dir/build/bench" "$dir/build/sanitize" "$dir"/build/tests/test_*; do
  strip "$f"
done
touch -r build/libflowgen.a "$dir/build/libflowgen.a"
[ -n "$warm" ] && warm_cache build/flowgen "$dir/cache"
# another_build NAME REV CACHE: REV built in a git worktree (removed after),
# its bench in DIR/NAME/bench, its kernels warmed into CACHE (with --warm)
src=""
drop_worktree() {
  if [ -n "$src" ]; then git worktree remove --force "$src" 2> /dev/null; rm -rf "$src" "$src.log"; fi
  src=""
}
trap drop_worktree EXIT
another_build() {
  src=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  git worktree add --detach --force "$src" "$2" > /dev/null
  make -C "$src" -j"$(nproc)" all > "$src.log" 2>&1 || { tail -n 20 "$src.log"; exit 1; }
  rm -rf "${dir:?}/$1"
  mkdir -p "$dir/$1"
  cp "$src/build/bench" "$dir/$1/bench"
  strip "$dir/$1/bench"
  [ -n "$warm" ] && warm_cache "$src/build/flowgen" "$3"
  drop_worktree
}
[ -n "$before" ] && another_build before "$before" "$dir/before/cache"
for a in $also; do
  another_build "${a%%=*}" "${a#*=}" "$dir/cache"
done
du -sh "$dir"
