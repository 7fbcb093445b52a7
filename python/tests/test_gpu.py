"""The CUDA path (skipped without a GPU): bit for bit the C runtime's output
(the CLI's, a second sampler's), PyTorch fp32 within its own error, out=
in place without allocating, CUDA graph capture and replay (a conditional
model after reserve), torch.compile(fullgraph=True), two streams, the
current stream, and the tensors it refuses."""
import re

import numpy as np
import pytest

import flowgen
from conftest import DIGITS, DIGITS_COND, HAS_GPU, cli, family_case, needs_gpu, rel

pytestmark = needs_gpu

if HAS_GPU:
    import torch

    from flowgen import torch_ref as fx


def cli_gpu(tmp_path, weights, x0, steps=32, solver="euler", precision="fp32", cond=None,
            guidance=None, null=None):
    np.save(tmp_path / "x0.npy", x0)
    args = ["sample", "--device", "gpu", "--weights", weights, "--x0", tmp_path / "x0.npy",
            "--steps", steps, "--solver", solver, "--precision", precision,
            "-o", tmp_path / "out.npy"]
    for flag, value in (("--cond", cond), ("--null-cond", null)):
        if value is not None:
            np.save(tmp_path / (flag[2:] + ".npy"), value)
            args += [flag, tmp_path / (flag[2:] + ".npy")]
    if guidance is not None:
        args += ["--guidance", repr(guidance)]
    cli(*args)
    return np.load(tmp_path / "out.npy")


def randn(rows, cols, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
@pytest.mark.parametrize("batch", [1, 37, 1000])
def test_digits_equal_the_cli(precision, batch, tmp_path):
    s = flowgen.Sampler.from_safetensors(DIGITS, precision=precision)
    x0 = randn(batch, 64)
    y = s(torch.from_numpy(x0).cuda())
    assert y.is_cuda and y.dtype == torch.float32 and y.shape == (batch, 64)
    assert np.array_equal(y.cpu().numpy(), cli_gpu(tmp_path, DIGITS, x0, precision=precision))


@pytest.mark.parametrize("name", ["cfg_null_sin.safetensors", "c3_gelu_sin4_cxt.safetensors",
                                  "l8_gelu_tanh.safetensors", "cfg_l5_relu.safetensors"])
def test_family_equals_the_cli(name, tmp_path):
    f = family_case(name)
    s = flowgen.Sampler.from_safetensors(f["path"], steps=f["steps"], solver=f["solver"],
                                         guidance=f["guidance"] is not None)
    dev = {k: None if f[k] is None else torch.from_numpy(f[k].copy()).cuda()
           for k in ("x0", "cond", "null")}
    y = s(dev["x0"], cond=dev["cond"], guidance=f["guidance"], null_cond=dev["null"])
    want = cli_gpu(tmp_path, f["path"], f["x0"], f["steps"], f["solver"], cond=f["cond"],
                   guidance=f["guidance"], null=f["null"])
    assert np.array_equal(y.cpu().numpy(), want)
    assert rel(y.cpu().numpy(), f["expected"]) < 1e-4


def test_a_second_sampler_from_the_module_is_bit_equal():
    torch.manual_seed(0)
    model = fx.FlowModel(32, 128, cond=4, act="gelu", time="sin:16").cuda()
    a = flowgen.Sampler.from_module(model, steps=16)
    b = flowgen.Sampler.from_module(model.cpu(), steps=16)
    x0, c = torch.randn(300, 32, device="cuda"), torch.randn(300, 4, device="cuda")
    assert torch.equal(a(x0, cond=c), b(x0, cond=c))


def test_torch_fp32_within_its_own_error():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    model = fx.FlowModel(64, 256, cond=8, layers=4, act="silu", time="sin:32").cuda()
    x0, c = torch.randn(512, 64, device="cuda"), torch.randn(512, 8, device="cuda")
    s = flowgen.Sampler.from_module(model, steps=32, guidance=True)
    ref = flowgen.Sampler.from_module(model, steps=32, device="cpu", guidance=True)
    want = ref(x0.cpu().numpy(), cond=c.cpu().numpy(), guidance=2.0, out=np.empty((512, 64)))
    got = s(x0, cond=c, guidance=2.0).cpu().numpy()
    torch_err = rel(fx.sample(model, x0, 32, cond=c, guidance=2.0).cpu().numpy(), want)
    assert rel(got, want) <= max(4 * torch_err, 1e-6), (rel(got, want), torch_err)


def test_out_in_place_allocates_nothing():
    s = flowgen.Sampler.from_safetensors(DIGITS)
    x0 = torch.randn(64, 64, device="cuda")
    y = torch.empty_like(x0)
    s(x0, out=y)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    assert s(x0, out=y) is y
    assert torch.cuda.memory_allocated() == before
    x = x0.clone()
    s(x, out=x)
    assert torch.equal(x, y)
    assert s(torch.empty(0, 64, device="cuda")).shape == (0, 64)


def capture(fn):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        fn()
        with torch.cuda.graph(graph, stream=stream):
            result = fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph, result


def test_graph_capture_and_replay():
    s = flowgen.Sampler.from_safetensors(DIGITS)
    x0 = torch.randn(100, 64, device="cuda")
    y = torch.empty_like(x0)
    graph, _ = capture(lambda: s(x0, out=y))
    graph2, fresh = capture(lambda: s(x0))
    for seed in (1, 2):
        x0.copy_(torch.randn(100, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        graph.replay()
        graph2.replay()
        want = s(x0)
        assert torch.equal(y, want) and torch.equal(fresh, want)


def test_a_conditional_graph_needs_reserve():
    s = flowgen.Sampler.from_safetensors(DIGITS_COND, guidance=True)
    x0 = torch.randn(50, 64, device="cuda")
    c = torch.eye(10, device="cuda").repeat(5, 1)
    y = torch.empty_like(x0)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match=re.escape("call reserve(50) before capturing")):
        with torch.cuda.graph(graph):
            s(x0, out=y, cond=c, guidance=2.0)
    s.reserve(50)
    graph, _ = capture(lambda: s(x0, out=y, cond=c, guidance=2.0))
    x0.normal_()
    graph.replay()
    assert torch.equal(y, s(x0, cond=c, guidance=2.0))


def test_capture_needs_the_variant_loaded():
    """Variants compile at their first batch: capturing a batch never called
    raises, naming prepare; after reserve (or prepare) it needs no warm-up."""
    s = flowgen.Sampler.from_safetensors(DIGITS)
    x0 = torch.randn(3000, 64, device="cuda")
    y = torch.empty_like(x0)
    stream = torch.cuda.Stream()
    with pytest.raises(flowgen.Error, match="prepare"):
        with torch.cuda.stream(stream), torch.cuda.graph(torch.cuda.CUDAGraph(), stream=stream):
            s(x0, out=y)
    s.reserve(3000)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        s(x0, out=y)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    assert torch.equal(y, s(x0))


def test_compile_fullgraph():
    s = flowgen.Sampler.from_safetensors(DIGITS_COND, guidance=True)
    x0 = torch.randn(20, 64, device="cuda")
    c = torch.eye(10, device="cuda").repeat(2, 1)

    def fn(x, cond):
        return s(x * 1.0, cond=cond, guidance=2.0) * 0.5

    want = s(x0, cond=c, guidance=2.0) * 0.5
    assert torch.equal(torch.compile(fn, fullgraph=True)(x0, c), want)
    s.reserve(20)
    graphed = torch.compile(fn, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        got = graphed(x0, c)
    assert torch.equal(got, want)


def test_two_streams_and_the_current_stream():
    a = flowgen.Sampler.from_safetensors(DIGITS)
    b = flowgen.Sampler.from_safetensors(DIGITS)
    x1, x2 = torch.randn(4096, 64, device="cuda"), torch.randn(8, 64, device="cuda")
    want1, want2 = a(x1), a(x2)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    s1.wait_stream(torch.cuda.current_stream())
    s2.wait_stream(torch.cuda.current_stream())
    for _ in range(3):
        with torch.cuda.stream(s1):
            y1 = a(x1)
        with torch.cuda.stream(s2):
            y2 = b(x2)
    torch.cuda.synchronize()
    assert torch.equal(y1, want1) and torch.equal(y2, want2)
    # Ordered after work queued on the same (non-default) stream only.
    with torch.cuda.stream(s1):
        x = torch.empty(2048, 64, device="cuda")
        x.copy_(x1[:2048])
        y = a(x)
    s1.synchronize()
    assert torch.equal(y, a(x1[:2048].contiguous()))


@pytest.mark.parametrize("call,exc,words", [
    (lambda s: s(torch.zeros(3, 64)), ValueError,
     "x0: on cpu, but the sampler is on cuda:0 (nothing is copied)"),
    (lambda s: s(np.zeros((3, 64), np.float32)), TypeError, "x0: a ndarray, expected a torch tensor"),
    (lambda s: s(torch.zeros(3, 64, device="cuda", dtype=torch.float64)), TypeError,
     "x0: dtype torch.float64"),
    (lambda s: s(torch.zeros(3, 64, device="cuda", dtype=torch.bfloat16)), TypeError,
     "x0: dtype torch.bfloat16"),
    (lambda s: s(torch.zeros(64, 64, device="cuda").t()), ValueError, "x0: not contiguous"),
    (lambda s: s(torch.zeros(3, 32, device="cuda")), ValueError, "x0: shape [3, 32], expected [B, 64]"),
    (lambda s: s(torch.zeros(3, 64, device="cuda"), out=torch.zeros(3, 64)), ValueError,
     "out: on cpu"),
    (lambda s: s(torch.zeros(3, 64, device="cuda"),
                 out=torch.zeros(3, 64, device="cuda", dtype=torch.float64)), TypeError,
     "out: dtype torch.float64, expected torch.float32"),
    (lambda s: s(torch.zeros(3, 64, device="cuda"), cond=torch.zeros(3, 2, device="cuda")),
     ValueError, "cond given, but the model has no conditioning (C=0)"),
    (lambda s: s(torch.zeros(3, 64, device="cuda"), guidance=2.0), ValueError,
     "build it with guidance=True"),
])
def test_bad_tensors(call, exc, words):
    s = flowgen.Sampler.from_safetensors(DIGITS, steps=2)
    with pytest.raises(exc, match=re.escape(words)):
        call(s)


@pytest.mark.parametrize("call,exc,words", [
    (lambda s, x: s(x), ValueError, "the model is conditional (C=10)"),
    (lambda s, x: s(x, cond=torch.zeros(3, 10)), ValueError, "cond: on cpu"),
    (lambda s, x: s(x, cond=torch.zeros(4, 10, device="cuda")), ValueError,
     "cond: shape [4, 10], expected [3, 10]"),
    (lambda s, x: s(x, cond=torch.zeros(10, 3, device="cuda").t()), ValueError,
     "cond: not contiguous"),
    (lambda s, x: s(x, cond=torch.zeros(3, 10, device="cuda"),
                    null_cond=torch.zeros(2, 10, device="cuda")), ValueError,
     "null_cond: shape [2, 10], expected [1, 10]"),
])
def test_bad_conditioning(call, exc, words):
    s = flowgen.Sampler.from_safetensors(DIGITS_COND, steps=2, guidance=True)
    with pytest.raises(exc, match=re.escape(words)):
        call(s, torch.zeros(3, 64, device="cuda"))
