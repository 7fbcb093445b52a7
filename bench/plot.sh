#!/bin/sh
# Plots device time against batch size, flowgen beside PyTorch, from the
# JSON that build/bench and bench/pytorch_baseline.py write.
# usage: sh bench/plot.sh bench.json pytorch.json out.png [D,H,S]
# Needs python3 and gnuplot (Debian: apt-get install -y gnuplot-nox).
set -eu
[ $# -ge 3 ] || { echo "usage: sh bench/plot.sh bench.json pytorch.json out.png [D,H,S]" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install -y gnuplot-nox)" >&2; exit 1; }
shape=${4:-64,256,32}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
python3 - "$1" "$2" "$shape" "$data" <<'PY'
import json, sys
bench, torch, shape, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
d, h, s = (int(v) for v in shape.split(","))
def match(r):
    return r["dim"] == d and r["hidden"] == h and r["steps"] == s
with open(f"{out}/flowgen.dat", "w") as f:
    for r in sorted((r for r in json.load(open(bench))["results"] if match(r)), key=lambda r: r["batch"]):
        f.write(f'{r["batch"]} {r["median_us"]}\n')
with open(f"{out}/torch.dat", "w") as f:
    for r in sorted((r for r in json.load(open(torch))["results"] if match(r)), key=lambda r: r["batch"]):
        f.write(f'{r["batch"]} {r["graph_ms"][0] * 1e3} {r["eager_ms"][0] * 1e3}\n')
PY
gnuplot <<GP
set terminal pngcairo size 800,500 font ",11"
set output "$3"
set title "D,H,S = $shape, fp32: device time per sample call"
set logscale xy
set xlabel "batch size"
set ylabel "time (µs)"
set key top left
set grid
plot "$data/flowgen.dat" using 1:2 with linespoints lw 2 title "flowgen", \
     "$data/torch.dat" using 1:2 with linespoints lw 2 title "PyTorch, CUDA graph", \
     "$data/torch.dat" using 1:3 with linespoints lw 2 title "PyTorch, eager"
GP
echo "wrote $3"
