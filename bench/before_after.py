"""Two builds of flowgen timed on the same points: for each point (shape,
precision, batch), the best median of each side's runs, their ratio, and
each side's own spread between runs (what a difference must exceed to
mean anything).  Prints a table and the points where "after" is slower
than "before" by more than --limit percent (default 3).

usage: python3 bench/before_after.py BEFORE.json... -- AFTER.json... [--limit P] [--markdown]
exit status: 0 when no point is slower beyond the limit, 1 otherwise,
2 on bad input.
"""
import json
import sys

FIELDS = ("dim", "hidden", "steps", "batch", "median_us")


def fail(message):
    print(f"before_after.py: {message}", file=sys.stderr)
    sys.exit(2)


def load(paths):
    runs = {}
    for path in paths:
        try:
            with open(path) as f:
                results = json.load(f)["results"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            fail(f"{path}: not a bench --json file ({e})")
        for r in results:
            missing = [k for k in FIELDS if not isinstance(r, dict) or k not in r]
            if missing:
                fail(f"{path}: a result without '{missing[0]}'")
            m = r["median_us"]
            if isinstance(m, bool) or not isinstance(m, (int, float)) or not m > 0:
                fail(f"{path}: median_us {m!r} is not a time")
            key = (r["dim"], r["hidden"], r["steps"], r.get("precision", "fp32"), r["batch"])
            runs.setdefault(key, []).append(r)
    return runs


def main():
    argv = sys.argv[1:]
    limit, markdown = 3.0, False
    if "--limit" in argv:
        i = argv.index("--limit")
        try:
            limit = float(argv[i + 1])
        except (IndexError, ValueError):
            fail("--limit needs a number of percent")
        del argv[i:i + 2]
    if "--markdown" in argv:
        markdown = True
        argv.remove("--markdown")
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cut = argv.index("--")
    if cut == 0 or cut == len(argv) - 1:
        fail("needs BEFORE.json... -- AFTER.json..., a file on each side")
    before, after = load(argv[:cut]), load(argv[cut + 1:])
    if not set(before) & set(after):
        fail("no point timed on both sides")
    sep = " | " if markdown else "  "
    if markdown:
        print("| D, H, S | precision | B | before µs | after µs | after/before | spread before | spread after | strategy |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    slower = []
    for key in sorted(set(before) & set(after)):
        b = [r["median_us"] for r in before[key]]
        a = [r["median_us"] for r in after[key]]
        spread_b = (max(b) - min(b)) / min(b) * 100
        spread_a = (max(a) - min(a)) / min(a) * 100
        ratio = min(a) / min(b)
        d, h, s, p, batch = key
        row = [f"{d},{h},{s}", p, str(batch), f"{min(b):.2f}", f"{min(a):.2f}", f"{ratio:.3f}",
               f"{spread_b:.1f}%", f"{spread_a:.1f}%", after[key][0].get("strategy", "?")]
        print(("| " if markdown else "") + sep.join(row) + (" |" if markdown else ""))
        if ratio > 1 + limit / 100:
            slower.append(row)
    print(f"\n{len(set(before) & set(after))} points; {len(slower)} slower by more than {limit}%:")
    for row in slower:
        print("  " + "  ".join(row))
    sys.exit(1 if slower else 0)


if __name__ == "__main__":
    main()
