"""generate, cache_dir and cache_warm: the generator and the disk cache."""
import ctypes
import os

from . import _lib

# The model's fields as flowgen_spec_set names them (the CLI's flags).
SPEC_FIELDS = ("dim", "hidden", "steps", "solver", "precision", "arch", "name", "cond", "layers",
               "act", "time", "input", "guidance")


def _text(field, value):
    """A keyword's value as flowgen_spec_set takes it."""
    if isinstance(value, bool):
        if field != "guidance":
            raise TypeError(f"{field}: {value!r} is a bool")
        return "1" if value else "0"
    if field == "guidance":
        raise TypeError(f"guidance: {value!r} is not a bool")
    if field == "input" and isinstance(value, (tuple, list)):
        return ",".join(value)
    if not isinstance(value, (str, int)):
        raise TypeError(f"{field}: {value!r} is not a string or an integer")
    return str(value)


def make_spec(fields, err, base=None):
    """A flowgen_spec from the default (or base) with fields (None: left as
    is) set through flowgen_spec_set, so its checks and words are the CLI's."""
    spec = _lib.Spec()
    if base is None:
        _lib.lib().flowgen_spec_default(ctypes.byref(spec))
    else:
        ctypes.pointer(spec)[0] = base
    for field in SPEC_FIELDS:
        value = fields.get(field)
        if value is not None:
            _lib.spec_set(spec, field, _text(field, value), err)
    return spec


def _options(tune, host_launcher=False, template_dir=None):
    opts = _lib.Options()
    opts.host_launcher = bool(host_launcher)
    if tune is not None:
        opts.tune = tune.encode()
    if template_dir is not None:
        opts.template_dir = os.fsencode(template_dir)
    return opts


def generate(dim=64, steps=32, hidden=None, solver="euler", precision="fp32", arch="sm_90", *,
             cond=None, layers=None, act=None, time=None, input=None, guidance=None, name=None,
             tune=None, host_launcher=False, template_dir=None, batch=None):
    """The CUDA source of the kernel for the shape: the same text as
    `flowgen --dim ... -o file.cu` writes.  hidden None = 4 * dim; the
    family's fields None = the seed's (cond 0, layers 3, silu, raw, x,t,c,
    no guidance); batch: only the variant that serves that batch (and the
    pack kernel), as `flowgen --batch N`.  Bad values raise ArgumentError
    (a ValueError) with the CLI's words."""
    err = _lib.ErrorStruct()
    spec = make_spec(dict(dim=dim, hidden=hidden, steps=steps, solver=solver,
                          precision=precision, arch=arch, name=name, cond=cond, layers=layers,
                          act=act, time=time, input=input, guidance=guidance), err)
    opts = _options(tune, host_launcher, template_dir)
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int):
            raise TypeError(f"batch: {batch!r} is not an int")
        if batch < 0:
            raise _lib.ArgumentError(f"batch: {batch} is not a batch size (0 or more)",
                                     "INVALID", 2)
        opts.part, opts.batch = _lib.PART_BATCH, batch
    L = _lib.lib()
    kernel = ctypes.c_void_p()
    st = L.flowgen_generate(ctypes.byref(spec), ctypes.byref(opts), ctypes.byref(kernel),
                            ctypes.byref(err))
    if st:
        _lib.raise_error(st, err)
    try:
        text = ctypes.string_at(L.flowgen_kernel_source(kernel),
                                L.flowgen_kernel_source_size(kernel))
    finally:
        L.flowgen_kernel_free(kernel)
    return text.decode()


def cache_dir():
    """The disk cache's folder in effect ($FLOWGEN_CACHE_DIR, else
    $XDG_CACHE_HOME/flowgen, else ~/.cache/flowgen)."""
    err = _lib.ErrorStruct()
    buf = ctypes.create_string_buffer(4096)
    st = _lib.lib().flowrt_cache_dir(buf, len(buf), ctypes.byref(err))
    if st:
        _lib.raise_error(st, err)
    return os.fsdecode(buf.value)


def cache_warm(weights=None, *, prefix="velocity.", arch="sm_90", cache_dir=None, tune=None,
               template_dir=None, act=None, time=None, input=None, **fields):
    """Compiles a kernel into the disk cache without a GPU, as a sampler on
    sm_<arch> would look it up; returns whether it was cached already.  The
    model comes from a safetensors file (weights, with act/time/input as
    Sampler.from_safetensors takes them) or from the keywords of generate
    (dim, hidden, cond, layers, act, time, input); steps, solver, precision
    and guidance as the sampler will use them."""
    err = _lib.ErrorStruct()
    base = None
    if weights is not None:
        from ._sampler import load_weights
        w = load_weights(weights, prefix, act, time, input, err)
        try:
            base = _lib.Spec()
            _lib.lib().flowgen_spec_default(ctypes.byref(base))
            _lib.lib().flowrt_weights_model(w, ctypes.byref(base))
        finally:
            _lib.lib().flowrt_weights_free(w)
        for f in ("dim", "hidden", "cond", "layers"):
            if fields.get(f) is not None:
                raise TypeError(f"cache_warm: {f} comes from the weights file; leave it out")
    else:
        fields.update(act=act, time=time, input=input)
    unknown = set(fields) - set(SPEC_FIELDS)
    if unknown:
        raise TypeError(f"cache_warm: unknown keyword {sorted(unknown)[0]!r}")
    fields["arch"] = arch
    spec = make_spec(fields, err, base)
    opts = _options(tune, template_dir=template_dir)
    was = ctypes.c_bool()
    folder = None if cache_dir is None else os.fsencode(cache_dir)
    st = _lib.lib().flowrt_cache_warm(folder, ctypes.byref(spec), ctypes.byref(opts),
                                      ctypes.byref(was), ctypes.byref(err))
    if st:
        _lib.raise_error(st, err)
    return bool(was.value)
