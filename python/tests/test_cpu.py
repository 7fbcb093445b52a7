"""Sampler on the CPU (the fp64 reference, numpy in and out), without torch:
against `flowgen sample --device cpu` bit for bit, against PyTorch's fp64
samples of every member of the family (tests/data/family), and every bad
argument."""
import re

import numpy as np
import pytest

import flowgen
from conftest import DIGITS, DIGITS_COND, cli, family_case, family_cases, rel


def digits(**kw):
    return flowgen.Sampler.from_safetensors(DIGITS, device="cpu", **kw)


def x0_of(rows, dim=64, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def cli_sample(tmp_path, weights, x0, steps, solver, cond=None, guidance=None, null=None):
    np.save(tmp_path / "x0.npy", x0)
    args = ["sample", "--device", "cpu", "--weights", weights, "--x0", tmp_path / "x0.npy",
            "--steps", steps, "--solver", solver, "-o", tmp_path / "out.npy"]
    if cond is not None:
        np.save(tmp_path / "cond.npy", cond)
        args += ["--cond", tmp_path / "cond.npy"]
    if guidance is not None:
        args += ["--guidance", repr(guidance)]
    if null is not None:
        np.save(tmp_path / "null.npy", null)
        args += ["--null-cond", tmp_path / "null.npy"]
    cli(*args)
    return np.load(tmp_path / "out.npy")


def test_digits_equals_the_cli(tmp_path):
    s = digits(steps=16, solver="heun")
    x0 = x0_of(12)
    y = s(x0)
    assert y.dtype == np.float32 and y.shape == (12, 64)
    assert np.array_equal(y, cli_sample(tmp_path, DIGITS, x0, 16, "heun"))
    assert np.array_equal(x0, x0_of(12))  # x0 untouched


def test_guided_digits_equal_the_cli(tmp_path):
    s = flowgen.Sampler.from_safetensors(DIGITS_COND, device="cpu", guidance=True)
    x0 = x0_of(10)
    cond = np.eye(10, dtype=np.float32)
    y = s(x0, cond=cond, guidance=2.5)
    assert np.array_equal(y, cli_sample(tmp_path, DIGITS_COND, x0, 32, "euler", cond, 2.5))


@pytest.mark.parametrize("name", family_cases())
def test_family_member(name, tmp_path):
    f = family_case(name)
    s = flowgen.Sampler.from_safetensors(f["path"], steps=f["steps"], solver=f["solver"],
                                         device="cpu", guidance=f["guidance"] is not None)
    kw = dict(cond=f["cond"], guidance=f["guidance"], null_cond=f["null"])
    y64 = s(f["x0"], out=np.empty(f["x0"].shape), **kw)
    assert rel(y64, f["expected"]) < 1e-12
    y = s(f["x0"], **kw)
    assert np.array_equal(y, y64.astype(np.float32))
    assert np.array_equal(y, cli_sample(tmp_path, f["path"], f["x0"], f["steps"], f["solver"],
                                        f["cond"], f["guidance"], f["null"]))


def test_out_is_written_in_place():
    s = digits(steps=4)
    x0 = x0_of(3)
    out = np.full((3, 64), np.nan, dtype=np.float32)
    assert s(x0, out=out) is out
    assert np.array_equal(out, s(x0))
    # x0 may be out: the integration in place.
    x = x0.copy()
    s(x, out=x)
    assert np.array_equal(x, out)
    assert s(np.empty((0, 64), np.float32)).shape == (0, 64)


def test_the_model_as_read():
    s = flowgen.Sampler.from_safetensors(DIGITS_COND, device="cpu", steps=8, solver="rk4",
                                         guidance=True)
    assert (s.dim, s.hidden, s.cond, s.layers, s.act, s.time, s.input) == \
        (64, 256, 10, 3, "silu", "raw", "x,t,c")
    assert (s.steps, s.solver, s.guidance, s.device) == (8, "rk4", True, "cpu")
    assert "C=10" in repr(s) and "guidance" in repr(s)


C = np.zeros((4, 10), np.float32)


@pytest.mark.parametrize("call,exc,words", [
    (lambda s: s([[0.0] * 64]), TypeError, "x0: a list, expected a numpy array"),
    (lambda s: s(np.zeros((4, 64))), TypeError, "x0: dtype float64, expected float32"),
    (lambda s: s(np.zeros((4, 64), np.float16)), TypeError, "dtype float16"),
    (lambda s: s(np.zeros((4, 63), np.float32)), ValueError, "x0: shape [4, 63], expected [B, 64]"),
    (lambda s: s(np.zeros(64, np.float32)), ValueError, "x0: shape [64]"),
    (lambda s: s(np.zeros((64, 64), np.float32, order="F")), ValueError, "x0: not contiguous"),
    (lambda s: s(np.zeros((4, 128), np.float32)[:, ::2]), ValueError, "not contiguous"),
    (lambda s: s(x0_of(4), out=np.zeros((5, 64), np.float32)), ValueError,
     "out: shape [5, 64], expected [4, 64]"),
    (lambda s: s(x0_of(4), out=np.zeros((4, 64), np.int32)), TypeError, "out: dtype int32"),
    (lambda s: s(x0_of(4), out=np.broadcast_to(np.zeros(64, np.float32), (4, 64))), ValueError,
     "out"),
    (lambda s: s(x0_of(4), cond=C), ValueError,
     "cond given, but the model has no conditioning (C=0)"),
    (lambda s: s(x0_of(4), null_cond=C[:1]), ValueError, "null_cond given, but the model"),
    (lambda s: s(x0_of(4), guidance=2.0), ValueError, "guidance 2, but the sampler has no guidance "
     "(its field is the conditional one, w = 1): build it with guidance=True"),
    (lambda s: s(x0_of(4), guidance=float("nan")), ValueError, "guidance nan is not finite"),
])
def test_bad_calls(call, exc, words):
    s = digits(steps=2)
    with pytest.raises(exc, match=re.escape(words)):
        call(s)


def cond_sampler(guidance=True):
    return flowgen.Sampler.from_safetensors(DIGITS_COND, device="cpu", steps=2, guidance=guidance)


@pytest.mark.parametrize("call,exc,words", [
    (lambda s: s(x0_of(4)), ValueError, "the model is conditional (C=10)"),
    (lambda s: s(x0_of(4), cond=C[:3]), ValueError, "cond: shape [3, 10], expected [4, 10]"),
    (lambda s: s(x0_of(4), cond=np.zeros((4, 9), np.float32)), ValueError, "expected [4, 10]"),
    (lambda s: s(x0_of(4), cond=C.astype(np.float64)), TypeError, "cond: dtype float64"),
    (lambda s: s(x0_of(4), cond=C, null_cond=np.zeros((2, 10), np.float32)), ValueError,
     "null_cond: shape [2, 10], expected [1, 10]"),
    (lambda s: s(x0_of(4), cond=C + np.inf), ValueError, "must be finite"),
])
def test_bad_conditional_calls(call, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        call(cond_sampler())


def test_null_cond_as_a_vector_or_a_row():
    s = cond_sampler()
    x0, n = x0_of(4), np.linspace(-1, 1, 10, dtype=np.float32)
    a = s(x0, cond=C, guidance=3.0, null_cond=n)
    assert np.array_equal(a, s(x0, cond=C, guidance=3.0, null_cond=n.reshape(1, 10)))
    assert not np.array_equal(a, s(x0, cond=C, guidance=3.0))


def test_guidance_without_the_guided_kernel_is_refused():
    with pytest.raises(ValueError, match="no guidance"):
        cond_sampler(guidance=False)(x0_of(4), cond=C, guidance=2.0)


@pytest.mark.parametrize("call,exc,words", [
    (lambda: flowgen.Sampler(), TypeError, "from_safetensors"),
    (lambda: digits(steps=0), ValueError, "steps"),
    (lambda: digits(solver="rk5"), ValueError, "rk5"),
    (lambda: digits(precision="fp8"), ValueError, "fp8"),
    (lambda: flowgen.Sampler.from_safetensors(DIGITS, device="tpu"), ValueError, "device 'tpu'"),
    (lambda: digits(guidance=True), ValueError, "guidance"),
    (lambda: digits(guidance=2.0), TypeError, "guidance: 2.0 is not a bool"),
    (lambda: flowgen.Sampler.from_safetensors(DIGITS_COND, device="cpu", act="gelu"), ValueError,
     "gelu"),
    (lambda: digits(time="sin:4"), ValueError, "sin"),
    (lambda: digits(prefix="model."), ValueError, "model.0.weight"),
    (lambda: flowgen.Sampler.from_safetensors("/nonexistent.safetensors", device="cpu"),
     OSError, "/nonexistent.safetensors"),
])
def test_bad_samplers(call, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        call()


def test_overrides_that_agree_are_accepted():
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", act="silu", time="raw",
                                         input="x,t,c")
    assert s.act == "silu"
