"""The model family in PyTorch now lives in the flowgen package
(flowgen.torch_ref: FlowModel, TimeSpec, sample; flowgen.torch_export: export).
This module re-exports it for the scripts that import flowgen_export; from a
source tree without the package installed, it imports python/flowgen's
pure-Python modules directly (they do not need the compiled library)."""
import os
import sys

try:
    from flowgen.torch_ref import *  # noqa: F401,F403
    from flowgen.torch_ref import (ACTIVATIONS, DEFAULT_SCALE, SOLVERS, FlowModel,  # noqa: F401
                                   TimeSpec, parse_input, sample, save)
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    from flowgen.torch_ref import (ACTIVATIONS, DEFAULT_SCALE, SOLVERS, FlowModel,  # noqa: F401
                                   TimeSpec, parse_input, sample, save)
