#!/bin/sh
# Runs each test program given; prints one summary line at the end.
# FLOWGEN_REQUIRE_GPU=1 turns a GPU test's skip into a failure (make test-gpu).
passed=0
failed=0
failed_names=""
for t in "$@"; do
  name=$(basename "$t")
  if "$t"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failed_names="$failed_names $name"
  fi
done
echo
[ "$failed" -eq 0 ] || echo "failed:$failed_names"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
