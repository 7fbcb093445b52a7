"""flowgen against PyTorch, point by point, from the JSON that build/bench
and bench/pytorch_baseline.py write: device time of each, their ratio, and
every point where flowgen is not faster than PyTorch eager + CUDA graph.

usage: python3 bench/compare.py bench.json pytorch.json [--markdown]
exit status: 0 when flowgen is faster at every point both files have,
1 otherwise, 2 on bad input.
"""
import json
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    markdown = "--markdown" in sys.argv[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    try:
        ours = json.load(open(args[0]))["results"]
        theirs = json.load(open(args[1]))["results"]
    except (OSError, ValueError, KeyError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        sys.exit(2)
    def key_of(r):
        return (r["dim"], r["hidden"], r["steps"], r["batch"], r.get("precision", "fp32"))

    peer = {key_of(r): r for r in theirs}
    if markdown:
        print("| D | H | S | B | flowgen µs | strategy | relerr | PyTorch graph µs | eager µs | speed-up |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    slower = 0
    for r in ours:
        if key_of(r) not in peer:
            continue
        p = peer[key_of(r)]
        key = key_of(r)[:4]
        graph, eager = p["graph_ms"][0] * 1e3, p["eager_ms"][0] * 1e3
        ratio = graph / r["median_us"]
        if ratio <= 1:
            slower += 1
        row = (*key, r["median_us"], r["strategy"], r["relerr"], graph, eager, ratio)
        if markdown:
            print("| %d | %d | %d | %d | %.1f | %s | %.1e | %.1f | %.1f | %.2f× |" % row)
        else:
            print("D=%-5d H=%-5d S=%-4d B=%-7d flowgen %11.1f us %-10s relerr %.1e  "
                  "torch graph %11.1f us eager %11.1f us  x%.2f" % row
                  + ("  SLOWER" if ratio <= 1 else ""))
    print(f"compare: {slower} point(s) where flowgen is not faster", file=sys.stderr)
    sys.exit(1 if slower else 0)


if __name__ == "__main__":
    main()
