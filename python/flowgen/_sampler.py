"""Sampler: a compiled kernel and its weights on one CUDA device (torch
tensors in and out, on the current stream), or the fp64 reference on the
CPU (numpy arrays, or CPU tensors)."""
import ctypes
import functools
import math
import os
import sys
import threading
import weakref

import numpy as np

from . import _lib
from ._generate import make_spec

try:  # the launch calls without ctypes (optional: python/flowgen/_fast.c)
    from . import _fast
except ImportError:
    _fast = None

# Samplers by handle, for the torch operators (which take an int).
_registry = weakref.WeakValueDictionary()
_next_handle = [0]
_lock = threading.Lock()


class _Hooks:
    """Set by flowgen._torch once torch is imported: whether torch.compile
    is tracing, and the call that goes through the registered operator."""
    compiling = staticmethod(lambda: False)
    compiled = None


hooks = _Hooks()


def launchers(cond_fn, plain_fn, err):
    """(launch, launch_plain, err_arg): the CUDA path's calls of
    flowrt_sample_cond and flowrt_sample (ctypes functions), taking the
    same arguments as they do, the error last as err_arg: through _fast
    where it was built (0.07 us of conversion in place of 0.8), else through
    ctypes."""
    if _fast is None:
        return cond_fn, plain_fn, ctypes.byref(err)
    def address(fn):
        return ctypes.cast(fn, ctypes.c_void_p).value
    return (functools.partial(_fast.cond, address(cond_fn)),
            functools.partial(_fast.plain, address(plain_fn)), ctypes.addressof(err))


def _expect(act, time, input, err):
    """The spec whose non-default fields the weights file must agree with."""
    spec = _lib.Spec()  # zeroed: infer everything
    for field, value in (("act", act), ("time", time), ("input", input)):
        if value is not None:
            _lib.spec_set(spec, field, ",".join(value) if field == "input" and
                          isinstance(value, (list, tuple)) else value, err)
    return spec


def load_weights(path, prefix, act, time, input, err):
    """flowrt_weights_load: a POINTER(Weights) the caller frees."""
    expect = _expect(act, time, input, err)
    w = ctypes.POINTER(_lib.Weights)()
    st = _lib.lib().flowrt_weights_load(os.fsencode(path),
                                        None if prefix is None else prefix.encode(),
                                        ctypes.byref(expect), ctypes.byref(w), ctypes.byref(err))
    if st:
        _lib.raise_error(st, err)
    return w


def _parse_device(device):
    """"cpu" -> None; "cuda", "cuda:N", torch.device, N -> N."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    text = str(device)
    if text == "cpu":
        return None
    if text == "cuda":
        torch = sys.modules.get("torch")
        return torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise ValueError(f"device {device!r}: expected \"cpu\", \"cuda\" or \"cuda:N\"")


class _Runtime:
    """A flowrt_runtime (one a device and tune); closed with its last sampler."""
    _open = weakref.WeakValueDictionary()

    def __init__(self, index, tune, cache_dir):
        err = _lib.ErrorStruct()
        opts = _lib.RtOptions(device=index, disk_cache=-1)
        if tune is not None:
            opts.tune = tune.encode()
        if cache_dir is not None:
            opts.cache_dir = os.fsencode(cache_dir)
        self._close = _lib.lib().flowrt_close
        self.ptr = ctypes.c_void_p()
        st = _lib.lib().flowrt_open(ctypes.byref(opts), ctypes.byref(self.ptr), ctypes.byref(err))
        if st:
            _lib.raise_error(st, err)

    @classmethod
    def get(cls, index, tune, cache_dir):
        key = (index, tune, cache_dir)
        with _lock:
            rt = cls._open.get(key)
            if rt is None:
                rt = cls(index, tune, cache_dir)
                cls._open[key] = rt
            return rt

    def __del__(self):
        if getattr(self, "ptr", None):
            self._close(self.ptr)
            self.ptr = None


class Sampler:
    """x = the ODE solution from x0, for a batch: s(x0), s(x0, out=y),
    s(x0, cond=c, guidance=w, null_cond=n).  Build one with from_safetensors
    or from_module.

    On CUDA (device "cuda" or "cuda:N"): x0 a contiguous torch.float32
    tensor [B, D] on that device; the kernel runs on
    torch.cuda.current_stream() and allocates nothing (but the output when
    out is not given); capturable in torch.cuda.graph once the workspace
    holds the batch (reserve); under torch.compile it is the operator
    torch.ops.flowgen.sample.  Calls of one sampler must not overlap: one
    sampler a stream.

    On the CPU (device "cpu"): the fp64 reference, synchronous; numpy
    float32 arrays in, float32 out (float64 when out is a float64 array);
    CPU torch tensors work too.

    Nothing is converted or copied: a tensor of another dtype raises
    TypeError, of another device, shape or layout ValueError."""

    def __init__(self, *args, **kwargs):
        raise TypeError("build a Sampler with Sampler.from_safetensors or Sampler.from_module")

    # ---- construction ---------------------------------------------------
    @classmethod
    def from_safetensors(cls, path, steps=32, solver="euler", precision="fp32",
                         prefix="velocity.", device="cuda", *, act=None, time=None, input=None,
                         guidance=False, tune=None, cache_dir=None):
        """A sampler of the model in a safetensors file (PyTorch's state_dict:
        prefix0.weight, prefix0.bias, prefix2.weight, ...).  act, time and
        input default to the file's __metadata__ (flowgen.act, ...); given,
        they must agree with it.  guidance=True builds the classifier-free
        guidance kernel (a conditional model)."""
        err = _lib.ErrorStruct()
        w = load_weights(path, prefix, act, time, input, err)
        return cls._create(w, steps, solver, precision, device, guidance, tune, cache_dir, err)

    @classmethod
    def from_module(cls, module, steps=32, solver="euler", precision="fp32", device="cuda", *,
                    act=None, time=None, input=None, guidance=False, tune=None, cache_dir=None):
        """A sampler of a PyTorch module of the family: the velocity
        nn.Sequential (Linear, act, Linear, ...) or a module holding it as
        .velocity (flowgen.torch_ref.FlowModel).  D, H, C, L and the
        activation come from its layers; the time features and input order
        from time/input, else the module's .time/.input attributes, else raw
        and x,t,c.  The weights are copied (later changes to the module do
        not reach the sampler)."""
        from .torch_export import describe
        err = _lib.ErrorStruct()
        model = describe(module, act=act, time=time, input=input)
        spec = _lib.Spec()
        for field in ("dim", "hidden", "cond", "layers", "act", "time", "input"):
            _lib.spec_set(spec, field, model[field], err)
        w = ctypes.POINTER(_lib.Weights)()
        L = _lib.lib()
        st = L.flowrt_weights_alloc(ctypes.byref(spec), ctypes.byref(w), ctypes.byref(err))
        if st:
            _lib.raise_error(st, err)
        try:
            for i, (weight, bias) in enumerate(model["tensors"]):
                for dst, src in ((w.contents.w[i], weight), (w.contents.b[i], bias)):
                    src = np.ascontiguousarray(src, dtype=np.float32)
                    ctypes.memmove(dst, src.ctypes.data, src.nbytes)
        except BaseException:
            L.flowrt_weights_free(w)
            raise
        return cls._create(w, steps, solver, precision, device, guidance, tune, cache_dir, err)

    @classmethod
    def _create(cls, w, steps, solver, precision, device, guidance, tune, cache_dir, err):
        """Takes w (freed here, or kept by a CPU sampler)."""
        L = _lib.lib()
        self = object.__new__(cls)
        self._weights = None
        self._ptr = None
        self._free_weights = L.flowrt_weights_free
        try:
            index = _parse_device(device)
            if not isinstance(guidance, bool):
                raise TypeError(f"guidance: {guidance!r} is not a bool (the weight w is given "
                                "at each call)")
            base = _lib.Spec()
            L.flowgen_spec_default(ctypes.byref(base))
            L.flowrt_weights_model(w, ctypes.byref(base))
            spec = make_spec(dict(steps=steps, solver=solver, precision=precision,
                                  guidance=guidance), err, base)
            st = L.flowgen_spec_validate(ctypes.byref(spec), ctypes.byref(err))
            if st:
                _lib.raise_error(st, err)
            self._spec = spec
            self.dim, self.cond = w.contents.dim, w.contents.cond
            self.hidden, self.layers = w.contents.hidden, w.contents.layers
            self.guidance = guidance
            self.act = L.flowgen_activation_name(w.contents.act).decode()
            buf = ctypes.create_string_buffer(64)
            L.flowgen_time_name(ctypes.byref(w.contents.time), buf, 64)
            self.time = buf.value.decode()
            self.input = ",".join(w.contents.input.decode())
            self.steps, self.solver, self.precision = spec.steps, solver, precision
            self._err = err
            self._err_ref = ctypes.byref(err)
            self._reserved = 0
            self._index = index
            # What a tensor on the sampler's device says: get_device(), and
            # is_cpu or is_cuda (a meta tensor's get_device() is -1 too).
            self._tindex = -1 if index is None else index
            self._on = "is_cpu" if index is None else "is_cuda"
            if index is None:
                self.device = "cpu"
                self._weights, w = w, None
                self._reference = L.flowrt_reference_cond
                self._reference_f64 = L.flowrt_reference_cond_f64
            else:
                self.device = f"cuda:{index}"
                self._runtime = _Runtime.get(index, tune, cache_dir)
                ptr = ctypes.c_void_p()
                st = L.flowrt_sampler_create(self._runtime.ptr, ctypes.byref(spec), w,
                                             ctypes.byref(ptr), ctypes.byref(err))
                if st:
                    _lib.raise_error(st, err)
                self._ptr = ptr.value
                self._destroy = L.flowrt_sampler_destroy
                # (flowrt_sample: fewer arguments to convert)
                self._launch, self._launch_plain, self._err_arg = launchers(
                    L.flowrt_sample_cond, L.flowrt_sample, err)
        finally:
            if w is not None:
                L.flowrt_weights_free(w)
        with _lock:
            self._handle = _next_handle[0]
            _next_handle[0] += 1
            _registry[self._handle] = self
        if index is not None or "torch" in sys.modules:
            from . import _torch  # noqa: F401  (the tensors' call, the operators)
        return self

    def __del__(self):
        if getattr(self, "_ptr", None):
            self._destroy(self._ptr)
            self._ptr = None
        if getattr(self, "_weights", None):
            self._free_weights(self._weights)
            self._weights = None

    def __repr__(self):
        guided = ", guidance" if self.guidance else ""
        return (f"flowgen.Sampler(D={self.dim}, H={self.hidden}, C={self.cond}, L={self.layers}, "
                f"{self.act}, time {self.time}, input {self.input}, {self.steps} steps "
                f"{self.solver} {self.precision}{guided}, {self.device})")

    def reserve(self, max_batch):
        """Makes a call of max_batch rows allocate and compile nothing: the
        kernel variant that serves it is loaded now and the conditioning
        workspace holds max_batch rows (needed before a CUDA graph capture
        of a call that was not made before)."""
        if self._ptr is None:
            return
        st = _lib.lib().flowrt_sampler_reserve(self._ptr, int(max_batch), self._err_ref)
        if st:
            _lib.raise_error(st, self._err)
        self._reserved = max(self._reserved, int(max_batch))

    def prepare(self, batch=None):
        """Compiles (or finds in the cache) and loads the kernel variant that
        serves batch now, or every variant (None); a call otherwise does so
        at the first batch each variant serves."""
        if self._ptr is None:
            return
        st = _lib.lib().flowrt_sampler_prepare(self._ptr, -1 if batch is None else int(batch),
                                               self._err_ref)
        if st:
            _lib.raise_error(st, self._err)

    # ---- sampling -------------------------------------------------------
    def __call__(self, x0, out=None, *, cond=None, guidance=None, null_cond=None):
        """x = the ODE solution from x0 ([B, D]); out: where to write it
        (same shape, dtype and device), else a new tensor/array.  cond:
        [B, C] (a conditional model); guidance: the weight w (a sampler
        built with guidance=True; default 1); null_cond: [1, C], the
        unconditional input (default zeros)."""
        if hooks.compiling():
            return hooks.compiled(self, x0, out, cond, guidance, null_cond)
        if self._index is None:
            return self._call_cpu(x0, out, cond, guidance, null_cond)
        return self._call_cuda(x0, out, cond, guidance, null_cond)

    def _call_cpu(self, x0, out, cond, guidance, null_cond):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x0, torch.Tensor):
            from . import _torch
            return _torch.call_cpu(self, x0, out, cond, guidance, null_cond)
        check_guidance(self, guidance)
        rows = _host_rows("x0", x0, self.dim, None)
        if out is None:
            out = np.empty((rows, self.dim), dtype=np.float32)
        else:
            _host_rows("out", out, self.dim, rows, np.float64)
        self._run_cpu(x0.ctypes.data, out.ctypes.data, out.dtype == np.float64, rows,
                      _host_cond(self, cond, rows), _host_null(self, null_cond), guidance)
        return out

    def _run_cpu(self, x0, out, f64, rows, cond, null_cond, guidance):
        fn = self._reference_f64 if f64 else self._reference
        st = fn(ctypes.byref(self._spec), self._weights, x0, out, cond, null_cond,
                1.0 if guidance is None else float(guidance), rows, self._err_ref)
        if st:
            _lib.raise_error(st, self._err)

    def _call_cuda(self, x0, out, cond, guidance, null_cond):
        raise ImportError("a CUDA sampler needs torch")  # replaced by _torch.bind


def check_guidance(s, guidance):
    """The C words, the Python remedy."""
    if guidance is not None and not s.guidance and guidance != 1 and math.isfinite(guidance):
        raise _lib.ArgumentError(
            f"guidance {guidance:g}, but the sampler has no guidance (its field is the "
            "conditional one, w = 1): build it with guidance=True", "INVALID", 2)


def _host_rows(name, a, width, rows, also=None):
    """Checks a host array; returns its rows."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: a {type(a).__name__}, expected a numpy array (the sampler "
                        "is on the cpu)")
    if a.dtype != np.float32 and (also is None or a.dtype != also):
        raise TypeError(f"{name}: dtype {a.dtype}, expected float32"
                        f"{' or float64' if also is not None else ''} (nothing is converted)")
    if a.ndim != 2 or a.shape[1] != width or (rows is not None and a.shape[0] != rows):
        want = f"[{rows if rows is not None else 'B'}, {width}]"
        raise ValueError(f"{name}: shape {list(a.shape)}, expected {want}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name}: not contiguous (row-major), nothing is copied")
    if name == "out" and not a.flags.writeable:
        raise ValueError("out: read-only")
    return a.shape[0]


def _host_cond(s, cond, rows):
    if cond is None:
        return None
    if not s.cond:
        raise ValueError("cond given, but the model has no conditioning (C=0)")
    _host_rows("cond", cond, s.cond, rows)
    return cond.ctypes.data


def _host_null(s, null_cond):
    if null_cond is None:
        return None
    if not s.cond:
        raise ValueError("null_cond given, but the model has no conditioning (C=0)")
    if isinstance(null_cond, np.ndarray) and null_cond.ndim == 1:
        null_cond = null_cond.reshape(1, -1)
    _host_rows("null_cond", null_cond, s.cond, 1)
    return null_cond.ctypes.data
