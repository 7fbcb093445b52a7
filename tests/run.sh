#!/bin/sh
# Runs each test program given, FLOWGEN_TEST_JOBS at a time (default: the
# number of CPUs), each with its output captured and printed whole, in the
# order given, as it finishes; then two counts: programs, and test cases
# (passed, failed, skipped) as each program's cmocka summary gives them.
# A program that ends without its summary (a crash, a failed group set-up)
# counts as failed, its cases as unknown.  FLOWGEN_REQUIRE_GPU=1 turns a
# GPU test's skip into a failure (make test-gpu).  Programs start in the
# order given, so the slowest should come first; each one's time follows
# its output.
dir=$(mktemp -d) || exit 1
workers=""
cleanup() {
  [ -z "$workers" ] || kill $workers 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Line-buffered, so that a program's stdout and stderr lines keep their
# order in its log.
unbuffered=""
command -v stdbuf >/dev/null 2>&1 && unbuffered="stdbuf -oL -eL"

jobs=${FLOWGEN_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac
count=$#
[ "$jobs" -le "$count" ] || jobs=$count

# Worker: takes the next program no other worker has taken (mkdir is the
# lock) and runs it into $dir/N.log, its exit status into $dir/N.rc.
worker() {
  child=""
  trap '[ -z "$child" ] || kill "$child" 2>/dev/null; exit 143' TERM
  n=0
  for t in "$@"; do
    n=$((n + 1))
    mkdir "$dir/claim.$n" 2>/dev/null || continue
    start=$(date +%s)
    $unbuffered "$t" > "$dir/$n.log" 2>&1 &
    child=$!
    wait "$child"
    rc=$?
    echo "$rc $(($(date +%s) - start))" > "$dir/$n.rc.tmp"
    mv "$dir/$n.rc.tmp" "$dir/$n.rc"
    child=""
  done
}

w=0
while [ "$w" -lt "$jobs" ]; do
  worker "$@" &
  workers="$workers $!"
  w=$((w + 1))
done

programs_passed=0
programs_failed=0
passed=0
failed=0
skipped=0
failed_names=""
no_summary=""

# The number of cmocka's summary line "[  WORD  ] N test(s)..." in log $1
# (0 if none).
summary() {
  sed -n "s/^\[  $2 *\] \([0-9][0-9]*\) test(s).*/\1/p" "$1" | tail -n 1 | grep . || echo 0
}

n=0
for t in "$@"; do
  n=$((n + 1))
  name=$(basename "$t")
  while [ ! -f "$dir/$n.rc" ]; do sleep 0.2; done
  log="$dir/$n.log"
  cat "$log"
  read -r rc seconds < "$dir/$n.rc"
  echo "# $name: ${seconds} s"
  passed=$((passed + $(summary "$log" PASSED)))
  failed=$((failed + $(summary "$log" FAILED)))
  skipped=$((skipped + $(summary "$log" SKIPPED)))
  grep -q '^\[==========\] [0-9][0-9]* test(s) run\.' "$log" || no_summary="$no_summary $name"
  if [ "$rc" -eq 0 ]; then
    programs_passed=$((programs_passed + 1))
  else
    programs_failed=$((programs_failed + 1))
    failed_names="$failed_names $name"
  fi
done
wait
workers=""
echo
[ -z "$failed_names" ] || echo "failed:$failed_names"
[ -z "$no_summary" ] || echo "no summary (crashed or set-up failed):$no_summary"
echo "tests: $programs_passed programs passed, $programs_failed failed;" \
     "$passed cases passed, $failed failed, $skipped skipped"
[ "$programs_failed" -eq 0 ]
