"""flowgen against PyTorch, point by point, from the JSON that build/bench
and bench/pytorch_baseline.py write: device time of each, flowgen's
TFLOP/s, their ratio, and every point where flowgen is not faster than
PyTorch eager + CUDA graph in the same precision; then, per precision,
the points compared, the slower ones and the least ratio.

usage: python3 bench/compare.py bench.json pytorch.json... [--markdown | --grid]
                                [--peak gemm_peak.json]
  (one pytorch.json a precision, as bench/pytorch_baseline.py --precision
  writes them; bench.json may hold every precision; --peak: PyTorch's own
  [B, H] x [H, H]^T of the same H, B and precision, as bench/gemm_peak.py
  writes it, and flowgen's TFLOP/s as a share of it; --grid: a Markdown
  table a precision instead, a row a shape, a column a batch, each cell
  the speed-up (and from B=4096 flowgen's TFLOP/s), in bold with the
  strategy where flowgen is not faster: docs/performance.md's tables)
exit status: 0 when flowgen is faster at every point both sides have,
1 otherwise, 2 on bad input.
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)["results"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"compare.py: {path}: {e}", file=sys.stderr)
        sys.exit(2)


def key_of(r):
    return (r["dim"], r["hidden"], r["steps"], r["batch"], r.get("precision", "fp32"))


def usage():
    print(__doc__, file=sys.stderr)
    sys.exit(2)


def main():
    argv = sys.argv[1:]
    peaks = {}
    if "--peak" in argv:
        i = argv.index("--peak")
        if i + 1 >= len(argv):
            usage()
        try:
            peaks = {(r["hidden"], r["batch"], r["precision"]): r["tflops"] for r in load(argv[i + 1])}
        except (KeyError, TypeError) as e:
            print(f"compare.py: {argv[i + 1]}: a result without {e}", file=sys.stderr)
            sys.exit(2)
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    markdown = "--markdown" in argv
    grid = "--grid" in argv
    cells = {}  # --grid: precision -> {(D, H, S): {B: cell}}
    if len(args) < 2:
        usage()
    ours = load(args[0])
    peer = {}
    for path in args[1:]:
        peer.update({key_of(r): r for r in load(path)})
    if markdown:
        print("| precision | D | H | S | B | flowgen µs | strategy | TFLOP/s | relerr "
              "| PyTorch graph µs | eager µs | speed-up |" + (" of GEMM peak |" if peaks else ""))
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
              + (" ---: |" if peaks else ""))
    per = {}  # precision -> [points, slower, least ratio]
    for r in ours:
        k = key_of(r)
        if k not in peer:
            continue
        p = peer[k]
        graph, eager = p["graph_ms"][0] * 1e3, p["eager_ms"][0] * 1e3
        ratio = graph / r["median_us"]
        stats = per.setdefault(k[4], [0, 0, float("inf")])
        stats[0] += 1
        stats[1] += ratio <= 1
        stats[2] = min(stats[2], ratio)
        row = (k[4], *k[:4], r["median_us"], r["strategy"], r.get("tflops", 0.0), r["relerr"],
               graph, eager, ratio)
        # flowgen's TFLOP/s over PyTorch's plain GEMM of the hidden layer's size
        peak = peaks.get((k[1], k[3], k[4]))
        share = "" if peak is None else " %.0f%%" % (100.0 * r.get("tflops", 0.0) / peak)
        if grid:
            cell = "%.2fx" % ratio + (", %.0f" % r.get("tflops", 0.0) if k[3] >= 4096 else "")
            if ratio <= 1:
                cell = "**%s** (%s)" % (cell, r["strategy"])
            cells.setdefault(k[4], {}).setdefault(k[:3], {})[k[3]] = cell
        elif markdown:
            print("| %s | %d | %d | %d | %d | %.1f | %s | %.1f | %.1e | %.1f | %.1f | %.2f× |" % row
                  + (" %s |" % share.strip() if peaks else ""))
        else:
            print("%-4s D=%-5d H=%-5d S=%-4d B=%-7d flowgen %11.1f us %-10s %6.1f TFLOP/s "
                  "relerr %.1e  torch graph %11.1f us eager %11.1f us  x%.2f" % row
                  + (" " + share + " of GEMM peak" if share else "")
                  + ("  SLOWER" if ratio <= 1 else ""))
    for precision, shapes in sorted(cells.items()):
        batches = sorted({b for row in shapes.values() for b in row})
        print("\n%s:\n" % precision)
        print("| D, H, S | " + " | ".join("B=%d" % b for b in batches) + " |")
        print("| --- |" + " ---: |" * len(batches))
        for shape, row in shapes.items():  # in the sweep's order
            print("| %d, %d, %d | " % shape + " | ".join(row.get(b, "") for b in batches) + " |")
    slower = 0
    for precision, (points, worse, least) in sorted(per.items()):
        slower += worse
        print(f"compare: {precision}: {points} point(s), {worse} where flowgen is not faster, "
              f"least speed-up x{least:.2f}", file=sys.stderr)
    if not per:
        print("compare: no point in both files", file=sys.stderr)
    sys.exit(1 if slower else 0)


if __name__ == "__main__":
    main()
