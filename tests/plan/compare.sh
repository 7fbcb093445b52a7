#!/bin/sh
# Compares two folders written by tests/plan/snapshot.sh (before and after a
# change): every spec's --describe must be identical but for source_bytes,
# every refusal identical, and every source identical unless its
# difference is one of the reviewed kinds.  Differing sources are grouped by
# the text of their difference (line numbers aside), so that each kind of
# difference is read once: `compare.sh -v` prints each group's diff.  A
# source that is the same once its // comments and blank lines are removed
# differs in comments only: the same code (the same SASS), listed as such.
#
# -c compiles one source of each kind, before and after, to a cubin with
# nvcc (no GPU needed) and says whether the two are the same bytes: the
# proof that a difference moves no instruction.  nvcc, not flowgen --emit:
# NVRTC's parallel compile gives cubins that vary from run to run for one
# source.  A cubin, not PTX: NVVM numbers PTX's virtual registers
# differently when only comments move (the same cubin from both).
#
# usage: sh tests/plan/compare.sh [-v] [-c] BEFORE AFTER
# AFTER may hold a part of the grid (snapshot.sh's SNAPSHOT_FILTER).
# exit status: 0 all identical but for comments; 1 a describe or refusal
# differs, or AFTER has a spec BEFORE lacks; 3 the code of some sources
# differs (review the groups).
set -eu
verbose=0 cubin=0
while [ $# -gt 0 ]; do
  case $1 in
    -v) verbose=1 ;;
    -c) cubin=1 ;;
    *) break ;;
  esac
  shift
done
[ $# -eq 2 ] || { echo "usage: sh tests/plan/compare.sh [-v] [-c] BEFORE AFTER" >&2; exit 2; }
before=$1 after=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$before" && ls) | sed -n 's/\.\(json\|err\)$//p' | sort > "$tmp/ids.before"
(cd "$after" && ls) | sed -n 's/\.\(json\|err\)$//p' | sort > "$tmp/ids.after"
status=0
# AFTER may be a part of the grid (snapshot.sh with SNAPSHOT_FILTER)
unseen=$(comm -23 "$tmp/ids.before" "$tmp/ids.after" | wc -l)
[ "$unseen" -eq 0 ] || echo "specs not in $after (not compared): $unseen"
new=$(comm -13 "$tmp/ids.before" "$tmp/ids.after" | wc -l)
if [ "$new" -ne 0 ]; then
  echo "specs not in $before: $new"
  comm -13 "$tmp/ids.before" "$tmp/ids.after" | head -20
  status=1
fi

describe_diff=0 refusal_diff=0 source_same=0 source_diff=0 comments_only=0
# the code of a source: no // comments, no blank lines
code() { sed -e 's|[[:space:]]*//.*$||' -e '/^[[:space:]]*$/d' "$1"; }
: > "$tmp/groups"
for id in $(comm -12 "$tmp/ids.before" "$tmp/ids.after"); do
  if [ -f "$before/$id.err" ] || [ -f "$after/$id.err" ]; then
    if ! cmp -s "$before/$id.err" "$after/$id.err" 2>/dev/null; then
      refusal_diff=$((refusal_diff + 1))
      echo "refusal differs: $id"
      [ $verbose -eq 0 ] || diff "$before/$id.err" "$after/$id.err" || true
    fi
    continue
  fi
  grep -v '"source_bytes"' "$before/$id.json" > "$tmp/a.json"
  grep -v '"source_bytes"' "$after/$id.json" > "$tmp/b.json"
  if ! cmp -s "$tmp/a.json" "$tmp/b.json"; then
    describe_diff=$((describe_diff + 1))
    echo "describe differs: $id"
    [ $verbose -eq 0 ] || diff "$tmp/a.json" "$tmp/b.json" || true
  fi
  if cmp -s "$before/$id.cu" "$after/$id.cu"; then
    source_same=$((source_same + 1))
  else
    code "$before/$id.cu" > "$tmp/a.cu"
    code "$after/$id.cu" > "$tmp/b.cu"
    if cmp -s "$tmp/a.cu" "$tmp/b.cu"; then
      comments_only=$((comments_only + 1)) kind=comments
    else
      source_diff=$((source_diff + 1)) kind=code
    fi
    # the difference without its line numbers: one key per kind of change
    key=$(diff "$before/$id.cu" "$after/$id.cu" | sed 's/^[0-9][0-9,]*[acd][0-9,]*$/@/' | md5sum | cut -c1-12)
    echo "$key $id $kind" >> "$tmp/groups"
  fi
done

echo "describe: $describe_diff differ; refusals: $refusal_diff differ"
echo "source: $source_same identical, $comments_only differ in comments only, $source_diff in code"
if [ -s "$tmp/groups" ]; then
  echo "kinds of source difference (specs, key, one of them, what differs):"
  sort "$tmp/groups" | awk '{n[$1]++; if (!($1 in ex)) {ex[$1] = $2; kind[$1] = $3}} END {for (k in n) print n[k], k, ex[k], kind[k]}' |
    sort -rn | while read -r n key id kind; do
      same=
      if [ $cubin -eq 1 ]; then
        arch=$(echo "$id" | sed -E 's/.*_(sm_[0-9]+a?)(_hl)?$/\1/')
        same="  cubin: failed"
        if nvcc -cubin -std=c++17 -arch="$arch" -o "$tmp/a.cubin" "$before/$id.cu" 2> "$tmp/nvcc.log" &&
            nvcc -cubin -std=c++17 -arch="$arch" -o "$tmp/b.cubin" "$after/$id.cu" 2>> "$tmp/nvcc.log"; then
          if cmp -s "$tmp/a.cubin" "$tmp/b.cubin"; then same="  cubin: same"; else same="  cubin: DIFFERS"; fi
        fi
      fi
      echo "  $n  $key  $id  $kind$same"
      if [ $verbose -eq 1 ]; then diff "$before/$id.cu" "$after/$id.cu" | head -60 | sed 's/^/      /'; fi
    done
fi
[ "$describe_diff" -eq 0 ] && [ "$refusal_diff" -eq 0 ] || status=1
[ $status -ne 0 ] || [ "$source_diff" -eq 0 ] || status=3
exit $status
