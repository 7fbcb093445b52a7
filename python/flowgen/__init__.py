"""flowgen from Python: the generator (generate), samplers on torch CUDA
tensors or, on the CPU, the fp64 reference on numpy arrays (Sampler), the
disk cache (cache_dir, cache_warm) and the PyTorch side of the model family
(export, flowgen.torch_ref).  python/README.md has the details."""
from ._lib import ArgumentError, CudaError, Error, IOFailure
from ._generate import cache_dir, cache_warm, generate
from ._sampler import Sampler

try:
    from ._version import __version__
except ImportError:  # a source tree, not an installed package: its header's
    def _source_version():
        import os
        import re
        header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "flowgen.h")
        try:
            with open(header) as f:
                return re.search(r'#define FLOWGEN_VERSION "([^"]+)"', f.read()).group(1)
        except (OSError, AttributeError):
            return "0+unknown"
    __version__ = _source_version()


def export(module, path, **kwargs):
    """Writes module's Linear layers and the __metadata__ flowgen reads to a
    safetensors file (flowgen.torch_export.export: needs torch and safetensors)."""
    from .torch_export import export as _export
    return _export(module, path, **kwargs)


__all__ = ["__version__", "generate", "Sampler", "cache_dir", "cache_warm", "export", "Error",
           "ArgumentError", "CudaError", "IOFailure"]
