#!/usr/bin/env python3
"""Instruments the cluster kernel of a `flowgen --host-launcher` file with
clock64 stamps at the end of each stage of its step loop, for
bench/launcher_bench.cu built with -DFLOWGEN_STAMPS.

Lane 0 of every warp reads clock64() at each stage's end and adds the
cycles since its previous stamp to a per-warp sum in shared memory (from
the second step on); the first cluster's blocks copy the sums to a device
array at the end.  A stamp issues when its instruction does, so a stage's
cycles also hold the wait for the one before; each stamp adds 90 to 100
cycles to the step on an H200 (its shared-memory read, add and write), so
compare stages, not totals, with the plain kernel.

usage: python3 bench/stamps.py IN.cu OUT.cu [--kernel SUFFIX]
  SUFFIX: the kernel's name after the shape's (default cluster4_r1)
"""
import argparse
import re
import sys

UNFOLDED = ["layer 1 (h1 stored)", "__syncwarp", "layer 2's partials stored",
            "first barrier", "sum of partials, SiLU, h2", "second barrier",
            "layer 3 (after shuffles)", "the sends", "the mbarrier wait",
            "the Euler step", "third barrier"]
FOLDED = ["SiLU of z (h1 stored)", "__syncwarp", "layer 2's partials stored",
          "first barrier", "sum of partials, SiLU, h2", "second barrier",
          "M h2 (the fold's product)", "the sends", "the mbarrier wait",
          "z updated"]


def fail(message):
    sys.exit("stamps.py: " + message)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("--kernel", default="cluster4_r1")
    args = parser.parse_args()
    text = open(args.source).read()
    match = re.search(r'extern "C" __global__ void __launch_bounds__\((\d+), 1\)\n(\w+)_' +
                      re.escape(args.kernel) + r"\(", text)
    if not match:
        fail("no kernel %s in %s (not a --host-launcher file of the cluster kernel?)"
             % (args.kernel, args.source))
    threads, head = int(match.group(1)), match.start()
    end = text.index("\n}\n", head) + 3
    blocks = re.search(r"namespace %s \{.*?constexpr int kClusterBlocks = (\d+);"
                       % re.escape(args.kernel), text, re.S)
    if not blocks:
        fail("no kClusterBlocks for %s" % args.kernel)
    ranks, warps = int(blocks.group(1)), threads // 32
    body = text[head:end].split("\n")
    fold = any("Layer 1 from z" in line for line in body)
    names = FOLDED if fold else UNFOLDED
    # stage index -> (insert before the line, or after it)
    out, in_loop, barriers, placed = [], False, 0, set()
    for line in body:
        s = line.strip()
        before, after = [], []
        if s.startswith("for (int k = 0; k < kSteps; ++k)"):
            in_loop = True
        elif in_loop:
            if s.startswith("__syncwarp();  // layer 2 reads"):
                before, after = [0], [1]
            elif s == "__syncthreads();":
                barriers += 1
                before, after = {1: ([2], [3]), 2: ([4], [5]), 3: ([9], [10])}.get(barriers, ([], []))
            elif s.startswith("reduce_lanes<") or s.startswith("partial_dot<kOwn, 1, kOwn>"):
                after = [6]
            elif s.startswith("barrier_wait(barrier"):
                before, after = [7], [8]
            elif line == "  }":
                if fold:
                    before = [9]
                in_loop = False
        indent = re.match(r"\s*", line).group(0)
        out += [indent + "FLOWGEN_STAMP(%d);" % n for n in before] + [line]
        out += [indent + "FLOWGEN_STAMP(%d);" % n for n in after]
        placed.update(before + after)
        if s == "const int tid = threadIdx.x;":
            out += ["  __shared__ long long stamp_sum[%d][%d], stamp_last[%d];" % (warps, len(names), warps),
                    "  for (int i = tid; i < %d; i += kThreads) stamp_sum[i / %d][i %% %d] = 0;"
                    % (warps * len(names), len(names), len(names))]
    if placed != set(range(len(names))):
        fail("found stages %s of %d in %s's step loop: not the cluster kernel of one"
             " Euler step a loop, or its template changed (update stamps.py)"
             % (sorted(placed), len(names), args.kernel))
    close = len(out) - 1 - out[::-1].index("}")
    out.insert(close, "  if (cluster_index() == 0 && tid % 32 == 0)\n"
                      "    for (int s = 0; s < kStampStages; ++s) g_stamps[cluster_rank()][tid / 32][s] = stamp_sum[tid / 32][s];")
    prelude = [
        "// ---- clock64 stamps (bench/stamps.py) ----",
        "constexpr int kStampRanks = %d, kStampWarps = %d, kStampStages = %d;" % (ranks, warps, len(names)),
        "constexpr const char* kStampNames[kStampStages] = {%s};" % ", ".join('"%s"' % n for n in names),
        "__device__ long long g_stamps[kStampRanks][kStampWarps][kStampStages];",
        "#define FLOWGEN_STAMP(n) do { if (threadIdx.x % 32 == 0) { \\",
        "  const long long c_ = clock64(), w_ = threadIdx.x / 32; \\",
        "  if (k > 0) stamp_sum[w_][n] += c_ - stamp_last[w_]; \\",
        "  stamp_last[w_] = c_; } } while (0)",
        "",
    ]
    with open(args.output, "w") as f:
        f.write(text[:head] + "\n".join(prelude) + "\n".join(out) + text[end:])


if __name__ == "__main__":
    main()
