#!/usr/bin/env python3
"""Step 1: export a PyTorch model of the flowgen contract to safetensors.

Writes, into --out-dir (default: here):
  model.safetensors   the module's state_dict: velocity.0.weight ... velocity.4.bias
  x0.npy              a batch of N(0, 1) starting points, float32 [B, D]

The model keeps its random initial weights; a trained one is saved the same
way (save_file(model.state_dict(), ...)).

    python3 export.py [--dim 16] [--hidden 64] [--batch 256] [--seed 0] [--out-dir .]
"""
import argparse
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

# The names flowgen reads, in the order of the state_dict.
KEYS = ["velocity.0.weight", "velocity.0.bias", "velocity.2.weight",
        "velocity.2.bias", "velocity.4.weight", "velocity.4.bias"]


class Flow(nn.Module):
    """The flowgen contract (DESIGN.md): a velocity MLP on [x, t], integrated
    with S Euler steps of dt = 1/S at the midpoint times t_k = (k + 0.5) / S."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.velocity = nn.Sequential(nn.Linear(dim + 1, hidden), nn.SiLU(),
                                      nn.Linear(hidden, hidden), nn.SiLU(),
                                      nn.Linear(hidden, dim))

    def forward(self, x, steps):
        dt = 1.0 / steps
        for k in range(steps):
            t = torch.full_like(x[:, :1], (k + 0.5) / steps)
            x = x + dt * self.velocity(torch.cat([x, t], dim=-1))
        return x


def main():
    p = argparse.ArgumentParser(description="Export a flowgen-shaped PyTorch model.")
    p.add_argument("--dim", type=int, default=16, help="D, state dimension")
    p.add_argument("--hidden", type=int, default=0, help="H, hidden width (default 4 * D)")
    p.add_argument("--batch", type=int, default=256, help="rows of x0.npy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=".")
    a = p.parse_args()
    hidden = a.hidden or 4 * a.dim

    torch.manual_seed(a.seed)
    model = Flow(a.dim, hidden)
    state = model.state_dict()
    if list(state) != KEYS:
        sys.exit(f"export: state_dict keys are {list(state)}, flowgen reads {KEYS}")

    os.makedirs(a.out_dir, exist_ok=True)
    weights_path = os.path.join(a.out_dir, "model.safetensors")
    x0_path = os.path.join(a.out_dir, "x0.npy")
    save_file(state, weights_path)
    x0 = torch.randn(a.batch, a.dim, generator=torch.Generator().manual_seed(a.seed + 1))
    np.save(x0_path, x0.numpy().astype(np.float32))

    for name, tensor in state.items():
        print(f"  {name:18s} {str(tuple(tensor.shape)):10s} {tensor.dtype}")
    print(f"export: wrote {weights_path} (D={a.dim}, H={hidden}) and {x0_path} "
          f"{tuple(x0.shape)}")


if __name__ == "__main__":
    main()
