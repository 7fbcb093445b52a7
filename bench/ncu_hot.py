#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's source page.

usage: ncu_hot.py SASS.csv [--top N]

SASS.csv is `ncu --import REPORT --page source --print-source sass --csv`:
a row an instruction, with its warp stall samples.  Prints the N
instructions with the most samples (their share of all, their address and
text), the samples of each opcode, and of each wait: a sample lands on the
instruction after the one a warp waits at, so a branch's or a BSSY's go to
the instruction before it (SYNCS: an mbarrier, a stage's data; BAR: a
block barrier).  Where the page has no such column, its header, so that
the column's name can be looked up.
"""
import argparse
import collections
import csv
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    try:
        with open(args.csv, newline="", encoding="utf-8", errors="replace") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        sys.exit(f"{args.csv}: {e.strerror}")
    # the header: the first row naming the instructions' text
    head = next((i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r)), None)
    if head is None:
        sys.exit(f"{args.csv}: no header with a Source column (first rows: {rows[:3]})")
    names = [c.strip() for c in rows[head]]
    samples = next((i for i, n in enumerate(names) if n.startswith("Warp Stall Sampling (All")), None)
    if samples is None:
        sys.exit(f"{args.csv}: no warp stall sampling column; columns: {names}")
    source, address = names.index("Source"), names.index("Address") if "Address" in names else None

    def number(text):
        try:
            return float(text.replace(",", ""))
        except ValueError:
            return 0.0

    body = [r for r in rows[head + 1:] if len(r) > max(samples, source)]
    total = sum(number(r[samples]) for r in body) or 1.0
    print(f"{len(body)} instructions, {total:.0f} samples ({names[samples]})")
    for r in sorted(body, key=lambda r: -number(r[samples]))[:args.top]:
        where = r[address] if address is not None else ""
        print(f"{100 * number(r[samples]) / total:6.2f}%  {where:>8}  {r[source].strip()}")
    def opcode(r):
        words = [w for w in r[source].split() if not w.startswith("@")]
        return words[0].split(".")[0] if words else "?"

    by_op, by_wait = collections.Counter(), collections.Counter()
    for i, r in enumerate(body):
        op = opcode(r)
        by_op[op] += number(r[samples])
        by_wait[f"after {opcode(body[i - 1])}" if op in ("BRA", "BSSY") and i else op] += number(r[samples])
    print("by opcode:")
    for op, n in by_op.most_common(15):
        print(f"{100 * n / total:6.2f}%  {op}")
    print("by wait:")
    for op, n in by_wait.most_common(10):
        print(f"{100 * n / total:6.2f}%  {op}")


if __name__ == "__main__":
    main()
