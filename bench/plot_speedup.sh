#!/bin/sh
# Plots flowgen's speed-up over PyTorch (its CUDA-graph time over flowgen's
# device time) against batch size from a sweep's JSON (device_round.sh
# sweep): a panel per precision, a line per shape (D, H, S), the line of
# parity at 1.  Points under it are where flowgen is slower.
# usage: sh bench/plot_speedup.sh out.png bench.json pytorch.json...
#   (one pytorch.json a precision, as bench/pytorch_baseline.py writes them)
# Needs python3 and gnuplot (Debian: apt-get install -y gnuplot-nox).
set -eu
[ $# -ge 3 ] || { echo "usage: sh bench/plot_speedup.sh out.png bench.json pytorch.json..." >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot_speedup.sh: gnuplot not found (apt-get install -y gnuplot-nox)" >&2; exit 1; }
png=$1
shift
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
# One file a (precision, shape) ("bf16-d256-h2048-s16.dat": batch, speed-up)
# and plot.gp, a panel per precision over them.
python3 - "$data" "$@" <<'PY'
import json, sys
out, files = sys.argv[1], sys.argv[2:]
def results(path):
    try:
        with open(path) as f:
            return json.load(f)["results"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"plot_speedup.sh: {path}: {e}")
def key(r):
    return (r.get("precision", "fp32"), r["dim"], r["hidden"], r["steps"], r["batch"])
ours = {key(r): r["median_us"] for r in results(files[0])}
peer = {}
for path in files[1:]:
    peer.update({key(r): r["graph_ms"][0] * 1e3 for r in results(path)})
lines = {}  # (precision, D, H, S) -> {batch: speed-up}
for k, us in ours.items():
    if k in peer and us > 0:
        lines.setdefault(k[:4], {})[k[4]] = peer[k] / us
if not lines:
    sys.exit("plot_speedup.sh: no point in both flowgen's file and PyTorch's")
order = ["fp32", "tf32", "bf16", "fp16"]
precisions = sorted({k[0] for k in lines}, key=lambda p: (order + [p]).index(p))
columns = 1 if len(precisions) == 1 else 2
rows = (len(precisions) + columns - 1) // columns
with open(f"{out}/plot.gp", "w") as f:
    f.write(f"set multiplot layout {rows},{columns}\n")
    for p in precisions:
        plots = ['1 with lines lw 1.5 dt 2 lc rgb "black" title "parity"']
        for (q, d, h, s), points in sorted(lines.items()):
            if q != p:
                continue
            name = f"{out}/{p}-d{d}-h{h}-s{s}.dat"
            with open(name, "w") as g:
                for b, x in sorted(points.items()):
                    g.write(f"{b} {x}\n")
            plots.append(f'"{name}" using 1:2 with linespoints lw 2 pt 7 ps 0.5 '
                         f'title "D={d} H={h} S={s}"')
        f.write(f'set title "{p}: PyTorch CUDA graph time / flowgen time"\n')
        f.write("plot " + ", \\\n     ".join(plots) + "\n")
    f.write("unset multiplot\n")
PY
gnuplot <<GP
set terminal pngcairo size 1200,900 font ",10"
set output "$png"
set logscale xy
set format x "10^{%L}"
set format y "%g"
set xlabel "batch size"
set ylabel "speed-up"
set key top right font ",8"
set grid
load "$data/plot.gp"
GP
echo "wrote $png"
