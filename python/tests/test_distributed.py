"""examples/distributed/sample.py under torchrun (skipped without torch):
1 and 2 ranks give the same samples, the CPU reference's of the same
starting points (gloo, device cpu); on a GPU, 2 ranks on it."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

import flowgen
from conftest import DIGITS_COND, ROOT, needs_gpu, needs_torch

pytestmark = needs_torch
SCRIPT = os.path.join(ROOT, "examples", "distributed", "sample.py")


def example():
    spec = importlib.util.spec_from_file_location("distributed_sample", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(ranks, *args):
    if ranks:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={ranks}", SCRIPT]
    else:
        cmd = [sys.executable, SCRIPT]
    done = subprocess.run(cmd + [str(v) for v in args], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_shares_are_contiguous_whole_chunks():
    m = example()
    assert m.shares(300, 64, 2) == [(0, 2), (2, 5)]
    assert m.shares(10, 64, 3) == [(0, 0), (0, 0), (0, 1)]
    assert np.array_equal(m.starting_points(7, 3, 5, 4), m.starting_points(7, 3, 5, 4))
    assert not np.array_equal(m.starting_points(7, 3, 5, 4), m.starting_points(7, 4, 5, 4))


def test_one_and_two_ranks_agree_on_the_cpu(tmp_path):
    args = ["--device", "cpu", "--samples", 150, "--chunk", 32, "--steps", 8, "--seed", 3,
            "--weights", DIGITS_COND, "--guidance", 2.0]
    run(0, *args, "--out", tmp_path / "one.npy")
    run(2, *args, "--out", tmp_path / "two.npy", "--per-rank", tmp_path / "ranks")
    one, two = np.load(tmp_path / "one.npy"), np.load(tmp_path / "two.npy")
    assert one.shape == (150, 64) and np.array_equal(one, two)
    # Each rank's own file holds its contiguous rows.
    for r in range(2):
        with open(tmp_path / "ranks" / f"rank{r}.json") as f:
            meta = json.load(f)
        assert np.array_equal(np.load(tmp_path / "ranks" / f"rank{r}.npy"),
                              one[meta["begin"]:meta["end"]])
    # Sample i: the reference from chunk i // 32's starting points.
    m = example()
    s = flowgen.Sampler.from_safetensors(DIGITS_COND, steps=8, device="cpu", guidance=True)
    x0 = m.starting_points(3, 2, 32, 64)
    assert np.array_equal(one[64:96], s(x0, cond=m.conditioning(64, 32, 10, None), guidance=2.0))


@needs_gpu
def test_two_ranks_on_the_gpu(tmp_path):
    args = ["--device", "cuda", "--samples", 5000, "--chunk", 1024, "--seed", 1]
    run(1, *args, "--out", tmp_path / "one.npy")
    run(2, *args, "--out", tmp_path / "two.npy")
    one, two = np.load(tmp_path / "one.npy"), np.load(tmp_path / "two.npy")
    assert one.shape == (5000, 64) and np.array_equal(one, two)
    run(0, "--device", "cpu", "--samples", 5000, "--chunk", 1024, "--seed", 1,
        "--out", tmp_path / "ref.npy")
    ref = np.load(tmp_path / "ref.npy")
    assert np.linalg.norm(one - ref) / np.linalg.norm(ref) < 1e-5
