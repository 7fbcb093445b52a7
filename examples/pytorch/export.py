#!/usr/bin/env python3
"""Step 1: export a PyTorch model of the flowgen family to safetensors.

Writes, into --out-dir (default: here):
  model.safetensors   the module's state_dict (velocity.0.weight ...) and the
                      __metadata__ flowgen reads: flowgen.act, flowgen.time,
                      flowgen.input, flowgen.cond
  x0.npy              a batch of N(0, 1) starting points, float32 [B, D]
  cond.npy            with --cond C > 0: a conditioning batch, float32 [B, C]

The model keeps its random initial weights; a trained one is saved the same
way (flowgen.export(model, path)).  The flags are flowgen's own (see
flowgen.torch_ref for the family; `pip install .` in the repository):

    python3 export.py [--dim 16] [--hidden 64] [--cond 0] [--layers 3]
                      [--act silu] [--time raw] [--input x,t,c]
                      [--batch 256] [--seed 0] [--out-dir .]
"""
import argparse
import os
import sys

import numpy as np
import torch

import flowgen
from flowgen import torch_ref as fx


def main():
    p = argparse.ArgumentParser(description="Export a model of the flowgen family.")
    p.add_argument("--dim", type=int, default=16, help="D, state dimension")
    p.add_argument("--hidden", type=int, default=0, help="H, hidden width (default 4 * D)")
    p.add_argument("--cond", type=int, default=0, help="C, conditioning width")
    p.add_argument("--layers", type=int, default=3, help="L, Linear layers (2 to 8)")
    p.add_argument("--act", default="silu", choices=sorted(fx.ACTIVATIONS))
    p.add_argument("--time", default="raw", help="raw, sin:K or sin:K:SCALE")
    p.add_argument("--input", default="x,t,c", help="the order of the concatenation")
    p.add_argument("--batch", type=int, default=256, help="rows of x0.npy (and cond.npy)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=".")
    a = p.parse_args()
    hidden = a.hidden or 4 * a.dim

    torch.manual_seed(a.seed)
    try:
        model = fx.FlowModel(a.dim, hidden, cond=a.cond, layers=a.layers, act=a.act,
                             time=a.time, input=a.input)
    except ValueError as e:
        sys.exit(f"export: {e}")

    os.makedirs(a.out_dir, exist_ok=True)
    weights_path = os.path.join(a.out_dir, "model.safetensors")
    flowgen.export(model, weights_path)
    gen = torch.Generator().manual_seed(a.seed + 1)
    x0 = torch.randn(a.batch, a.dim, generator=gen)
    np.save(os.path.join(a.out_dir, "x0.npy"), x0.numpy().astype(np.float32))
    written = ["x0.npy"]
    if a.cond:
        cond = torch.randn(a.batch, a.cond, generator=gen)
        np.save(os.path.join(a.out_dir, "cond.npy"), cond.numpy().astype(np.float32))
        written.append("cond.npy")

    for name, tensor in model.state_dict().items():
        print(f"  {name:18s} {str(tuple(tensor.shape)):10s} {tensor.dtype}")
    meta = " ".join(f"{k}={v}" for k, v in model.metadata().items())
    print(f"export: wrote {weights_path} (D={a.dim}, H={hidden}, {meta}) and "
          f"{', '.join(written)} ({a.batch} rows)")


if __name__ == "__main__":
    main()
