"""triton-conformance: a conformance test suite for Triton kernels.

Importing this package (and its pytest plugin) imports neither torch nor triton;
they are loaded when the battery runs.
"""

from triton_conformance.conformance import (
    Contract,
    Dim,
    Mask,
    Performance,
    Scalar,
    Subject,
    Tensor,
    Tolerance,
    get_subject,
    register,
    registry,
    subject,
)
from triton_conformance.errors import ConformanceUsageError, InvalidArgument, InvalidContract
from triton_conformance.oracles.models import Dropout, Events, StochasticModel, StochasticRounding

__version__ = "0.1.0"

__all__ = [
    "ConformanceUsageError",
    "Contract",
    "Dim",
    "Dropout",
    "Events",
    "InvalidArgument",
    "InvalidContract",
    "Mask",
    "Performance",
    "Scalar",
    "StochasticModel",
    "StochasticRounding",
    "Subject",
    "Tensor",
    "Tolerance",
    "__version__",
    "get_subject",
    "register",
    "registry",
    "subject",
]
