#!/usr/bin/env python3
"""The flowgen Python package's call against PyTorch, end to end (host and
device), on one GPU: flowgen.Sampler (eager call, and the call replayed in a
CUDA graph), PyTorch eager, eager replayed in a CUDA graph, torch.compile
(default) and torch.compile(mode="max-autotune"), for B = 1 ... 65536; and
flowgen's call of a conditional member of the same shape (C=10, the
control loop's: s(x0, out=y, cond=c)).

For each: latency, the median wall time of one call and a synchronize
(what a caller waiting for its samples sees); host, the median wall time of
the call returning (the enqueue: Python, checks, launch), calls back to
back, as build/bench times the C call; host from idle, the same with the
GPU idle before each call (a control loop's call, which waits for each
result: no queue of earlier launches behind it); the error against the
fp64 reference (flowgen's CPU reference) of the same x0.

    python3 bench/python_call.py [--shape 64,256,32] [--batches 1,8,...]
                                 [--precision fp32] [--skip compile-max]
                                 [--json FILE]
    python3 bench/python_call.py --host-only   # no GPU: the Python side alone

--host-only times, on the CPU, the part of a call that is Python: the
argument checks, torch.empty_like for the output and the call (as the
sampler makes it: through flowgen._fast where it was built, else ctypes)
of a C function of the same signature that returns at once: flowrt_sample
without conditioning, else flowrt_sample_cond (the real call into the
runtime, cuLaunchKernelEx included, adds about 3 us on an H200).
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
import torch

import flowgen
from flowgen import torch_ref

BATCHES = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536"


def median_us(fn, runs, sync=None, before=None):
    """The median of runs wall times of fn() (then sync()), in us; before()
    runs ahead of each, untimed."""
    times = []
    for _ in range(runs):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def host_only(runs):
    """The Python side of a CUDA call, on the CPU (see the module's doc)."""
    import ctypes
    from flowgen import _lib, _torch
    from flowgen._sampler import launchers
    s = flowgen.Sampler.from_safetensors(_digits(), device="cpu")
    sc = flowgen.Sampler.from_safetensors(_digits("digits_cond_d64_h256"), device="cpu")
    # A C function that returns 0 at once, with flowrt_sample_cond's
    # argument types: the marshalling is the same, the work none.
    libc = ctypes.CDLL(None)

    def stub_of(name):
        stub = ctypes.CFUNCTYPE(ctypes.c_int)(("ffs", libc))
        fn = getattr(_lib.lib(), name)
        stub.restype, stub.argtypes = fn.restype, fn.argtypes
        return stub
    stub, plain = stub_of("flowrt_sample_cond"), stub_of("flowrt_sample")
    # The CUDA path, CPU tensors passing its device check (the conditional
    # sampler's workspace as reserve(8) leaves it), calling the stubs as a
    # CUDA sampler calls the runtime (through flowgen._fast where it was
    # built, else ctypes).
    for one in (s, sc):
        one._index, one._ptr, one._tindex, one._on = 0, 0, -1, "is_cpu"
        one._launch, one._launch_plain, one._err_arg = launchers(stub, plain, one._err)
    sc._reserved = 8
    x0, c = torch.zeros(8, s.dim), torch.zeros(8, sc.cond)
    out = torch.empty_like(x0)
    real_stream = _torch._raw_stream
    _torch._raw_stream = lambda index: 0  # no CUDA here
    try:
        rows = {
            "ctypes call alone (9 arguments)": lambda: stub(0, 1, 2, 0, 0, 1.0, 8, None,
                                                           s._err_ref),
            "ctypes call alone (6 arguments)": lambda: plain(0, 1, 2, 8, None, s._err_ref),
            "the launch call alone (6 arguments), as the sampler makes it":
                lambda: s._launch_plain(0, 1, 2, 8, None, s._err_arg),
            "s(x0, out=y): checks + call": lambda: s(x0, out=out),
            "s(x0): checks + torch.empty_like + call": lambda: s(x0),
            "s(x0, out=y, cond=c), C=10: checks + call": lambda: sc(x0, out=out, cond=c),
            "torch.empty_like(x0) alone (CPU)": lambda: torch.empty_like(x0),
            "torch.compiler.is_compiling()": torch.compiler.is_compiling,
        }
        for _ in range(2):  # warm
            result = {name: median_us(fn, runs) for name, fn in rows.items()}
    finally:
        _torch._raw_stream = real_stream
    for name, us in result.items():
        print(f"{us:8.2f} us  {name}")
    return result


def _digits(name="digits_d64_h256"):
    import os
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "digits",
                        name + ".safetensors")


def integrate(velocity, x, steps):
    """The seed model's Euler integration, every tensor on x's device (so
    that it can be captured): bench/pytorch_baseline.py's."""
    dt = 1.0 / steps
    for k in range(steps):
        t = torch.full((x.shape[0], 1), (k + 0.5) / steps, dtype=x.dtype, device=x.device)
        x = x + dt * velocity(torch.cat([x, t], dim=-1))
    return x


def graphed(fn):
    """fn captured in a CUDA graph: a call replays it and returns the
    output captured."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay():
        graph.replay()
        return out
    return replay


@torch.no_grad()
def bench(args):
    dim, hidden, steps = (int(v) for v in args.shape.split(","))
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    torch.manual_seed(0)
    model = torch_ref.FlowModel(dim, hidden).cuda()  # the seed: silu, raw time, x,t,c
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision, torch.float32)
    velocity = model.velocity.to(dtype)
    s = flowgen.Sampler.from_module(model, steps=steps, precision=args.precision)
    ref = flowgen.Sampler.from_module(model, steps=steps, device="cpu")
    # the control loop's call: a conditional member (C=10) of the same shape
    model_c = torch_ref.FlowModel(dim, hidden, cond=10).cuda()
    s_c = flowgen.Sampler.from_module(model_c, steps=steps, precision=args.precision)
    ref_c = flowgen.Sampler.from_module(model_c, steps=steps, device="cpu")
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        torch._dynamo.reset()  # a fresh compile a batch size, no recompile limit
        x0 = torch.randn(batch, dim, device="cuda")
        xt = x0.to(dtype)
        y = torch.empty_like(x0)
        c = torch.randn(batch, 10, device="cuda")
        expect = ref(x0.cpu().numpy(), out=np.empty((batch, dim)))
        expect_c = ref_c(x0.cpu().numpy(), out=np.empty((batch, dim)), cond=c.cpu().numpy())
        s_c.reserve(batch)
        runs = args.runs if batch <= 4096 else max(10, args.runs // 10)

        def flowgen_call():
            return s(x0, out=y)

        def torch_eager(x):
            return integrate(velocity, x, steps)

        candidates = {"flowgen": flowgen_call,
                      "flowgen graph": graphed(flowgen_call),
                      "flowgen, C=10": lambda: s_c(x0, out=y, cond=c),
                      "torch eager": lambda: torch_eager(xt),
                      "torch graph": graphed(lambda: torch_eager(xt))}
        if "compile" not in args.skip:
            compiled = torch.compile(torch_eager)
            candidates["torch.compile"] = lambda: compiled(xt)
        if "compile-max" not in args.skip:
            autotuned = torch.compile(torch_eager, mode="max-autotune")
            candidates["torch.compile max-autotune"] = lambda: autotuned(xt)
        for name, fn in candidates.items():
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            latency = median_us(fn, runs, torch.cuda.synchronize)
            host = median_us(fn, runs)
            torch.cuda.synchronize()
            idle = median_us(fn, runs, before=torch.cuda.synchronize)
            torch.cuda.synchronize()
            got = fn()
            torch.cuda.synchronize()
            err = rel_err(got.double().cpu().numpy(), expect_c if "C=10" in name else expect)
            rows.append({"batch": batch, "what": name, "latency_us": latency, "host_us": host,
                         "host_idle_us": idle, "rel_err": err})
            print(f"B={batch:6d} {name:28s} latency {latency:10.1f} us  host {host:8.1f} us  "
                  f"from idle {idle:8.1f} us  "
                  f"err {err:.2e}", flush=True)
    return rows


def rel_err(x, ref):
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="64,256,32", help="D,H,S")
    p.add_argument("--batches", default=BATCHES)
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--skip", default="", help="comma-separated: compile, compile-max")
    p.add_argument("--host-only", action="store_true", help="no GPU: the Python side alone")
    p.add_argument("--json")
    args = p.parse_args()
    args.skip = set(filter(None, args.skip.split(",")))
    from flowgen._sampler import _fast
    print("launch calls through " + ("flowgen._fast" if _fast else "ctypes (flowgen._fast not built)"))
    if args.host_only:
        result = host_only(args.runs * 50)
    else:
        if not torch.cuda.is_available():
            sys.exit("python_call: no GPU (--host-only times the Python side alone)")
        result = bench(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"flowgen": flowgen.__version__, "torch": torch.__version__,
                       "launch": "flowgen._fast" if _fast else "ctypes",
                       "device": torch.cuda.get_device_name() if torch.cuda.is_available()
                       else "cpu", "results": result}, f, indent=1)


if __name__ == "__main__":
    main()
