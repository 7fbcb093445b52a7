"""Shared helpers of the package's tests: the repository's files, the
bundled CLI, a numpy reader of safetensors (no safetensors package needed),
and the markers that skip without torch or without a GPU."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DIGITS = os.path.join(ROOT, "examples", "digits", "digits_d64_h256.safetensors")
DIGITS_COND = os.path.join(ROOT, "examples", "digits", "digits_cond_d64_h256.safetensors")
FAMILY = os.path.join(ROOT, "tests", "data", "family")

try:
    import torch
except Exception:  # absent, or a broken install: the torch tests skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
HAS_GPU = torch is not None and torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (or no torch)")


def cli(*args, check=True):
    """`python -m flowgen args...` (the bundled binary)."""
    done = subprocess.run([sys.executable, "-m", "flowgen", *map(str, args)],
                          capture_output=True)
    if check and done.returncode:
        raise AssertionError(f"flowgen {' '.join(map(str, args))}: exit {done.returncode}: "
                             f"{done.stderr.decode()}")
    return done


def read_safetensors(path):
    """(tensors as numpy arrays, __metadata__) of an F32/F64 safetensors file."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    meta = header.pop("__metadata__", {})
    types = {"F32": np.float32, "F64": np.float64}
    out = {}
    for name, h in header.items():
        if h["dtype"] in types:
            begin, end = h["data_offsets"]
            out[name] = np.frombuffer(data[begin:end], dtype=types[h["dtype"]]).reshape(h["shape"])
    return out, meta


def family_cases():
    return sorted(f for f in os.listdir(FAMILY) if f.endswith(".safetensors"))


def family_case(name):
    """A fixture of tests/data/family: path, its test tensors, steps,
    solver, guidance (None: none)."""
    path = os.path.join(FAMILY, name)
    tensors, meta = read_safetensors(path)
    w = meta.get("test.guidance")
    return dict(path=path, x0=tensors["test.x0"], cond=tensors.get("test.cond"),
                null=tensors.get("test.null"), expected=tensors["test.expected_f64"],
                steps=int(meta["test.steps"]), solver=meta["test.solver"],
                guidance=None if w is None else float(w))


def rel(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))
