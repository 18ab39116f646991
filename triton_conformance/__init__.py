"""triton-conformance: a conformance test suite for Triton kernels.

Importing this package (and its pytest plugin) imports neither torch nor triton;
they are loaded when the battery runs.  The declaration API is the model's.
"""

from triton_conformance import model
from triton_conformance.errors import ConformanceUsageError, InvalidArgument, InvalidContract, StillFails
from triton_conformance.model import *  # noqa: F403 - the declaration API, listed once in model.__all__

__version__ = "0.1.0"

__all__ = sorted([*model.__all__, "ConformanceUsageError", "InvalidArgument", "InvalidContract", "StillFails",
                  "__version__"])
