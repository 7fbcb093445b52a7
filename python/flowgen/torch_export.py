"""A PyTorch module of the family as flowgen sees it (describe), and written
to safetensors with the __metadata__ flowgen reads (export).  Needs torch;
export also safetensors."""
import json
import struct

from torch import nn

from .torch_ref import TimeSpec, parse_input

# Activation modules by the name flowgen gives them.
def _activation_name(m):
    if isinstance(m, nn.SiLU):
        return "silu"
    if isinstance(m, nn.GELU):
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(m.approximate)
    if isinstance(m, nn.ReLU):
        return "relu"
    if isinstance(m, nn.Tanh):
        return "tanh"
    return None


def _told(name, told, found):
    """told if given (checked against what the module says), else found."""
    if told is None:
        return found
    if found is not None and str(told) != str(found):
        raise ValueError(f"{name} {told!r} given, but the module says {found!r}")
    return told


def describe(module, act=None, time=None, input=None):
    """The model of a family member: module is the velocity nn.Sequential
    (Linear, act, Linear, act, ..., Linear) or a module holding it as
    .velocity (flowgen.torch_ref.FlowModel).  Returns a dict: dim, hidden,
    cond, layers, act, time (as --time spells it), input ("x,t,c"),
    tensors [(weight, bias) as float32 numpy arrays], velocity (the
    Sequential).  time and input come from the arguments, else from the
    holder's .time and .input, else raw and x,t,c; act from the activation
    modules (given, it must agree)."""
    holder = None
    seq = module
    if not isinstance(module, nn.Sequential) and isinstance(getattr(module, "velocity", None),
                                                           nn.Module):
        holder, seq = module, module.velocity
    if not isinstance(seq, nn.Sequential):
        raise TypeError(f"module: a {type(seq).__name__}, expected the velocity nn.Sequential "
                        "(Linear, act, ..., Linear) or a module holding it as .velocity")
    children = list(seq)
    linears = children[0::2]
    acts = children[1::2]
    if len(children) % 2 == 0 or not all(isinstance(m, nn.Linear) for m in linears):
        raise ValueError("module: expected Linear layers at the even indices of the Sequential "
                         f"and activations between them, found {[type(m).__name__ for m in children]}")
    if not 2 <= len(linears) <= 8:
        raise ValueError(f"module: {len(linears)} Linear layers, flowgen takes 2 to 8")
    names = {_activation_name(m) for m in acts}
    if None in names or len(names) != 1:
        raise ValueError("module: the activations must be one of SiLU, GELU, "
                         "GELU(approximate='tanh'), ReLU, Tanh, the same between every layer; "
                         f"found {[type(m).__name__ for m in acts]}")
    act = _told("act", act, names.pop())
    found_time = getattr(holder, "time", None)
    time = str(_told("time", time, None if found_time is None else str(found_time)) or "raw")
    found_input = getattr(holder, "input", None)
    if isinstance(found_input, str) and "," not in found_input:
        found_input = ",".join(found_input)
    if isinstance(input, (list, tuple)):
        input = ",".join(input)
    input = _told("input", input, found_input) or "x,t,c"
    parse_input(input)
    width = TimeSpec(time).width
    tensors = []
    for i, m in enumerate(linears):
        if m.bias is None:
            raise ValueError(f"module: layer {2 * i} (Linear) has no bias")
        if i and m.in_features != linears[i - 1].out_features:
            raise ValueError(f"module: layer {2 * i} takes {m.in_features} inputs, layer "
                             f"{2 * i - 2} gives {linears[i - 1].out_features}")
        tensors.append(tuple(p.detach().to("cpu", dtype=_f32()).contiguous().numpy()
                             for p in (m.weight, m.bias)))
    dim, hidden = linears[-1].out_features, linears[0].out_features
    cond = linears[0].in_features - dim - width
    if cond < 0:
        raise ValueError(f"module: layer 0 takes {linears[0].in_features} inputs, fewer than "
                         f"D + T = {dim} + {width}")
    return {"dim": dim, "hidden": hidden, "cond": cond, "layers": len(linears), "act": act,
            "time": time, "input": input, "tensors": tensors, "velocity": seq}


def _f32():
    import torch
    return torch.float32


def export(module, path, *, prefix="velocity.", tensors=None, metadata=None,
           flowgen_metadata=True, act=None, time=None, input=None):
    """Writes module's Linear layers (fp32, as PREFIX0.weight, PREFIX0.bias,
    PREFIX2.weight, ...) and the __metadata__ flowgen reads (flowgen.act,
    flowgen.time, flowgen.input, flowgen.cond) to path, its keys sorted (the
    same model gives the same bytes).  module, act, time, input: as
    describe takes them.  tensors, metadata: extra entries (no collision
    with flowgen's).  flowgen_metadata=False leaves flowgen's keys out (read
    as silu, raw, x,t,c).  Returns the model's description."""
    import torch
    from safetensors.torch import save as save_bytes

    model = describe(module, act=act, time=time, input=input)
    state = {}
    for i, (w, b) in enumerate(model["tensors"]):
        state[f"{prefix}{2 * i}.weight"] = torch.from_numpy(w)
        state[f"{prefix}{2 * i}.bias"] = torch.from_numpy(b)
    meta = {"flowgen.act": model["act"], "flowgen.time": model["time"],
            "flowgen.input": model["input"], "flowgen.cond": str(model["cond"])} \
        if flowgen_metadata else {}
    for name, value in (metadata or {}).items():
        if name in meta:
            raise ValueError(f"metadata '{name}' is flowgen's own")
        meta[name] = str(value)
    for name, tensor in (tensors or {}).items():
        if name in state:
            raise ValueError(f"tensor '{name}' is one of the model's")
        state[name] = tensor.detach().contiguous()
    with open(path, "wb") as f:
        f.write(_sorted_metadata(save_bytes(state, metadata=meta)))
    return model


def _sorted_metadata(image):
    """The safetensors image with its __metadata__ keys sorted: the writer
    emits them in hash order, and the same model should give the same
    bytes.  The header keeps its length (only its order changes)."""
    size = struct.unpack("<Q", image[:8])[0]
    header = json.loads(image[8:8 + size])
    if "__metadata__" in header:
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    if len(text) > size:
        raise ValueError("safetensors header grew when its metadata was sorted")
    return image[:8] + text.ljust(size) + image[8 + size:]
