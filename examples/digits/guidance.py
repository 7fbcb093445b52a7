"""Measures the conditional digits model (train_cond.py): for each guidance
weight w, N samples a class are drawn for each class, and a classifier of
real digits (evaluate.py's) says how many show the class they were drawn
for.  The samples come from the PyTorch sampler (flowgen_export.sample,
fp32, the same Euler steps as flowgen), and with --flowgen from
`flowgen sample --class N --guidance w` on the same x0, so that the two
columns can be compared.  --png draws a row per class at one w.

usage: python3 guidance.py [--weights digits_cond_d64_h256.safetensors]
           [--per-class 100] [--steps 32] [--w 0,1,1.5,2,3,4] [--seed 7]
           [--flowgen ../../build/flowgen [--device cpu]]
           [--png digits_cond.png --png-w 2 --png-columns 10]
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
from safetensors.torch import load_file

from evaluate import class_accuracy, train_classifier

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
import flowgen_export as fx  # noqa: E402

CLASSES = 10


def load_model(path):
    """The conditional model of train_cond.py from its safetensors file."""
    state = load_file(path)
    hidden, inputs = state["velocity.0.weight"].shape
    dim = state["velocity.4.weight"].shape[0]
    model = fx.FlowModel(dim, hidden, cond=inputs - dim - 1, layers=3, act="silu")
    model.load_state_dict(state)
    return model


def torch_samples(model, x0, w, steps):
    """Class-major samples: x0[k * n:(k + 1) * n] drawn for class k."""
    n = len(x0) // CLASSES
    onehot = torch.eye(CLASSES).repeat_interleave(n, dim=0)
    guidance = None if w == 1 else w
    return fx.sample(model, torch.from_numpy(x0), steps, "euler", cond=onehot,
                     guidance=guidance).numpy()


def flowgen_samples(a, x0, w):
    """The same through `flowgen sample --class k` (one call a class)."""
    n = len(x0) // CLASSES
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(CLASSES):
            x0_path, x_path = os.path.join(tmp, "x0.npy"), os.path.join(tmp, "x.npy")
            np.save(x0_path, x0[k * n:(k + 1) * n])
            cmd = [a.flowgen, "sample", "--weights", a.weights, "--steps", str(a.steps),
                   "--x0", x0_path, "-o", x_path, "--device", a.device, "--class", str(k)]
            if w != 1:
                cmd += ["--guidance", repr(w)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"guidance: {' '.join(cmd)} failed ({done.returncode}): "
                         f"{done.stderr.strip()}")
            out.append(np.load(x_path))
    return np.concatenate(out)


def write_png(path, samples, columns, scale=4):
    """Grey tiles of 8x8 values, -1 white and 1 black, a border of `scale`
    white pixels around each: the layout of `flowgen sample --png`."""
    rows = (len(samples) - 1) // columns + 1
    tile = 8 * scale
    picture = np.full((rows * (tile + scale) + scale, columns * (tile + scale) + scale), 255,
                      dtype=np.uint8)
    grey = np.floor(np.clip((samples + 1) / 2, 0, 1) * 255 + 0.5).astype(np.uint8)
    for n, values in enumerate(grey):
        r, c = divmod(n, columns)
        image = np.kron(255 - values.reshape(8, 8), np.ones((scale, scale), dtype=np.uint8))
        y, x = scale + r * (tile + scale), scale + c * (tile + scale)
        picture[y:y + tile, x:x + tile] = image

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    height, width = picture.shape
    raw = b"".join(b"\0" + row.tobytes() for row in picture)
    png = (b"\x89PNG\r\n\x1a\n"
           + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default=os.path.join(here, "digits_cond_d64_h256.safetensors"))
    p.add_argument("--per-class", type=int, default=100)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--w", default="0,1,1.5,2,3,4",
                   help="guidance weights (1: none; 0: the unconditional field)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--flowgen", help="also sample with this flowgen binary")
    p.add_argument("--device", default="cpu", help="flowgen's --device")
    p.add_argument("--png", help="write a row per class at guidance --png-w")
    p.add_argument("--png-w", type=float, default=2.0)
    p.add_argument("--png-columns", type=int, default=10)
    a = p.parse_args()

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    model = load_model(a.weights)
    x0 = np.random.default_rng(a.seed).standard_normal(
        (CLASSES * a.per_class, model.dim)).astype(np.float32)
    classifier = train_classifier()
    requested = np.repeat(np.arange(CLASSES), a.per_class)

    print(f"{a.per_class} samples a class, {a.steps} Euler steps, seed {a.seed}: "
          f"accuracy on the requested class")
    header = "| w | PyTorch |" + (" flowgen | labels agree |" if a.flowgen else "") + " per class (PyTorch) |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for w in (float(v) for v in a.w.split(",")):
        x = torch_samples(model, x0, w, a.steps)
        total, per_class = class_accuracy(classifier, x, requested)
        line = f"| {w:g} | {total:.3f} |"
        if a.flowgen:
            y = flowgen_samples(a, x0, w)
            total_f, _ = class_accuracy(classifier, y, requested)
            agree = (classifier.predict(x) == classifier.predict(y)).mean()
            err = np.abs(y - x).max()
            line += f" {total_f:.3f} | {agree:.3f} (max diff {err:.1e}) |"
        print(line + " " + " ".join(f"{v:.2f}" for v in per_class) + " |", flush=True)

    if a.png:
        n = a.png_columns
        rows = x0.reshape(CLASSES, a.per_class, -1)[:, :n].reshape(CLASSES * n, -1)
        sub = fx.sample(model, torch.from_numpy(rows), a.steps, "euler",
                        cond=torch.eye(CLASSES).repeat_interleave(n, dim=0),
                        guidance=None if a.png_w == 1 else a.png_w).numpy()
        write_png(a.png, sub, n)
        print(f"wrote {a.png}: a row per class, w = {a.png_w:g}")


if __name__ == "__main__":
    main()
