"""Trains the velocity field of DESIGN.md's contract on scikit-learn's 8x8
digits (64 dimensions: the default shape D=64, H=256) by flow matching
(rectified flow) and writes it as safetensors.

  x0 ~ N(0, I), x1 = a digit scaled to [-1, 1], t ~ U(0, 1)
  x_t = (1 - t) x0 + t x1,  loss = |velocity([x_t, t]) - (x1 - x0)|^2

Then dx/dt = velocity(x, t) carries noise at t = 0 to digits at t = 1, which
is the ODE flowgen integrates.  80% of the digits train, 20% are held out
for evaluate.py.  CPU is enough (a few minutes).

usage: python3 train.py [--steps 30000] [--out digits_d64_h256.safetensors]
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
from safetensors.torch import save_file
from sklearn.datasets import load_digits

D, H = 64, 256


class Flow(nn.Module):
    def __init__(self):
        super().__init__()
        self.velocity = nn.Sequential(nn.Linear(D + 1, H), nn.SiLU(),
                                      nn.Linear(H, H), nn.SiLU(),
                                      nn.Linear(H, D))


def split(seed=0):
    """The digits scaled to [-1, 1], split 80/20 with a fixed seed."""
    digits = load_digits()
    x = digits.data.astype(np.float32) / 8.0 - 1.0
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return (x[order[:cut]], digits.target[order[:cut]],
            x[order[cut:]], digits.target[order[cut:]])


def fit(model, velocity, draw, steps, batch):
    """Flow matching, the loop train.py and train_cond.py share: `steps` of
    Adam (lr 2e-3, cosine decay) on |velocity([x_t, t, extra]) - (x1 - x0)|^2,
    where draw(batch) gives the data x1 and the extra input columns after t
    (None: none)."""
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for step in range(steps):
        x1, extra = draw(batch)
        x0 = torch.randn_like(x1)
        t = torch.rand(batch, 1)
        xt = (1 - t) * x0 + t * x1
        inputs = [xt, t] if extra is None else [xt, t, extra]
        loss = ((velocity(torch.cat(inputs, dim=-1)) - (x1 - x0)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 2000 == 0 or step == steps - 1:
            print(f"step {step:6d}  loss {loss.item():.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--out", default="digits_d64_h256.safetensors")
    args = parser.parse_args()
    torch.manual_seed(0)
    train, _, _, _ = split()
    data = torch.from_numpy(train)
    model = Flow()
    fit(model, model.velocity, lambda n: (data[torch.randint(len(data), (n,))], None),
        args.steps, args.batch)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    assert sorted(state) == sorted(f"velocity.{i}.{p}" for i in (0, 2, 4)
                                   for p in ("weight", "bias"))
    save_file(state, args.out, metadata={
        "model": "flow matching on sklearn 8x8 digits, scaled to [-1, 1]",
        "dim": str(D), "hidden": str(H), "train_steps": str(args.steps)})
    print("wrote", args.out)


if __name__ == "__main__":
    main()
