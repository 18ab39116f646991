"""triton-conformance: a conformance test suite for Triton kernels.

Importing this package (and its pytest plugin) imports neither torch nor triton;
they are loaded when the battery runs.
"""

from triton_conformance.errors import ConformanceUsageError, InvalidArgument, InvalidContract
from triton_conformance.model.contract import Contract, Dim, Mask, Scalar, Tensor, Tolerance
from triton_conformance.model.performance import Performance
from triton_conformance.model.stochastic import Dropout, Events, StochasticModel, StochasticRounding
from triton_conformance.model.subject import Subject, get_subject, register, registry, subject

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
