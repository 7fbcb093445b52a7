#!/usr/bin/env python3
"""Steps 2 and 3: sample with flowgen in-process, then check against PyTorch
and float64.

Samples the model with the flowgen package (flowgen.Sampler, on the GPU, or
with --device cpu its float64 reference: `pip install .` in the
repository), integrates the same ODE in PyTorch (fp32, on the GPU when
there is one; flowgen.torch_ref.sample) and in float64 numpy, and prints
the relative L2 errors.  The model's activation, time embedding and input
order come from the file's flowgen.* metadata (absent: silu, raw, x,t,c,
the seed model).  Exits 1 if flowgen differs from float64 by more than
--tolerance (1e-5), with flowgen's exit code for its error if flowgen
fails (5: no GPU).  Without torch installed the PyTorch comparison is
skipped (numpy is enough for --device cpu and the float64 check).

    python3 compare.py [--weights model.safetensors] [--x0 x0.npy] [--steps 32]
                       [--solver euler] [--cond cond.npy] [--guidance W]
                       [--device gpu|cpu|auto] [--tolerance 1e-5]
"""
import argparse
import json
import math
import struct
import sys

import numpy as np
from safetensors.numpy import load_file


ERF = np.vectorize(math.erf)
ACTIVATIONS = {
    "silu": lambda v: v / (1.0 + np.exp(-v)),
    "gelu": lambda v: 0.5 * v * (1.0 + ERF(v / math.sqrt(2.0))),
    "gelu_tanh": lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                                    * (v + 0.044715 * v ** 3))),
    "relu": lambda v: np.maximum(v, 0.0),
    "tanh": np.tanh,
}
# (c, a, b) of flowgen's solvers: see flowgen.torch_ref.SOLVERS.
SOLVERS = {
    "euler": ((0.5,), (0.0,), (1.0,)),
    "midpoint": ((0.0, 0.5), (0.0, 0.5), (0.0, 1.0)),
    "heun": ((0.0, 1.0), (0.0, 1.0), (0.5, 0.5)),
    "rk4": ((0.0, 0.5, 0.5, 1.0), (0.0, 0.5, 0.5, 1.0), (1 / 6, 1 / 3, 1 / 3, 1 / 6)),
}


def metadata(path):
    """The file's __metadata__ (a dict, empty if none)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(size)).get("__metadata__", {})


def family(meta):
    """act, time ("raw" or (K, SCALE)) and input order from the metadata."""
    act = meta.get("flowgen.act", "silu")
    parts = meta.get("flowgen.time", "raw").split(":")
    time = "raw" if parts == ["raw"] else (int(parts[1]), float(parts[2]) if len(parts) == 3 else 1000.0)
    return act, time, meta.get("flowgen.input", "x,t,c").split(",")


def sample_f64(weights, meta, x0, steps, solver, cond, guidance):
    """The family in float64 numpy: the oracle (guidance: null = zeros)."""
    act, time, order = family(meta)
    layers = sum(1 for k in weights if k.startswith("velocity.") and k.endswith(".weight"))
    w = [weights[f"velocity.{2 * i}.weight"].astype(np.float64) for i in range(layers)]
    b = [weights[f"velocity.{2 * i}.bias"].astype(np.float64) for i in range(layers)]
    rows = x0.shape[0]

    def tau(t):
        if time == "raw":
            return np.full((rows, 1), t)
        half, scale = time[0] // 2, time[1]
        angles = scale * t * 10000.0 ** (-np.arange(half) / half)
        return np.tile(np.concatenate([np.sin(angles), np.cos(angles)]), (rows, 1))

    def mlp(x, t, c):
        parts = {"x": x, "t": tau(t), "c": c}
        h = np.concatenate([parts[k] for k in order], axis=1)
        for i in range(layers):
            h = h @ w[i].T + b[i]
            if i < layers - 1:
                h = ACTIVATIONS[act](h)
        return h

    c = np.zeros((rows, 0)) if cond is None else np.broadcast_to(cond.astype(np.float64), (rows, cond.shape[1]))

    def velocity(x, t):
        v = mlp(x, t, c)
        if guidance is not None:
            v_u = mlp(x, t, np.zeros_like(c))
            v = v_u + guidance * (v - v_u)
        return v

    cs, as_, bs = SOLVERS[solver]
    x, dt = x0.astype(np.float64), 1.0 / steps
    for k in range(steps):
        total, v = 0.0, None
        for ci, ai, bi in zip(cs, as_, bs):
            v = velocity(x if v is None else x + dt * ai * v, (k + ci) / steps)
            total = total + bi * v
        x = x + dt * total
    return x


def sample_torch_f32(weights_path, meta, x0, steps, solver, cond, guidance):
    """flowgen.torch_ref.sample with the saved weights, fp32; None without torch."""
    try:
        import torch
        from safetensors.torch import load_file as load_torch
    except ImportError:
        return None, "torch is not installed"
    from flowgen import torch_ref as fx

    # Plain fp32 products: TF32 would round the inputs to 10 mantissa bits.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    state = {k: v for k, v in load_torch(weights_path).items() if k.startswith("velocity.")}
    layers = len(state) // 2
    hidden, inputs = state["velocity.0.weight"].shape
    dim = state[f"velocity.{2 * layers - 2}.weight"].shape[0]
    time = fx.TimeSpec(meta.get("flowgen.time", "raw"))
    model = fx.FlowModel(dim, hidden, cond=inputs - dim - time.width, layers=layers,
                         act=meta.get("flowgen.act", "silu"), time=time,
                         input=meta.get("flowgen.input", "x,t,c"))
    model.load_state_dict(state)
    model.to(device)
    c = None if cond is None else torch.from_numpy(cond).to(device)
    x = fx.sample(model, torch.from_numpy(x0).to(device), steps, solver, cond=c, guidance=guidance)
    return x.cpu().numpy(), device


def relative_l2(x, ref):
    """||x - ref|| / ||ref|| in float64; inf if x holds a NaN or inf."""
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        return float("inf")
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


def run_flowgen(a, x0, cond):
    """flowgen.Sampler in this process: the GPU kernel, or the fp64
    reference (--device cpu; auto: the GPU where torch sees one)."""
    try:
        import flowgen
    except ImportError as e:
        sys.exit(f"compare: the flowgen package is not installed ({e}): pip install . in the "
                 "repository")
    device = a.device
    if device == "auto":
        try:
            import torch
            device = "gpu" if torch.cuda.is_available() else "cpu"
        except ImportError:
            device = "cpu"
    try:
        s = flowgen.Sampler.from_safetensors(a.weights, steps=a.steps, solver=a.solver,
                                             device="cpu" if device == "cpu" else "cuda",
                                             guidance=a.guidance is not None)
        print(f"compare: {s}", flush=True)
        if device == "cpu":
            x = s(x0, cond=cond, guidance=a.guidance)
        else:
            import torch
            dev = lambda v: None if v is None else torch.from_numpy(v).cuda()  # noqa: E731
            x = s(dev(x0), cond=dev(cond), guidance=a.guidance).cpu().numpy()
    except flowgen.Error as e:
        print(f"compare: flowgen failed: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    np.save(a.out, x)
    return x


def main():
    p = argparse.ArgumentParser(description="Compare flowgen with PyTorch and float64.")
    p.add_argument("--weights", default="model.safetensors")
    p.add_argument("--x0", default="x0.npy")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--solver", choices=sorted(SOLVERS), default="euler")
    p.add_argument("--cond", help="B x C float32 conditioning (a conditional model; "
                                  "default cond.npy when the model has C > 0)")
    p.add_argument("--guidance", type=float, help="classifier-free guidance weight w")
    p.add_argument("--device", choices=["gpu", "cpu", "auto"], default="gpu",
                   help="gpu (default) runs the generated kernel; cpu its float64 "
                        "reference, to try this without a GPU; auto: gpu where there is one")
    p.add_argument("--out", default="out.npy", help="flowgen's output file")
    p.add_argument("--tolerance", type=float, default=1e-5,
                   help="largest accepted flowgen vs float64 error")
    a = p.parse_args()

    weights = load_file(a.weights)
    meta = metadata(a.weights)
    x0 = np.load(a.x0)
    if x0.dtype != np.float32 or x0.ndim != 2:
        sys.exit(f"compare: {a.x0} must be float32 [B, D], not {x0.dtype} {x0.shape}")
    if not a.cond and int(meta.get("flowgen.cond", "0")) > 0:
        a.cond = "cond.npy"
    cond = np.load(a.cond).astype(np.float32) if a.cond else None
    if a.guidance is not None and cond is None:
        sys.exit("compare: --guidance needs a conditional model and --cond")

    x_flowgen = run_flowgen(a, x0, cond)
    if x_flowgen.shape != x0.shape:
        sys.exit(f"compare: {a.out} has shape {x_flowgen.shape}, expected {x0.shape}")
    args = (x0, a.steps, a.solver, cond, a.guidance)
    x_f64 = sample_f64(weights, meta, *args)
    x_torch, where = sample_torch_f32(a.weights, meta, *args)

    err = relative_l2(x_flowgen, x_f64)
    print(f"batch {x0.shape[0]}, D={x0.shape[1]}, {a.steps} {a.solver} steps: relative L2 error")
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
