#!/bin/sh
# Plots device time against batch size from the JSON build/bench and
# bench/pytorch_baseline.py write: one line per precision in bench.json
# (flowgen), and PyTorch's CUDA-graph times (dashed, the same colour per
# precision) from each pytorch.json given.
# usage: sh bench/plot.sh [-s D,H,S] out.png bench.json [pytorch.json...]
#   -s D,H,S  the shape to plot (default 64,256,32)
# Needs python3 and gnuplot (Debian: apt-get install -y gnuplot-nox).
set -eu
usage() { echo "usage: sh bench/plot.sh [-s D,H,S] out.png bench.json [pytorch.json...]" >&2; exit 2; }
shape=64,256,32
if [ "${1:-}" = -s ]; then
  [ $# -ge 2 ] || usage
  shape=$2
  shift 2
fi
[ $# -ge 2 ] || usage
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install -y gnuplot-nox)" >&2; exit 1; }
png=$1
shift
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
# One file a line ("flowgen-fp32.dat", "torch-bf16.dat", ...: batch, µs)
# and plot.gp, the plot command over them.
python3 - "$shape" "$data" "$@" <<'PY'
import json, sys
shape, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
d, h, s = (int(v) for v in shape.split(","))
order = ["fp32", "tf32", "bf16", "fp16"]
colour = {"fp32": "#1f77b4", "tf32": "#ff7f0e", "bf16": "#2ca02c", "fp16": "#d62728"}
lines = {}  # (who, precision) -> {batch: us}
for i, path in enumerate(files):
    results = json.load(open(path))["results"]
    for r in results:
        if (r["dim"], r["hidden"], r["steps"]) != (d, h, s):
            continue
        p = r.get("precision", "fp32")
        if i == 0:
            lines.setdefault(("flowgen", p), {})[r["batch"]] = r["median_us"]
        else:
            lines.setdefault(("torch", p), {})[r["batch"]] = r["graph_ms"][0] * 1e3
if not lines:
    sys.exit(f"plot.sh: no results for D,H,S = {shape}")
plots = []
for who in ("flowgen", "torch"):
    for p in sorted({p for w, p in lines if w == who}, key=lambda p: (order + [p]).index(p)):
        name = f"{out}/{who}-{p}.dat"
        with open(name, "w") as f:
            for b, us in sorted(lines[(who, p)].items()):
                f.write(f"{b} {us}\n")
        style = "lw 2 pt 7 ps 0.6" if who == "flowgen" else "lw 1.5 dt 2 pt 6 ps 0.6"
        title = f"flowgen {p}" if who == "flowgen" else f"PyTorch {p}, CUDA graph"
        plots.append(f'"{name}" using 1:2 with linespoints {style} lc rgb "{colour.get(p, "black")}" '
                     f'title "{title}"')
with open(f"{out}/plot.gp", "w") as f:
    f.write("plot " + ", \\\n     ".join(plots) + "\n")
PY
gnuplot <<GP
set terminal pngcairo size 900,560 font ",11"
set output "$png"
set title "D,H,S = $shape: device time of one sample call"
set logscale xy
set format x "10^{%L}"
set format y "%g"
set xlabel "batch size"
set ylabel "time (µs)"
set key top left
set grid
load "$data/plot.gp"
GP
echo "wrote $png"
