#!/usr/bin/env python3
"""Writes the safetensors fixtures of tests/test_safetensors.c with the real
`safetensors` package, so the C parser is checked against files the reference
writer produced.

    pip install numpy safetensors ml_dtypes   # ml_dtypes: numpy's bfloat16
    python3 tests/data/make_weights.py        # rewrites tests/data/*.safetensors

Values are deterministic; the C test recomputes them with the same formula:
tensor t (0..5 in the order 0.weight, 0.bias, 2.weight, 2.bias, 4.weight,
4.bias), flat index i: k = (37 t + 13 i) mod 101 - 50, value = k / 7 rounded
to float32 (F32 files), or k / 16 (exact in F16 and BF16).  The F16 and BF16
files put special values in 4.bias instead (see SPECIALS_*).
"""
import os

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
SUFFIXES = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]

# Smallest subnormal, most negative finite, +inf.
SPECIALS_F16 = np.array([2.0**-24, -65504.0, np.inf], dtype=np.float16)
# Smallest subnormal, -inf, nan.
SPECIALS_BF16 = np.array([2.0**-133, -np.inf, np.nan], dtype=ml_dtypes.bfloat16)


def shapes(dim, hidden):
    return [(hidden, dim + 1), (hidden,), (hidden, hidden), (hidden,),
            (dim, hidden), (dim,)]


def values(t, shape, divisor):
    n = int(np.prod(shape))
    k = (37 * t + 13 * np.arange(n)) % 101 - 50
    return (k / divisor).reshape(shape)


def velocity(prefix, dim, hidden, dtype, divisor):
    return {prefix + s: values(t, shape, divisor).astype(dtype)
            for t, (s, shape) in enumerate(zip(SUFFIXES, shapes(dim, hidden)))}


def save(name, tensors, metadata=None):
    save_file(tensors, os.path.join(HERE, name), metadata=metadata)


def main():
    save("tiny_f32.safetensors", velocity("velocity.", 3, 5, np.float32, 7.0))

    f16 = velocity("velocity.", 3, 5, np.float16, 16.0)
    f16["velocity.4.bias"] = SPECIALS_F16
    save("tiny_f16.safetensors", f16)

    bf16 = velocity("velocity.", 3, 5, ml_dtypes.bfloat16, 16.0)
    bf16["velocity.4.bias"] = SPECIALS_BF16
    save("tiny_bf16.safetensors", bf16)

    # Two models under other prefixes, and a tensor that is not a weight.
    custom = velocity("model.net.", 2, 4, np.float32, 7.0)
    custom.update(velocity("ema.net.", 2, 4, np.float32, 16.0))
    custom["model.step"] = np.array([1000, 2000], dtype=np.int64)
    save("custom_prefix.safetensors", custom)

    save("with_metadata.safetensors", velocity("velocity.", 1, 2, np.float32, 7.0),
         metadata={"format": "pt", "flowgen.steps": "32"})


if __name__ == "__main__":
    main()
