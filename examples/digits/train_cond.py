"""Trains a conditional member of flowgen's model family on scikit-learn's
8x8 digits: the velocity field of train.py (D=64, H=256, L=3, SiLU, raw t)
with the class as a one-hot c (C=10) appended to its input, [x, t, c].

  x0 ~ N(0, I), x1 = a digit of class y scaled to [-1, 1], t ~ U(0, 1)
  x_t = (1 - t) x0 + t x1,  loss = |velocity([x_t, t, c]) - (x1 - x0)|^2
  c = one-hot(y), replaced by the null condition (zeros) with probability 0.1

The dropout teaches the same network the unconditional field, so that
sampling can use classifier-free guidance, v = v_u + w (v_c - v_u) with v_u
at c = 0 (`flowgen sample --class N --guidance w`).  The same 80% of the
digits as train.py train; guidance.py measures the samples.  CPU is enough
(a few minutes).

usage: python3 train_cond.py [--steps 30000] [--out digits_cond_d64_h256.safetensors]
"""
import argparse
import os
import sys

import torch

from train import fit, split

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
import flowgen_export as fx  # noqa: E402

D, H, CLASSES = 64, 256, 10
DROPOUT = 0.1


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--out", default="digits_cond_d64_h256.safetensors")
    args = parser.parse_args()
    torch.manual_seed(0)
    train, labels, _, _ = split()
    data = torch.from_numpy(train)
    onehot = torch.eye(CLASSES)[torch.from_numpy(labels)]
    model = fx.FlowModel(D, H, cond=CLASSES, layers=3, act="silu", time="raw", input="x,t,c")

    def draw(n):
        pick = torch.randint(len(data), (n,))
        return data[pick], onehot[pick] * (torch.rand(n, 1) >= DROPOUT)

    # the MLP on [x, t, c] directly: t differs per row while training
    fit(model, model.velocity, draw, args.steps, args.batch)
    fx.save(model, args.out, metadata={
        "model": "conditional flow matching on sklearn 8x8 digits, scaled to [-1, 1]; "
                 "c = one-hot class, null = zeros (dropout 0.1)",
        "dim": str(D), "hidden": str(H), "classes": str(CLASSES),
        "train_steps": str(args.steps)})
    print("wrote", args.out)


if __name__ == "__main__":
    main()
