"""ctypes over libflowgen.so (include/flowgen.h, include/flowrt.h), loaded on
first use so that the pure-Python modules (torch_ref, export) import from a
source tree too."""
import ctypes
import os
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float,
                    c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

HERE = os.path.dirname(os.path.abspath(__file__))

# flowgen_status, as FLOWGEN_STATUS_MAP numbers them.
STATUS = ["OK", "INVALID", "UNSUPPORTED", "TEMPLATE", "LIMIT", "IO", "NOMEM", "NO_NVRTC",
          "COMPILE", "NO_DRIVER", "NO_DEVICE", "CUDA", "WEIGHTS", "INPUT", "INTERNAL"]
LAYERS_MAX = 8


class Error(Exception):
    """A flowgen failure: .status is the C status name ("INVALID", ...),
    .exit_code the CLI's exit code for it; the message is the C library's."""

    def __init__(self, message, status="INTERNAL", exit_code=1):
        super().__init__(message)
        self.status, self.exit_code = status, exit_code


class ArgumentError(Error, ValueError):
    """INVALID, UNSUPPORTED, WEIGHTS and INPUT: a bad argument or file."""


class IOFailure(Error, OSError):
    """IO."""


class CudaError(Error, RuntimeError):
    """TEMPLATE, LIMIT, NO_NVRTC, COMPILE, NO_DRIVER, NO_DEVICE, CUDA, INTERNAL."""


_CLASSES = {"INVALID": ArgumentError, "UNSUPPORTED": ArgumentError, "WEIGHTS": ArgumentError,
            "INPUT": ArgumentError, "IO": IOFailure}


class ErrorStruct(Structure):
    _fields_ = [("status", c_int), ("message", c_char * 4096)]


class Time(Structure):
    _fields_ = [("features", c_int), ("scale", c_double)]


class Spec(Structure):
    _fields_ = [("dim", c_int), ("hidden", c_int), ("steps", c_int), ("solver", c_int),
                ("precision", c_int), ("arch", c_int), ("arch_specific", c_bool),
                ("name", c_char * 64), ("cond", c_int), ("layers", c_int), ("act", c_int),
                ("time", Time), ("input", c_char * 4), ("guidance", c_bool)]


class Device(Structure):
    _fields_ = [("sms", c_int), ("shared_per_block", c_int), ("clusters", c_int),
                ("clusters_at_once", c_int * 4)]


class Options(Structure):
    _fields_ = [("template_dir", c_char_p), ("host_launcher", c_bool),
                ("instruction_limit", c_uint64), ("memory_limit", c_size_t),
                ("tune", c_char_p), ("time_limit_ms", c_uint32), ("device", Device),
                ("part", c_int), ("variant", c_int), ("batch", c_int64)]

PART_BATCH = 3  # flowgen_part: FLOWGEN_PART_BATCH


class RtOptions(Structure):
    _fields_ = [("device", c_int), ("cache_dir", c_char_p), ("disk_cache", c_int),
                ("cache_trust_any", c_bool), ("template_dir", c_char_p), ("tune", c_char_p),
                ("device_figures", Device), ("warn", c_void_p), ("warn_ctx", c_void_p)]


class Weights(Structure):
    _fields_ = [("dim", c_int), ("hidden", c_int), ("cond", c_int), ("layers", c_int),
                ("time_width", c_int), ("act", c_int), ("time", Time), ("input", c_char * 4),
                ("w", POINTER(c_float) * LAYERS_MAX), ("b", POINTER(c_float) * LAYERS_MAX)]


S, P = c_int, c_void_p  # status, opaque pointer
_SIGNATURES = {
    "flowgen_status_name": (c_char_p, [c_int]),
    "flowgen_exit_code": (c_int, [c_int]),
    "flowgen_spec_default": (None, [POINTER(Spec)]),
    "flowgen_spec_set": (S, [POINTER(Spec), c_char_p, c_char_p, POINTER(ErrorStruct)]),
    "flowgen_spec_validate": (S, [POINTER(Spec), POINTER(ErrorStruct)]),
    "flowgen_spec_hidden": (c_int, [POINTER(Spec)]),
    "flowgen_generate": (S, [POINTER(Spec), POINTER(Options), POINTER(P), POINTER(ErrorStruct)]),
    "flowgen_kernel_free": (None, [P]),
    "flowgen_kernel_source": (c_void_p, [P]),
    "flowgen_kernel_source_size": (c_size_t, [P]),
    "flowgen_activation_name": (c_char_p, [c_int]),
    "flowgen_time_name": (None, [POINTER(Time), c_char_p, c_size_t]),
    "flowrt_weights_load": (S, [c_char_p, c_char_p, POINTER(Spec), POINTER(POINTER(Weights)),
                                POINTER(ErrorStruct)]),
    "flowrt_weights_alloc": (S, [POINTER(Spec), POINTER(POINTER(Weights)), POINTER(ErrorStruct)]),
    "flowrt_weights_free": (None, [POINTER(Weights)]),
    "flowrt_weights_model": (None, [POINTER(Weights), POINTER(Spec)]),
    "flowrt_reference_cond": (S, [POINTER(Spec), POINTER(Weights), c_void_p, c_void_p, c_void_p,
                                  c_void_p, c_float, c_int64, POINTER(ErrorStruct)]),
    "flowrt_reference_cond_f64": (S, [POINTER(Spec), POINTER(Weights), c_void_p, c_void_p,
                                      c_void_p, c_void_p, c_float, c_int64,
                                      POINTER(ErrorStruct)]),
    "flowrt_open": (S, [POINTER(RtOptions), POINTER(P), POINTER(ErrorStruct)]),
    "flowrt_close": (None, [P]),
    "flowrt_sampler_create": (S, [P, POINTER(Spec), POINTER(Weights), POINTER(P),
                                  POINTER(ErrorStruct)]),
    "flowrt_sampler_destroy": (None, [P]),
    "flowrt_sample": (S, [P, c_uint64, c_uint64, c_int64, c_void_p, POINTER(ErrorStruct)]),
    "flowrt_sample_cond": (S, [P, c_uint64, c_uint64, c_uint64, c_uint64, c_float, c_int64,
                               c_void_p, POINTER(ErrorStruct)]),
    "flowrt_sampler_reserve": (S, [P, c_int64, POINTER(ErrorStruct)]),
    "flowrt_sampler_prepare": (S, [P, c_int64, POINTER(ErrorStruct)]),
    "flowrt_sampler_workspace_bytes": (c_size_t, [P, c_int64]),
    "flowrt_cache_dir": (S, [c_char_p, c_size_t, POINTER(ErrorStruct)]),
    "flowrt_cache_warm": (S, [c_char_p, POINTER(Spec), POINTER(Options), POINTER(c_bool),
                              POINTER(ErrorStruct)]),
}

_lib = None


def path():
    """The bundled library (FLOWGEN_LIBRARY overrides it: a build folder's)."""
    return os.environ.get("FLOWGEN_LIBRARY") or os.path.join(HERE, "libflowgen.so")


def lib():
    global _lib
    if _lib is None:
        where = path()
        try:
            loaded = ctypes.CDLL(where)
        except OSError as e:
            raise ImportError(f"flowgen: cannot load {where} ({e}); install the package with "
                              "`pip install .` from the repository") from None
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(loaded, name)
            fn.restype, fn.argtypes = res, args
        _lib = loaded
    return _lib


def raise_error(status, err):
    """Raises the exception of a failed call: its class from the status, its
    message the C library's."""
    name = STATUS[status] if 0 <= status < len(STATUS) else "INTERNAL"
    cls = _CLASSES.get(name, CudaError)
    raise cls(err.message.decode(errors="replace"), name, lib().flowgen_exit_code(status))


def spec_set(spec, field, value, err):
    st = lib().flowgen_spec_set(ctypes.byref(spec), field.encode(), str(value).encode(),
                                ctypes.byref(err))
    if st:
        raise_error(st, err)
