"""The torch side of Sampler: the CUDA call on the current stream, CPU
tensors on the reference, and the operators torch.compile sees
(torch.ops.flowgen.sample and .sample_out, with fake implementations)."""
from typing import Optional

import torch
from torch import Tensor

from . import _lib
from ._sampler import Sampler, _registry, check_guidance, hooks

_F32, _F64 = torch.float32, torch.float64
try:
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # a torch without it: the public (slower) way
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


def _check(s, name, t, width, rows, dtypes=(_F32,)):
    """Checks one tensor against the sampler (device, dtype, shape,
    layout); returns its rows.  Nothing is converted or copied."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: a {type(t).__name__}, expected a torch tensor")
    if t.dtype not in dtypes:
        raise TypeError(f"{name}: dtype {t.dtype}, expected "
                        f"{' or '.join(map(str, dtypes))} (nothing is converted)")
    if t.get_device() != s._tindex or not getattr(t, s._on):
        raise ValueError(f"{name}: on {t.device}, but the sampler is on {s.device} "
                         "(nothing is copied)")
    if t.dim() != 2 or t.shape[1] != width or (rows is not None and t.shape[0] != rows):
        want = f"[{rows if rows is not None else 'B'}, {width}]"
        raise ValueError(f"{name}: shape {list(t.shape)}, expected {want}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: not contiguous (row-major), nothing is copied")
    return t.shape[0]


def _check_all(s, x0, out, cond, null_cond, guidance):
    check_guidance(s, guidance)
    rows = _check(s, "x0", x0, s.dim, None)
    if out is not None:
        _check(s, "out", out, s.dim, rows, (_F32, _F64) if s._index is None else (_F32,))
    if cond is not None:
        if not s.cond:
            raise ValueError("cond given, but the model has no conditioning (C=0)")
        _check(s, "cond", cond, s.cond, rows)
    elif s.cond:
        raise ValueError(f"the model is conditional (C={s.cond}): give cond, a [B, {s.cond}] "
                         "float32 tensor")
    if null_cond is not None:
        if not s.cond:
            raise ValueError("null_cond given, but the model has no conditioning (C=0)")
        _check(s, "null_cond", null_cond.view(1, -1) if isinstance(null_cond, Tensor) and
               null_cond.dim() == 1 else null_cond, s.cond, 1)
    return rows


def _grow(s, rows):
    """Grows the conditioning workspace, never inside graph capture."""
    if torch.cuda.is_current_stream_capturing():
        raise _lib.ArgumentError(
            f"batch {rows}: the conditioning workspace holds {s._reserved} rows and cannot "
            f"grow inside CUDA graph capture: call reserve({rows}) before capturing", "INVALID", 2)
    s.reserve(rows)


def _run(s, x0, out, cond, null_cond, guidance, rows):
    """The C call, the arguments checked."""
    c = 0 if cond is None else cond.data_ptr()
    n = 0 if null_cond is None else null_cond.data_ptr()
    g = 1.0 if guidance is None else float(guidance)
    if s._index is None:
        s._run_cpu(x0.data_ptr(), out.data_ptr(), out.dtype is _F64, rows, c or None, n or None, g)
        return
    if s.cond and rows > s._reserved:
        _grow(s, rows)
    st = s._launch(s._ptr, x0.data_ptr(), out.data_ptr(), c, n, g, rows,
                   _raw_stream(s._index), s._err_arg)
    if st:
        _lib.raise_error(st, s._err)


def _call(self, x0, out=None, cond=None, guidance=None, null_cond=None):
    """Sampler.__call__ on tensors, eager: the C function directly (the
    dispatcher costs microseconds)."""
    # The control loop's calls, s(x0[, out=y]) and, on a conditional model,
    # s(x0, cond=c[, guidance=w][, out=y]), on the GPU: checked inline (each
    # tensor attribute read costs 50-100 ns, each Python call as much);
    # anything else, or anything amiss, goes through _check_all, whose
    # errors name what is wrong.
    if null_cond is None and self._index is not None and type(x0) is Tensor:
        shape = x0.shape
        if (x0.dtype is _F32 and len(shape) == 2 and shape[1] == self.dim
                and x0.get_device() == self._tindex and getattr(x0, self._on)
                and x0.is_contiguous()
                and (out is None or (type(out) is Tensor and out.dtype is _F32
                                     and out.shape == shape and out.get_device() == self._tindex
                                     and getattr(out, self._on) and out.is_contiguous()))):
            rows = shape[0]
            if cond is None:
                if not self.cond and guidance is None:
                    if out is None:
                        out = torch.empty_like(x0)
                    st = self._launch_plain(self._ptr, x0.data_ptr(), out.data_ptr(), rows,
                                            _raw_stream(self._index), self._err_arg)
                    if st:
                        _lib.raise_error(st, self._err)
                    return out
            elif (self.cond and (guidance is None or self.guidance) and rows <= self._reserved
                  and type(cond) is Tensor and cond.dtype is _F32 and cond.shape == (rows, self.cond)
                  and cond.get_device() == self._tindex and getattr(cond, self._on)
                  and cond.is_contiguous()):
                if out is None:
                    out = torch.empty_like(x0)
                st = self._launch(self._ptr, x0.data_ptr(), out.data_ptr(), cond.data_ptr(), 0,
                                  1.0 if guidance is None else float(guidance), rows,
                                  _raw_stream(self._index), self._err_arg)
                if st:
                    _lib.raise_error(st, self._err)
                return out
    rows = _check_all(self, x0, out, cond, null_cond, guidance)
    if out is None:
        out = torch.empty_like(x0)
    _run(self, x0, out, cond, null_cond, guidance, rows)
    return out


Sampler._call_cuda = _call


def call_cpu(s, x0, out, cond, guidance, null_cond):
    return _call(s, x0, out, cond, guidance, null_cond)


# ---- the operators (torch.compile, torch.library users) --------------------
def _sampler(handle):
    s = _registry.get(handle)
    if s is None:
        raise RuntimeError(f"flowgen sampler {handle} no longer exists: keep the Sampler alive "
                           "while compiled code calls it")
    return s


@torch.library.custom_op("flowgen::sample", mutates_args=())
def sample(handle: int, x0: Tensor, cond: Optional[Tensor], null_cond: Optional[Tensor],
           guidance: float) -> Tensor:
    """The sampler `handle`'s samples from x0 (a new tensor)."""
    return _call(_sampler(handle), x0, None, cond, guidance, null_cond)


@sample.register_fake
def _(handle, x0, cond, null_cond, guidance):
    _check_all(_sampler(handle), x0, None, cond, null_cond, guidance)
    return torch.empty_like(x0)


@torch.library.custom_op("flowgen::sample_out", mutates_args=("out",))
def sample_out(handle: int, x0: Tensor, out: Tensor, cond: Optional[Tensor],
               null_cond: Optional[Tensor], guidance: float) -> None:
    """The sampler `handle`'s samples from x0, written to out."""
    _call(_sampler(handle), x0, out, cond, guidance, null_cond)


@sample_out.register_fake
def _(handle, x0, out, cond, null_cond, guidance):
    _check_all(_sampler(handle), x0, out, cond, null_cond, guidance)


def _compiled(self, x0, out, cond, guidance, null_cond):
    g = 1.0 if guidance is None else float(guidance)
    if out is None:
        return torch.ops.flowgen.sample(self._handle, x0, cond, null_cond, g)
    torch.ops.flowgen.sample_out(self._handle, x0, out, cond, null_cond, g)
    return out


hooks.compiling = torch.compiler.is_compiling
hooks.compiled = _compiled
