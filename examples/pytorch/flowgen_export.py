"""The model family in PyTorch now lives in the flowgen package
(flowgen.torch_ref: FlowModel, TimeSpec, sample; flowgen.export).  This
module re-exports it for the scripts that import flowgen_export; from a
source tree without the package installed, it imports python/flowgen's
pure-Python modules directly (they do not need the compiled library)."""
import os
import sys

try:
    from flowgen import torch_ref as _ref
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    from flowgen import torch_ref as _ref

ACTIVATIONS, SOLVERS, DEFAULT_SCALE = _ref.ACTIVATIONS, _ref.SOLVERS, _ref.DEFAULT_SCALE
FlowModel, TimeSpec, parse_input = _ref.FlowModel, _ref.TimeSpec, _ref.parse_input
sample, save = _ref.sample, _ref.save
