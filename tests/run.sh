#!/bin/sh
# Runs each test program given, showing its output as it comes, and ends
# with two counts: programs, and test cases (passed, failed, skipped) as
# each program's cmocka summary gives them.  A program that ends without
# its summary (a crash, a failed group setup) counts as failed, its cases
# as unknown.  FLOWGEN_REQUIRE_GPU=1 turns a GPU test's skip into a failure
# (make test-gpu).
log=$(mktemp) || exit 1
trap 'rm -f "$log" "$log.rc"' EXIT
trap 'exit 130' INT TERM
# Line-buffered, so that a program's lines keep their order through tee.
unbuffered=""
command -v stdbuf >/dev/null 2>&1 && unbuffered="stdbuf -oL -eL"

programs_passed=0
programs_failed=0
passed=0
failed=0
skipped=0
failed_names=""
no_summary=""

# The number of cmocka's summary line "[  WORD  ] N test(s)..." (0 if none).
summary() {
  sed -n "s/^\[  $1 *\] \([0-9][0-9]*\) test(s).*/\1/p" "$log" | tail -n 1 | grep . || echo 0
}

for t in "$@"; do
  name=$(basename "$t")
  { $unbuffered "$t"; echo $? > "$log.rc"; } 2>&1 | tee "$log"
  rc=$(cat "$log.rc")
  passed=$((passed + $(summary PASSED)))
  failed=$((failed + $(summary FAILED)))
  skipped=$((skipped + $(summary SKIPPED)))
  grep -q '^\[==========\] [0-9][0-9]* test(s) run\.' "$log" || no_summary="$no_summary $name"
  if [ "$rc" -eq 0 ]; then
    programs_passed=$((programs_passed + 1))
  else
    programs_failed=$((programs_failed + 1))
    failed_names="$failed_names $name"
  fi
done
echo
[ -z "$failed_names" ] || echo "failed:$failed_names"
[ -z "$no_summary" ] || echo "no summary (crashed or set-up failed):$no_summary"
echo "tests: $programs_passed programs passed, $programs_failed failed;" \
     "$passed cases passed, $failed failed, $skipped skipped"
[ "$programs_failed" -eq 0 ]
