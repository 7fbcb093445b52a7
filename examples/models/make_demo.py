"""Writes demo_d64_h256.safetensors: an untrained velocity field of the
default shape (D=64, H=256), initialised as torch.nn.Linear initialises
(U(-1/sqrt(fan_in), 1/sqrt(fan_in))), seed 0, stored as F16.  It lets the
README's main command sample without training anything first."""
import numpy as np
from safetensors.numpy import save_file

D, H = 64, 256
rng = np.random.default_rng(0)


def linear(fan_in, fan_out):
    bound = 1.0 / np.sqrt(fan_in)
    w = rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float16)
    b = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float16)
    return w, b


tensors = {}
for index, (fan_in, fan_out) in zip((0, 2, 4), ((D + 1, H), (H, H), (H, D))):
    w, b = linear(fan_in, fan_out)
    tensors[f"velocity.{index}.weight"] = w
    tensors[f"velocity.{index}.bias"] = b
save_file(tensors, "demo_d64_h256.safetensors",
          metadata={"model": "untrained demo, D=64 H=256"})
