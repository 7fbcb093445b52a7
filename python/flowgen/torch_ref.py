"""The flowgen model family in PyTorch: build a member, save it for flowgen,
and sample it the way flowgen does (the reference for flowgen's tests).

The family (docs and README: the contract with PyTorch):

    velocity = nn.Sequential(Linear(D + T + C, H), act, Linear(H, H), act, ...,
                             Linear(H, D))                    # L Linear layers
    v(x, t, c) = velocity(torch.cat([x, tau(t), c] in the input order, dim=-1))

act: silu, gelu (erf), gelu_tanh, relu, tanh.  tau: "raw" is the one column
t (T = 1); "sin:K[:SCALE]" is K features (K even, half = K / 2,
f_i = 10000^(-i / half)): [sin(SCALE t f_0) ... sin(SCALE t f_{half-1}),
cos(SCALE t f_0) ... cos(SCALE t f_{half-1})], SCALE 1000 unless given.

flowgen reads the Linear layers from the state_dict (`velocity.0`,
`velocity.2`, ...: D, H, L and C follow from their shapes) and what the shapes
cannot say from the file's __metadata__ (`flowgen.act`, `flowgen.time`,
`flowgen.input`, and `flowgen.cond` as a check), spelled as flowgen's flags
spell them.  save() writes both.

Needs torch (and safetensors for save).

    from flowgen import torch_ref as fx
    model = fx.FlowModel(dim=64, hidden=256, cond=10, act="gelu", time="sin:16")
    ...train...
    flowgen.export(model, "model.safetensors")
    x = fx.sample(model, x0, steps=32, solver="euler", cond=c, guidance=2.0)
"""
import math

import torch
from torch import nn

ACTIVATIONS = {
    "silu": nn.SiLU,
    "gelu": nn.GELU,
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
}

# flowgen's explicit Runge-Kutta schemes (templates/lib.lua, runtime/
# reference.c): stage i evaluates the velocity at x + dt a[i] k[i-1], time
# (k + c[i]) / S, and the step is x + dt sum b[i] k[i].  Euler is one stage at
# the midpoint time (k + 0.5) / S.
SOLVERS = {
    "euler": {"c": (0.5,), "a": (0.0,), "b": (1.0,)},
    "midpoint": {"c": (0.0, 0.5), "a": (0.0, 0.5), "b": (0.0, 1.0)},
    "heun": {"c": (0.0, 1.0), "a": (0.0, 1.0), "b": (0.5, 0.5)},
    "rk4": {"c": (0.0, 0.5, 0.5, 1.0), "a": (0.0, 0.5, 0.5, 1.0),
            "b": (1 / 6, 1 / 3, 1 / 3, 1 / 6)},
}

DEFAULT_SCALE = 1000.0


class TimeSpec:
    """A time embedding as flowgen's --time spells it: "raw", "sin:K" or
    "sin:K:SCALE"."""

    def __init__(self, text="raw"):
        self.features, self.scale, self.explicit_scale = 0, None, False
        parts = text.split(":")
        if parts == ["raw"]:
            return
        if parts[0] != "sin" or len(parts) not in (2, 3):
            raise ValueError(f"time spec '{text}': expected raw, sin:K or sin:K:SCALE")
        try:
            self.features = int(parts[1])
        except ValueError:
            raise ValueError(f"time spec '{text}': K '{parts[1]}' is not a whole number") from None
        if self.features < 2 or self.features > 1024 or self.features % 2:
            raise ValueError(f"time spec '{text}': K must be even, 2 to 1024")
        self.scale = DEFAULT_SCALE
        if len(parts) == 3:
            self.scale = float(parts[2])
            self.explicit_scale = True
            if not (math.isfinite(self.scale) and self.scale > 0):
                raise ValueError(f"time spec '{text}': SCALE must be positive and finite")

    @property
    def width(self):
        """T: the columns tau(t) adds to the first layer's input."""
        return self.features or 1

    def __str__(self):
        if not self.features:
            return "raw"
        if not self.explicit_scale:
            return f"sin:{self.features}"
        # %.17g round-trips a double and reads back with strtod.
        return f"sin:{self.features}:{self.scale:.17g}"

    def embed(self, t, rows, dtype, device=None):
        """tau(t) as a rows x T tensor of dtype on device.  t is a Python
        float; the features are computed in float64 (on the CPU) and then
        rounded, as flowgen folds them into the first layer's bias."""
        t = torch.full((rows, 1), float(t), dtype=torch.float64)
        if not self.features:
            return t.to(device=device, dtype=dtype)
        half = self.features // 2
        freqs = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
        angles = self.scale * t * freqs
        features = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
        return features.to(device=device, dtype=dtype)


def parse_input(text):
    """"x,t,c" (any order of the three) -> "xtc"."""
    parts = text.split(",")
    if sorted(parts) != ["c", "t", "x"]:
        raise ValueError(f"input order '{text}': expected x, t and c once each, e.g. x,t,c")
    return "".join(parts)


class FlowModel(nn.Module):
    """A member of the family; the MLP is the `velocity` attribute, so the
    state_dict keys are velocity.0.weight ... (flowgen's default prefix)."""

    def __init__(self, dim, hidden, cond=0, layers=3, act="silu", time="raw",
                 input="x,t,c"):
        super().__init__()
        if act not in ACTIVATIONS:
            raise ValueError(f"activation '{act}': expected one of {', '.join(ACTIVATIONS)}")
        if not 2 <= layers <= 8:
            raise ValueError(f"layers {layers}: expected 2 to 8")
        if not 0 <= cond <= 4096:
            raise ValueError(f"cond {cond}: expected 0 to 4096")
        self.dim, self.hidden, self.cond, self.layers = dim, hidden, cond, layers
        self.act = act
        self.time = TimeSpec(time) if isinstance(time, str) else time
        self.input = parse_input(input)
        widths = [dim + self.time.width + cond] + [hidden] * (layers - 1) + [dim]
        modules = []
        for i in range(layers):
            if i:
                modules.append(ACTIVATIONS[act]())
            modules.append(nn.Linear(widths[i], widths[i + 1]))
        self.velocity = nn.Sequential(*modules)

    def forward(self, x, t, c=None):
        """v(x, t, c): x is B x D, t a Python float (one time for the batch,
        as the solvers use it), c B x C (or 1 x C, broadcast; None for
        C = 0)."""
        parts = {"x": x, "t": self.time.embed(t, x.shape[0], x.dtype, x.device)}
        if self.cond:
            if c is None:
                raise ValueError(f"the model is conditional (C={self.cond}): c is required")
            parts["c"] = c.to(x.dtype).expand(x.shape[0], self.cond)
        return self.velocity(torch.cat([parts[k] for k in self.input if k in parts], dim=-1))

    def metadata(self):
        """The __metadata__ flowgen reads, spelled as its flags."""
        return {
            "flowgen.act": self.act,
            "flowgen.time": str(self.time),
            "flowgen.input": ",".join(self.input),
            "flowgen.cond": str(self.cond),
        }


def save(model, path, tensors=None, metadata=None, flowgen_metadata=True):
    """flowgen.torch_export.export(model, path, ...): model's Linear layers (fp32)
    and its flowgen metadata; kept under this name for existing scripts."""
    from .torch_export import export
    export(model, path, tensors=tensors, metadata=metadata, flowgen_metadata=flowgen_metadata)


@torch.no_grad()
def sample(model, x0, steps, solver="euler", cond=None, guidance=None, null_cond=None):
    """Integrates dx/dt = v(x, t, c) from t = 0 to 1 in `steps` steps of
    `solver`, in the dtype of the model's parameters (model.double() for the
    float64 reference).  With guidance w (classifier-free):
    v = v_u + w (v_c - v_u), v_u with null_cond (1 x C; None = zeros)."""
    if solver not in SOLVERS:
        raise ValueError(f"solver '{solver}': expected one of {', '.join(SOLVERS)}")
    if guidance is not None and not model.cond:
        raise ValueError("guidance needs a conditional model (C > 0)")
    tableau = SOLVERS[solver]
    dtype = next(model.parameters()).dtype
    x = x0.to(dtype).clone()
    if model.cond:
        cond = cond.to(dtype)
        if guidance is not None:
            null = (torch.zeros(1, model.cond, dtype=dtype, device=x.device)
                    if null_cond is None else null_cond.to(dtype))

    def velocity(y, t):
        v = model(y, t, cond)
        if guidance is not None:
            v_u = model(y, t, null)
            v = v_u + guidance * (v - v_u)
        return v

    dt = 1.0 / steps
    for k in range(steps):
        total = torch.zeros_like(x)
        v = None
        for c, a, b in zip(tableau["c"], tableau["a"], tableau["b"]):
            y = x if v is None else x + dt * a * v
            v = velocity(y, (k + c) / steps)
            total = total + b * v
        x = x + dt * total
    return x
