"""The peer: the same model and sampler in PyTorch, eager and replayed as a
CUDA graph, timed with CUDA events (warm-up, median of many runs, fresh
random inputs, output checked against float64).

usage: python3 bench/pytorch_baseline.py [--shapes 64,256,32;...]
                                         [--batches 1,8,...] [--json FILE]
                                         [--precision fp32|tf32|bf16|fp16]

fp32 runs with TF32 off; tf32 with TF32 matmuls allowed; bf16 and fp16
run the model and the state in that type (what a PyTorch user would do).
"""
import argparse
import json
import statistics

import torch
import torch.nn as nn


def make_model(dim, hidden):
    return nn.Sequential(nn.Linear(dim + 1, hidden), nn.SiLU(),
                         nn.Linear(hidden, hidden), nn.SiLU(),
                         nn.Linear(hidden, dim))


def integrate(velocity, x, steps):
    dt = 1.0 / steps
    for k in range(steps):
        t = torch.full((x.shape[0], 1), (k + 0.5) / steps, dtype=x.dtype, device=x.device)
        x = x + dt * velocity(torch.cat([x, t], dim=-1))
    return x


def time_ms(fn, runs, warmup_runs=5, warmup_ms=200.0, budget_ms=3000.0):
    """Median, min and max of `runs` timed calls (fewer, at least 5, where
    they would take more than budget_ms), after a warm-up of warmup_ms."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin = torch.cuda.Event(enable_timing=True)
    begin.record()
    fn()
    stop.record()
    stop.synchronize()
    one = begin.elapsed_time(stop)
    i = 1
    # Warm up until the GPU has left its idle clocks.
    while one < warmup_ms:
        fn()
        i += 1
        stop.record()
        stop.synchronize()
        if i >= warmup_runs and begin.elapsed_time(stop) >= warmup_ms:
            break
    if one * runs > budget_ms:
        runs = max(5, int(budget_ms / one))
    times = []
    for _ in range(runs):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times), max(times)


DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
          "fp16": torch.float16}


def bench(dim, hidden, steps, batch, quick, precision="fp32"):
    torch.manual_seed(dim * 1000 + hidden + steps)
    dtype = DTYPES[precision]
    model = make_model(dim, hidden).cuda().eval()
    model64 = make_model(dim, hidden).cuda().double().eval()
    model64.load_state_dict(model.state_dict())
    model = model.to(dtype)
    sets = [torch.randn(batch, dim, device="cuda").to(dtype) for _ in range(3)]
    runs = 10 if quick or batch >= 65536 else 50
    result = {"dim": dim, "hidden": hidden, "steps": steps, "batch": batch,
              "precision": precision}
    with torch.no_grad():
        ref = integrate(model64, sets[0].double(), steps)
        out = integrate(model, sets[0], steps)
        result["relerr"] = ((out.double() - ref).norm() / ref.norm()).item()
        counter = [0]

        def eager():
            counter[0] += 1
            integrate(model, sets[counter[0] % 3], steps)

        result["eager_ms"] = time_ms(eager, runs)
        static_x = sets[0].clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            integrate(model, static_x, steps)  # warm-up before capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = integrate(model, static_x, steps)

        def replay():
            counter[0] += 1
            static_x.copy_(sets[counter[0] % 3])
            graph.replay()

        result["graph_ms"] = time_ms(replay, runs)
        static_x.copy_(sets[1])
        graph.replay()
        ref1 = integrate(model64, sets[1].double(), steps)
        result["graph_relerr"] = ((static_out.double() - ref1).norm() / ref1.norm()).item()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", default="64,256,32")
    parser.add_argument("--batches", default="1,8,64,1000,4096,65536")
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--precision", choices=sorted(DTYPES), default="fp32")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()} ({args.precision})")
    results = []
    for shape in args.shapes.split(";"):
        dim, hidden, steps = (int(v) for v in shape.split(","))
        for batch in (int(b) for b in args.batches.split(",")):
            r = bench(dim, hidden, steps, batch, args.quick, args.precision)
            results.append(r)
            print(f"D={dim:<4} H={hidden:<4} S={steps:<4} {args.precision} B={batch:<8} "
                  f"eager {r['eager_ms'][0] * 1e3:10.1f} us   graph {r['graph_ms'][0] * 1e3:10.1f} us"
                  f"   relerr {r['relerr']:.2e}", flush=True)
    if args.json:
        write_json(args.json, results)


def write_json(path, results):
    """results to path, with the torch version and the GPU's name."""
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
