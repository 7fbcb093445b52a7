#!/usr/bin/env python3
"""Writes the fixtures of tests/test_family.c: one small member of flowgen's
model family per file, each sampled by PyTorch (examples/pytorch/
flowgen_export.py) from a given x0 and conditioning, so that flowgen's fp64
reference and its kernels are checked against torch.

    pip install torch numpy safetensors
    python3 tests/data/family/make_fixtures.py   # rewrites tests/data/family/*.safetensors

Each file holds the model (velocity.0.weight ..., fp32, with flowgen's
__metadata__) and the case:
  test.x0            B x D  F32   the starting points
  test.cond          B x C  F32   the conditioning (C > 0)
  test.null          1 x C  F32   the null conditioning of guidance (absent: zeros)
  test.expected_f64  B x D  F64   torch, the model in float64
  test.expected_f32  B x D  F32   torch, the model in float32 (its own rounding)
and the metadata test.steps, test.solver and test.guidance (w; absent
without guidance).  seed.safetensors has no flowgen.* metadata (a plain
state_dict: silu, raw, x,t,c inferred); the others have all four keys.  The members cover every axis of the family: L = 2, 3,
5, 8; every activation; raw and sin:K with and without SCALE; every input
order (with C = 0 and C > 0); guidance with zeros and with a null vector,
w = 1 included; every solver.  Deterministic: each member is seeded.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "pytorch"))
import flowgen_export as fx  # noqa: E402

# name: D, H, C, L, act, time, input, solver, steps, batch, guidance w (None:
# none), null ("zeros" or "vector").  w values are exact in fp32.
MEMBERS = [
    ("seed",             4,  8, 0, 3, "silu",      "raw",      "x,t,c", "euler",    4, 3, None, None),
    ("l2_relu_tx",       3,  8, 0, 2, "relu",      "raw",      "t,x,c", "midpoint", 3, 4, None, None),
    ("l5_tanh_sin8",     5, 16, 0, 5, "tanh",      "sin:8",    "x,t,c", "heun",     4, 3, None, None),
    ("l8_gelu_tanh",     3,  6, 0, 8, "gelu_tanh", "raw",      "x,t,c", "rk4",      3, 3, None, None),
    ("c1_gelu",          4,  8, 1, 3, "gelu",      "raw",      "x,t,c", "euler",    5, 3, None, None),
    ("c2_silu_sin2_xct", 4,  8, 2, 2, "silu",      "sin:2:1000", "x,c,t", "heun",   3, 4, None, None),
    ("c3_gelu_sin4_cxt", 6, 12, 3, 3, "gelu",      "sin:4:30", "c,x,t", "rk4",      3, 3, None, None),
    ("c5_relu_sin6_ctx", 7, 16, 5, 5, "relu",      "sin:6:2.5", "c,t,x", "euler",   4, 4, None, None),
    ("c6_gelu_tanh_tcx", 8, 16, 6, 3, "gelu_tanh", "raw",      "t,c,x", "midpoint", 4, 3, None, None),
    ("c4_tanh_txc",      5, 10, 4, 3, "tanh",      "sin:8:100", "t,x,c", "rk4",     3, 3, None, None),
    ("cfg_zeros",        4, 12, 4, 3, "silu",      "raw",      "x,t,c", "euler",    4, 4, 2.5, "zeros"),
    ("cfg_null_sin",     5, 16, 6, 3, "gelu",      "sin:8",    "t,x,c", "rk4",      3, 3, 3.0, "vector"),
    ("cfg_w1_l2",        3,  8, 3, 2, "tanh",      "raw",      "c,t,x", "heun",     3, 3, 1.0, "vector"),
    ("cfg_l5_relu",      6, 16, 5, 5, "relu",      "sin:4:7",  "x,c,t", "midpoint", 3, 3, 0.75, "zeros"),
]

# PyTorch's default initialisation keeps the first layer's pre-activations
# small; larger weights take every activation through its curved part.
WEIGHT_GAIN = 2.0


def fixture(name, dim, hidden, cond, layers, act, time, order, solver, steps, batch, w, null):
    seed = sum(ord(ch) for ch in name)
    torch.manual_seed(seed)
    model = fx.FlowModel(dim, hidden, cond=cond, layers=layers, act=act, time=time, input=order)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(WEIGHT_GAIN)
    gen = torch.Generator().manual_seed(seed + 1)
    x0 = torch.randn(batch, dim, generator=gen)
    tensors = {"test.x0": x0}
    c = null_cond = None
    if cond:
        c = torch.randn(batch, cond, generator=gen)
        tensors["test.cond"] = c
        if null == "vector":
            null_cond = torch.randn(1, cond, generator=gen)
            tensors["test.null"] = null_cond
    args = dict(steps=steps, solver=solver, cond=c, guidance=w, null_cond=null_cond)
    tensors["test.expected_f64"] = fx.sample(model.double(), x0, **args)
    tensors["test.expected_f32"] = fx.sample(model.float(), x0, **args)
    meta = {"test.steps": steps, "test.solver": solver}
    if w is not None:
        meta["test.guidance"] = repr(w)
    path = os.path.join(HERE, name + ".safetensors")
    # The seed member is saved as a plain state_dict: no flowgen metadata,
    # the defaults inferred.
    fx.save(model, path, tensors=tensors, metadata=meta, flowgen_metadata=name != "seed")
    want = tensors["test.expected_f64"]
    err = (tensors["test.expected_f32"].double() - want).abs().max() / want.abs().max()
    print(f"{name + '.safetensors':32s} {os.path.getsize(path):6d} bytes  "
          f"torch fp32 vs fp64 {err:.1e}")


def main():
    torch.use_deterministic_algorithms(True)
    for member in MEMBERS:
        fixture(*member)


if __name__ == "__main__":
    main()
