"""The PyTorch side, on the CPU (skipped without torch): export and
from_module against the files and the C reader, CPU tensors through the
reference, the operators under torch.compile(fullgraph=True)."""
import os
import re

import numpy as np
import pytest

import flowgen
from conftest import (DIGITS, DIGITS_COND, FAMILY, family_case, family_cases, needs_torch,
                      read_safetensors, rel, torch)

pytestmark = needs_torch

if torch is not None:
    from torch import nn

    from flowgen import torch_ref as fx
    from flowgen.torch_export import describe


def member_of(path):
    """The FlowModel a family fixture holds, and its test tensors/metadata."""
    from safetensors.torch import load_file
    state = load_file(path)
    _, meta = read_safetensors(path)
    layers = sum(1 for k in state if k.startswith("velocity.") and k.endswith(".weight"))
    hidden, inputs = state["velocity.0.weight"].shape
    dim = state[f"velocity.{2 * layers - 2}.weight"].shape[0]
    time = fx.TimeSpec(meta.get("flowgen.time", "raw"))
    model = fx.FlowModel(dim, hidden, cond=inputs - dim - time.width, layers=layers,
                         act=meta.get("flowgen.act", "silu"), time=time,
                         input=meta.get("flowgen.input", "x,t,c"))
    model.load_state_dict({k: v for k, v in state.items() if k.startswith("velocity.")})
    tests = {k: v for k, v in state.items() if k.startswith("test.")}
    return model, tests, {k: v for k, v in meta.items() if k.startswith("test.")}, meta


@pytest.mark.parametrize("name", family_cases())
def test_export_rewrites_the_fixture_byte_for_byte(name, tmp_path):
    path = os.path.join(FAMILY, name)
    model, tests, test_meta, meta = member_of(path)
    out = tmp_path / name
    flowgen.export(model, out, tensors=tests, metadata=test_meta,
                   flowgen_metadata="flowgen.act" in meta)
    with open(path, "rb") as a:
        assert out.read_bytes() == a.read()


@pytest.mark.parametrize("name", family_cases())
def test_from_module_equals_the_file(name):
    f = family_case(name)
    model, _, _, _ = member_of(f["path"])
    kw = dict(steps=f["steps"], solver=f["solver"], device="cpu",
              guidance=f["guidance"] is not None)
    a = flowgen.Sampler.from_module(model, **kw)
    b = flowgen.Sampler.from_safetensors(f["path"], **kw)
    assert repr(a) == repr(b)
    args = dict(cond=f["cond"], guidance=f["guidance"], null_cond=f["null"])
    assert np.array_equal(a(f["x0"], **args), b(f["x0"], **args))
    # The bare Sequential, told what the module knew.
    c = flowgen.Sampler.from_module(model.velocity, time=str(model.time),
                                    input=",".join(model.input), **kw)
    assert np.array_equal(c(f["x0"], **args), a(f["x0"], **args))


def test_from_module_copies_the_weights():
    torch.manual_seed(0)
    model = fx.FlowModel(4, 8)
    s = flowgen.Sampler.from_module(model, steps=3, device="cpu")
    x0 = np.ones((2, 4), np.float32)
    before = s(x0)
    with torch.no_grad():
        model.velocity[0].weight.add_(1.0)
    assert np.array_equal(s(x0), before)


def test_the_reference_is_pytorchs():
    torch.manual_seed(1)
    model = fx.FlowModel(6, 24, cond=2, layers=4, act="gelu", time="sin:6:3", input="t,c,x")
    x0, c = torch.randn(5, 6), torch.randn(5, 2)
    s = flowgen.Sampler.from_module(model, steps=5, solver="rk4", device="cpu", guidance=True)
    y = s(x0, cond=c, guidance=1.5, out=torch.empty(5, 6, dtype=torch.float64))
    want = fx.sample(model.double(), x0.double(), 5, "rk4", cond=c.double(), guidance=1.5)
    assert rel(y.numpy(), want.numpy()) < 1e-12


@pytest.mark.parametrize("build,exc,words", [
    (lambda: nn.Linear(3, 3), TypeError, "a Linear, expected the velocity nn.Sequential"),
    (lambda: nn.Sequential(nn.Linear(5, 8), nn.SiLU()), ValueError, "Linear layers at the even"),
    (lambda: nn.Sequential(nn.Linear(5, 8), nn.Sigmoid(), nn.Linear(8, 4)), ValueError,
     "Sigmoid"),
    (lambda: nn.Sequential(nn.Linear(5, 8), nn.SiLU(), nn.Linear(8, 8), nn.ReLU(),
                           nn.Linear(8, 4)), ValueError, "the same between every layer"),
    (lambda: nn.Sequential(nn.Linear(5, 8, bias=False), nn.SiLU(), nn.Linear(8, 4)), ValueError,
     "layer 0 (Linear) has no bias"),
    (lambda: nn.Sequential(nn.Linear(5, 8), nn.SiLU(), nn.Linear(7, 4)), ValueError,
     "layer 2 takes 7 inputs, layer 0 gives 8"),
    (lambda: nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 4)), ValueError,
     "fewer than D + T = 4 + 1"),
    (lambda: nn.Sequential(nn.Linear(5, 8), nn.SiLU(),
                           *[m for _ in range(8) for m in (nn.Linear(8, 8), nn.SiLU())],
                           nn.Linear(8, 4)), ValueError, "10 Linear layers"),
])
def test_describe_refuses(build, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        flowgen.Sampler.from_module(build(), device="cpu")


def test_told_fields_must_agree_with_the_module():
    model = fx.FlowModel(4, 8, act="relu", time="sin:4", input="t,x,c")
    with pytest.raises(ValueError, match=re.escape("act 'silu' given, but the module says 'relu'")):
        describe(model, act="silu")
    with pytest.raises(ValueError, match="time 'raw' given"):
        describe(model, time="raw")
    with pytest.raises(ValueError, match="input 'x,t,c' given"):
        describe(model, input="x,t,c")
    d = describe(model, act="relu", time="sin:4", input=("t", "x", "c"))
    assert (d["act"], d["time"], d["input"], d["cond"]) == ("relu", "sin:4", "t,x,c", 0)
    assert describe(nn.Sequential(nn.Linear(5, 8), nn.GELU(approximate="tanh"),
                                  nn.Linear(8, 4)))["act"] == "gelu_tanh"


def test_cpu_tensors_equal_numpy():
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", steps=4)
    x0 = torch.randn(3, 64)
    y = s(x0)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    assert np.array_equal(y.numpy(), s(x0.numpy()))
    out = torch.empty(3, 64, dtype=torch.float64)
    assert s(x0, out=out) is out


@pytest.mark.parametrize("call,exc,words", [
    (lambda s: s(torch.zeros(3, 64, dtype=torch.float64)), TypeError,
     "x0: dtype torch.float64, expected torch.float32 (nothing is converted)"),
    (lambda s: s(torch.zeros(3, 63)), ValueError, "x0: shape [3, 63], expected [B, 64]"),
    (lambda s: s(torch.zeros(64, 3).t()), ValueError, "x0: not contiguous"),
    (lambda s: s(torch.zeros(64, 64).t()), ValueError, "x0: not contiguous"),
    (lambda s: s(torch.zeros(3, 64, device="meta")), ValueError, "x0: on meta, but the sampler is on cpu (nothing is copied)"),
    (lambda s: s(torch.zeros(3, 64), out=torch.zeros(4, 64)), ValueError,
     "out: shape [4, 64], expected [3, 64]"),
    (lambda s: s(torch.zeros(3, 64), out=torch.zeros(3, 64, dtype=torch.float16)), TypeError,
     "out: dtype torch.float16"),
    (lambda s: s(torch.zeros(3, 64), cond=torch.zeros(3, 1)), ValueError,
     "cond given, but the model has no conditioning (C=0)"),
])
def test_bad_tensors(call, exc, words):
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", steps=2)
    with pytest.raises(exc, match=re.escape(words)):
        call(s)


def gpu_in_disguise(s):
    """s (a CPU sampler) taking the CUDA call's path with CPU tensors: its
    launches recorded, not run (as bench/python_call.py --host-only)."""
    from flowgen import _torch
    calls = []
    s._index, s._ptr, s._tindex, s._on = 0, 1234, -1, "is_cpu"
    s._destroy = lambda ptr: None
    s._launch_plain = lambda *a: calls.append(("plain",) + a[:4]) or 0
    s._launch = lambda *a: calls.append(("cond",) + a[:7]) or 0
    s._err_arg = s._err_ref
    return calls, _torch


def refused_without_launch(calls, bad):
    """Each (call, exception, words) of bad raises its words and launches
    nothing (the inline checks passed it on to the full ones)."""
    for call, exc, words in bad:
        n = len(calls)
        with pytest.raises(exc, match=re.escape(words)):
            call()
        assert len(calls) == n, words


def test_the_plain_call_checks_inline(monkeypatch):
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", steps=2)
    calls, _torch = gpu_in_disguise(s)
    monkeypatch.setattr(_torch, "_raw_stream", lambda index: 77)
    x0, out = torch.zeros(3, 64), torch.zeros(3, 64)
    assert s(x0, out=out) is out
    y = s(x0)
    assert y.shape == (3, 64) and y.dtype == torch.float32 and y is not x0
    assert calls == [("plain", 1234, x0.data_ptr(), out.data_ptr(), 3),
                     ("plain", 1234, x0.data_ptr(), y.data_ptr(), 3)]
    s(x0, out=out, guidance=1.0)  # anything beyond x0 and out: the full checks
    assert calls[-1][0] == "cond"
    bad = [  # what the inline checks pass on to the full ones, which refuse
        (lambda: s(torch.zeros(3, 64, dtype=torch.float64)), TypeError, "x0: dtype"),
        (lambda: s(torch.zeros(3, 63)), ValueError, "x0: shape [3, 63]"),
        (lambda: s(torch.zeros(3)), ValueError, "x0: shape [3]"),
        (lambda: s(torch.zeros(64, 3).t()), ValueError, "x0: not contiguous"),
        (lambda: s(torch.zeros(3, 64, device="meta")), ValueError, "x0: on meta"),
        (lambda: s(x0.numpy()), TypeError, "x0: a ndarray, expected a torch tensor"),
        (lambda: s(x0, out=torch.zeros(4, 64)), ValueError, "out: shape [4, 64]"),
        (lambda: s(x0, out=torch.zeros(64, 3).t()), ValueError, "out: not contiguous"),
        (lambda: s(x0, out=torch.zeros(3, 64, dtype=torch.float16)), TypeError, "out: dtype"),
        (lambda: s(x0, out=torch.zeros(3, 64, device="meta")), ValueError, "out: on meta"),
        (lambda: s(x0, out=out.numpy()), TypeError, "out: a ndarray"),
    ]
    refused_without_launch(calls, bad)
    # a subclass of Tensor takes the full checks, and passes them
    p = torch.nn.Parameter(torch.zeros(3, 64), requires_grad=False)
    s(p, out=out)
    assert calls[-1][0] == "cond"


def test_the_conditional_call_checks_inline(monkeypatch):
    s = flowgen.Sampler.from_safetensors(DIGITS_COND, device="cpu", steps=2, guidance=True)
    calls, _torch = gpu_in_disguise(s)
    monkeypatch.setattr(_torch, "_raw_stream", lambda index: 77)
    s._reserved = 3  # the conditioning workspace (reserve's) holds 3 rows
    x0, out, c = torch.zeros(3, 64), torch.zeros(3, 64), torch.zeros(3, 10)
    assert s(x0, out=out, cond=c) is out
    y = s(x0, cond=c, guidance=2.5)
    assert calls == [("cond", 1234, x0.data_ptr(), out.data_ptr(), c.data_ptr(), 0, 1.0, 3),
                     ("cond", 1234, x0.data_ptr(), y.data_ptr(), c.data_ptr(), 0, 2.5, 3)]
    bad = [  # what the inline checks pass on to the full ones, which refuse
        (lambda: s(x0), ValueError, "the model is conditional (C=10)"),
        (lambda: s(x0, cond=torch.zeros(3, 9)), ValueError, "cond: shape [3, 9], expected [3, 10]"),
        (lambda: s(x0, cond=torch.zeros(2, 10)), ValueError, "cond: shape [2, 10], expected [3, 10]"),
        (lambda: s(x0, cond=torch.zeros(10, 3).t()), ValueError, "cond: not contiguous"),
        (lambda: s(x0, cond=torch.zeros(3, 10, dtype=torch.float64)), TypeError, "cond: dtype"),
        (lambda: s(x0, cond=torch.zeros(3, 10, device="meta")), ValueError, "cond: on meta"),
        (lambda: s(x0, cond=c.numpy()), TypeError, "cond: a ndarray"),
    ]
    refused_without_launch(calls, bad)
    # a null conditioning, or more rows than the workspace holds: the full
    # path (which grows the workspace first)
    s(x0, cond=c, null_cond=torch.zeros(10))
    assert calls[-1][0] == "cond" and calls[-1][5] != 0
    grown = []
    monkeypatch.setattr(_torch, "_grow", lambda sampler, rows: grown.append(rows))
    big = torch.zeros(4, 64)
    s(big, cond=torch.zeros(4, 10))
    assert grown == [4] and calls[-1][7] == 4
    # guidance on a sampler without it: the full checks' words
    plain = flowgen.Sampler.from_safetensors(DIGITS_COND, device="cpu", steps=2)
    gpu_in_disguise(plain)
    plain._reserved = 3
    with pytest.raises(flowgen.ArgumentError, match="build it with guidance=True"):
        plain(x0, cond=c, guidance=2.0)


def test_compile_fullgraph_calls_the_operator():
    f = family_case("cfg_null_sin.safetensors")
    s = flowgen.Sampler.from_safetensors(f["path"], steps=f["steps"], solver=f["solver"],
                                         device="cpu", guidance=True)
    x0, c, n = (torch.from_numpy(f[k].copy()) for k in ("x0", "cond", "null"))
    eager = s(x0, cond=c, guidance=3.0, null_cond=n)

    def fn(x, cond, null):
        return s(x * 1.0, cond=cond, guidance=3.0, null_cond=null) + 0.0

    compiled = torch.compile(fn, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x0, c, n), eager)

    def in_place(x, out, cond, null):
        s(x, out=out, cond=cond, guidance=3.0, null_cond=null)
        return out * 2

    out = torch.empty_like(x0)
    assert torch.equal(torch.compile(in_place, fullgraph=True, backend="eager")(x0, out, c, n),
                       2 * eager)
    assert torch.equal(out, eager)


def test_compile_inductor():
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", steps=3)
    x0 = torch.randn(4, 64)
    try:
        got = torch.compile(lambda x: s(x) * 2, fullgraph=True)(x0)
    except Exception as e:  # no C++ compiler for inductor's CPU code
        if "compiler" in str(e).lower() or "InvalidCxxCompiler" in type(e).__name__:
            pytest.skip(f"inductor cannot build here: {e}")
        raise
    assert torch.equal(got, 2 * s(x0))


def test_the_operators_pass_opcheck():
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", steps=2)
    x0 = torch.randn(3, 64)
    torch.library.opcheck(torch.ops.flowgen.sample.default, (s._handle, x0, None, None, 1.0))
    torch.library.opcheck(torch.ops.flowgen.sample_out.default,
                          (s._handle, x0, torch.empty_like(x0), None, None, 1.0))


def test_fake_implementation_checks_shapes():
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", steps=2)
    with pytest.raises(Exception, match=re.escape("x0: shape [3, 5], expected [B, 64]")):
        torch.compile(lambda x: s(x), fullgraph=True, backend="eager")(torch.zeros(3, 5))


def test_guidance_of_any_real_type():
    f = family_case("cfg_zeros.safetensors")
    s = flowgen.Sampler.from_safetensors(f["path"], steps=f["steps"], device="cpu", guidance=True)
    x0, c = torch.from_numpy(f["x0"].copy()), torch.from_numpy(f["cond"].copy())
    want = s(x0, cond=c, guidance=2.5)
    assert torch.equal(s(x0, cond=c, guidance=np.float32(2.5)), want)
    assert torch.equal(s(x0, cond=c, guidance=torch.tensor(2.5)), want)


def test_an_operator_of_a_sampler_gone():
    s = flowgen.Sampler.from_safetensors(DIGITS, device="cpu", steps=2)
    handle = s._handle
    del s
    with pytest.raises(RuntimeError, match=f"flowgen sampler {handle} no longer exists"):
        torch.ops.flowgen.sample(handle, torch.zeros(1, 64), None, None, 1.0)
