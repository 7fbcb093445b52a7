"""The yardstick for flowgen's TFLOP/s on wide models: PyTorch's own
matrix product (cuBLAS) of a hidden layer's size, [B, H] x [H, H]^T
(F.linear, what nn.Linear runs), alone, in each precision, timed with
CUDA events (warm-up, median of many runs, fresh inputs a run).  A step of
the model is three such products at most, so flowgen's TFLOP/s over this
peak says how close a whole sampler comes to a plain GEMM of the same
size on the same GPU.

usage: python3 bench/gemm_peak.py [--shapes D,H,S;...] [--batches 1,8,...]
                                  [--precisions fp32,tf32,bf16,fp16]
                                  [--json FILE]

fp32 runs with TF32 off, tf32 with it on, bf16 and fp16 in that type
(fp32 accumulation, as cuBLAS does).  D and S of --shapes are ignored (the
sweep's syntax): one row per hidden width H and batch B.
"""
import argparse

import torch
import torch.nn.functional as F

from pytorch_baseline import DTYPES, time_ms, write_json


def peak(hidden, batch, precision):
    """Median time (ms) and TFLOP/s of [batch, hidden] x [hidden, hidden]^T."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    dtype = DTYPES[precision]
    torch.manual_seed(hidden * 131 + batch)
    w = torch.randn(hidden, hidden, device="cuda").to(dtype) / hidden ** 0.5
    inputs = [torch.randn(batch, hidden, device="cuda").to(dtype) for _ in range(3)]
    out = torch.empty(batch, hidden, device="cuda", dtype=dtype)
    counter = [0]

    def run():
        counter[0] += 1
        torch.matmul(inputs[counter[0] % 3], w.t(), out=out)

    with torch.no_grad():
        # the product checked once against fp64 (a wrong yardstick is worse
        # than none)
        ref = F.linear(inputs[1].double(), w.double())
        counter[0] = 0
        run()
        err = ((out.double() - ref).norm() / ref.norm()).item()
        median, low, high = time_ms(run, 50 if batch < 65536 else 20)
    return {"hidden": hidden, "batch": batch, "precision": precision, "median_us": median * 1e3,
            "min_us": low * 1e3, "max_us": high * 1e3,
            "tflops": 2.0 * batch * hidden * hidden / (median * 1e-3) / 1e12, "relerr": err}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="256,2048,16")
    parser.add_argument("--batches", default="1024,4096,65536")
    parser.add_argument("--precisions", default="fp32,tf32,bf16,fp16")
    parser.add_argument("--json")
    args = parser.parse_args()
    try:
        hiddens = sorted({int(s.split(",")[1]) for s in args.shapes.split(";")})
        batches = [int(b) for b in args.batches.split(",")]
    except (IndexError, ValueError):
        parser.error(f"--shapes {args.shapes!r} / --batches {args.batches!r}: expected D,H,S;... and B,B,...")
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in DTYPES:
            parser.error(f"--precisions: {p!r} is not one of {', '.join(sorted(DTYPES))}")
    if not torch.cuda.is_available():
        parser.exit(2, "gemm_peak.py: no CUDA GPU for torch\n")
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}: [B, H] x [H, H]^T")
    results = []
    for p in precisions:
        for h in hiddens:
            for b in batches:
                r = peak(h, b, p)
                results.append(r)
                print(f"{p:<4} H={h:<5} B={b:<7} {r['median_us']:10.1f} us {r['tflops']:7.1f} TFLOP/s"
                      f"  relerr {r['relerr']:.1e}", flush=True)
    if args.json:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
