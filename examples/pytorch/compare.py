#!/usr/bin/env python3
"""Steps 2 and 3: sample with flowgen, then check against PyTorch and float64.

Runs
    flowgen sample --weights WEIGHTS --steps S --x0 X0 -o OUT --device gpu
($FLOWGEN, else ../../build/flowgen), integrates the same ODE in PyTorch
(fp32, on the GPU when there is one) and in float64 numpy, and prints the
relative L2 errors.  Exits 1 if flowgen differs from float64 by more than
--tolerance (1e-5), with flowgen's own exit code if flowgen fails.  Without
torch installed the PyTorch comparison is skipped (numpy is enough for the
float64 one).

    python3 compare.py [--weights model.safetensors] [--x0 x0.npy] [--steps 32]
                       [--device gpu|cpu|auto] [--tolerance 1e-5]
"""
import argparse
import os
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ["velocity.0.weight", "velocity.0.bias", "velocity.2.weight",
        "velocity.2.bias", "velocity.4.weight", "velocity.4.bias"]


def sample_f64(weights, x0, steps):
    """The model of export.Flow in float64 numpy: the oracle."""
    w1, b1, w2, b2, w3, b3 = (weights[k].astype(np.float64) for k in KEYS)
    silu = lambda v: v / (1.0 + np.exp(-v))
    x = x0.astype(np.float64)
    for k in range(steps):
        t = np.full((x.shape[0], 1), (k + 0.5) / steps)
        h = silu(np.concatenate([x, t], axis=1) @ w1.T + b1)
        h = silu(h @ w2.T + b2)
        x = x + (1.0 / steps) * (h @ w3.T + b3)
    return x


def sample_torch_f32(weights_path, x0, steps):
    """export.Flow with the saved weights, fp32; None without torch."""
    try:
        import torch
        from safetensors.torch import load_file as load_torch
    except ImportError:
        return None, "torch is not installed"
    sys.path.insert(0, HERE)
    from export import Flow

    # Plain fp32 products: TF32 would round the inputs to 10 mantissa bits.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    state = load_torch(weights_path)
    dim, hidden = state["velocity.4.weight"].shape
    model = Flow(dim, hidden).to(device)
    model.load_state_dict(state)
    with torch.no_grad():
        x = model(torch.from_numpy(x0).to(device), steps)
    return x.cpu().numpy(), device


def relative_l2(x, ref):
    """||x - ref|| / ||ref|| in float64; inf if x holds a NaN or inf."""
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        return float("inf")
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


def run_flowgen(a):
    flowgen = os.environ.get("FLOWGEN") or os.path.join(HERE, "..", "..", "build", "flowgen")
    cmd = [flowgen, "sample", "--weights", a.weights, "--steps", str(a.steps),
           "--x0", a.x0, "-o", a.out, "--device", a.device]
    print("$ " + " ".join(cmd), flush=True)
    try:
        done = subprocess.run(cmd)
    except OSError as e:
        sys.exit(f"compare: cannot run {flowgen}: {e.strerror} (build it, or set $FLOWGEN)")
    if done.returncode != 0:
        print(f"compare: flowgen failed (exit code {done.returncode})", file=sys.stderr)
        sys.exit(done.returncode)
    return np.load(a.out)


def main():
    p = argparse.ArgumentParser(description="Compare flowgen with PyTorch and float64.")
    p.add_argument("--weights", default="model.safetensors")
    p.add_argument("--x0", default="x0.npy")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--device", choices=["gpu", "cpu", "auto"], default="gpu",
                   help="passed to flowgen sample: gpu (default) runs the generated "
                        "kernel; cpu its float64 reference, to try this without a GPU")
    p.add_argument("--out", default="out.npy", help="flowgen's output file")
    p.add_argument("--tolerance", type=float, default=1e-5,
                   help="largest accepted flowgen vs float64 error")
    a = p.parse_args()

    weights = load_file(a.weights)
    x0 = np.load(a.x0)
    if x0.dtype != np.float32 or x0.ndim != 2:
        sys.exit(f"compare: {a.x0} must be float32 [B, D], not {x0.dtype} {x0.shape}")

    x_flowgen = run_flowgen(a)
    if x_flowgen.shape != x0.shape:
        sys.exit(f"compare: {a.out} has shape {x_flowgen.shape}, expected {x0.shape}")
    x_f64 = sample_f64(weights, x0, a.steps)
    x_torch, where = sample_torch_f32(a.weights, x0, a.steps)

    err = relative_l2(x_flowgen, x_f64)
    print(f"batch {x0.shape[0]}, D={x0.shape[1]}, {a.steps} steps: relative L2 error")
    print(f"  flowgen    vs float64     {err:.3e}")
    if x_torch is None:
        print(f"  (PyTorch comparison skipped: {where})")
    else:
        print(f"  flowgen    vs torch fp32  {relative_l2(x_flowgen, x_torch):.3e}")
        print(f"  torch fp32 vs float64     {relative_l2(x_torch, x_f64):.3e}  "
              f"(PyTorch's own rounding, on {where})")
    if not err <= a.tolerance:
        print(f"compare: flowgen differs from float64 by {err:.3e} > {a.tolerance:.0e}",
              file=sys.stderr)
        sys.exit(1)
    print("compare: ok")


if __name__ == "__main__":
    main()
