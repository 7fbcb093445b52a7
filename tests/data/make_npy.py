#!/usr/bin/env python3
"""Writes the .npy fixtures of tests/test_npy.c with numpy itself.

    pip install numpy
    python3 tests/data/make_npy.py            # rewrites tests/data/*.npy

Values: element i (row-major) = ((13 i) mod 101 - 50) / 7, rounded to the
array's dtype; the C test recomputes them.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def values(shape, dtype):
    n = int(np.prod(shape))
    return (((13 * np.arange(n)) % 101 - 50) / 7.0).astype(dtype).reshape(shape)


def write(name, array, version=None):
    with open(os.path.join(HERE, name), "wb") as f:
        np.lib.format.write_array(f, array, version=version, allow_pickle=False)


def main():
    write("tiny_f4.npy", values((4, 3), np.float32))
    write("tiny_f8.npy", values((4, 3), np.float64))
    write("tiny_v2.npy", values((2, 5), np.float32), version=(2, 0))
    write("tiny_v3.npy", values((2, 5), np.float32), version=(3, 0))
    write("vector_f4.npy", values((7,), np.float32))
    write("fortran_f4.npy", np.asfortranarray(values((3, 2), np.float32)))
    write("tiny_i4.npy", np.arange(6, dtype=np.int32).reshape(2, 3))


if __name__ == "__main__":
    main()
