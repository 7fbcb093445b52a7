#!/usr/bin/env python3
"""Sample N points of a flowgen model over every GPU of a host (or of
several hosts) with torchrun: one process a GPU, each rank its contiguous
share, the result independent of the number of ranks.

    torchrun --nproc-per-node 8 sample.py --weights model.safetensors \\
        --samples 1000000 --out samples.npy
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29500 sample.py ... --per-rank out/
    python3 sample.py --device cpu ...            # one process, no torchrun

The N samples are cut into chunks of --chunk rows (global: chunk k holds
samples k*chunk ... ); the ranks take contiguous runs of whole chunks.
Chunk k's starting points come from its own generator (numpy's Philox,
keyed by --seed and k), and a conditional model's conditioning is a
function of the sample's index (the one-hot of index mod C, or --class),
so sample i is the same whatever the number of ranks; and each chunk is
one launch of the same size, so on the GPU too its bits do not depend on
the ranks (a different batch size may choose another kernel variant).

--out: the ranks' samples gathered to rank 0 (torch.distributed, gloo:
host arrays), written there as one float32 N x D .npy.  --per-rank DIR:
each rank writes DIR/rank<R>.npy (its rows) and DIR/rank<R>.json (the
range), nothing gathered (for hosts without a shared folder, or N larger
than one host's memory).  --device cuda (default) uses cuda:LOCAL_RANK (the
GPUs of the host in turn: 2 ranks on 1 GPU work); cpu, the fp64 reference.
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def starting_points(seed, chunk, rows, dim):
    """Chunk `chunk`'s rows x D starting points: N(0, 1) from Philox keyed
    by (seed, chunk), whoever draws them."""
    gen = np.random.Generator(np.random.Philox(key=[seed, chunk]))
    return gen.standard_normal((rows, dim), dtype=np.float32)


def conditioning(begin, rows, cond, klass):
    """One-hot rows for samples begin ... begin+rows-1: class `klass`, or
    the sample's index mod C."""
    c = np.zeros((rows, cond), np.float32)
    index = np.full(rows, klass) if klass is not None else (np.arange(begin, begin + rows) % cond)
    c[np.arange(rows), index] = 1.0
    return c


def shares(samples, chunk, world):
    """Per rank: its (first chunk, end chunk), contiguous, whole chunks."""
    chunks = (samples + chunk - 1) // chunk
    return [(chunks * r // world, chunks * (r + 1) // world) for r in range(world)]


def main():
    p = argparse.ArgumentParser(description="Sample a flowgen model over many GPUs.")
    p.add_argument("--weights", help="safetensors file (default: the digits demo model)")
    p.add_argument("--samples", type=int, default=4096, help="N, the samples in all")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--solver", default="euler")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk", type=int, default=65536, help="rows a launch (global chunks)")
    p.add_argument("--guidance", type=float, help="classifier-free guidance w (conditional models)")
    p.add_argument("--class", dest="klass", type=int, help="every sample of this class")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--out", help="the N x D samples, gathered to rank 0")
    p.add_argument("--per-rank", help="a folder: each rank writes its rows there")
    a = p.parse_args()
    if not a.out and not a.per_rank:
        p.error("give --out or --per-rank")
    if a.samples < 0 or a.chunk < 1:
        p.error("--samples must be >= 0 and --chunk >= 1")

    import torch
    import torch.distributed as dist

    import flowgen

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if world > 1:
        dist.init_process_group("gloo")
    weights = a.weights or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "digits", "digits_d64_h256.safetensors")
    device = "cpu" if a.device == "cpu" else f"cuda:{local % torch.cuda.device_count()}"
    try:
        s = flowgen.Sampler.from_safetensors(weights, steps=a.steps, solver=a.solver,
                                             precision=a.precision, device=device,
                                             guidance=a.guidance is not None)
    except (flowgen.Error, OSError) as e:
        sys.exit(f"sample: rank {rank}: {e}")
    first, end = shares(a.samples, a.chunk, world)[rank]
    begin, stop = min(first * a.chunk, a.samples), min(end * a.chunk, a.samples)
    mine = np.empty((stop - begin, s.dim), np.float32)
    t0 = time.perf_counter()
    for k in range(first, end):
        lo, hi = k * a.chunk, min((k + 1) * a.chunk, a.samples)
        x0 = starting_points(a.seed, k, hi - lo, s.dim)
        c = conditioning(lo, hi - lo, s.cond, a.klass) if s.cond else None
        if device == "cpu":
            y = s(x0, cond=c, guidance=a.guidance)
        else:
            dev = lambda v: None if v is None else torch.from_numpy(v).to(device)  # noqa: E731
            y = s(dev(x0), cond=dev(c), guidance=a.guidance).cpu().numpy()
        mine[lo - begin:hi - begin] = y
    seconds = time.perf_counter() - t0
    print(f"sample: rank {rank}/{world} on {device}: samples {begin} to {stop} "
          f"({end - first} chunks) in {seconds:.3f} s", flush=True)

    if a.per_rank:
        os.makedirs(a.per_rank, exist_ok=True)
        np.save(os.path.join(a.per_rank, f"rank{rank}.npy"), mine)
        with open(os.path.join(a.per_rank, f"rank{rank}.json"), "w") as f:
            json.dump({"rank": rank, "world": world, "begin": begin, "end": stop}, f)
    if a.out:
        # gather wants one size: every share padded to the largest.
        rows = max(min(e * a.chunk, a.samples) - min(f * a.chunk, a.samples)
                   for f, e in shares(a.samples, a.chunk, world))
        padded = torch.zeros(rows, s.dim)
        padded[:len(mine)] = torch.from_numpy(mine)
        parts = [torch.empty_like(padded) for _ in range(world)] if rank == 0 else None
        if world > 1:
            dist.gather(padded, parts, dst=0)
        else:
            parts = [padded]
        if rank == 0:
            out = np.concatenate([
                parts[r][:min(e * a.chunk, a.samples) - min(f * a.chunk, a.samples)].numpy()
                for r, (f, e) in enumerate(shares(a.samples, a.chunk, world))])
            np.save(a.out, out)
            print(f"sample: wrote {a.out} ({out.shape[0]} x {out.shape[1]})", flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
