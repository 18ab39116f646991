"""The contract model and the battery of checks at the core of triton-conformance."""

from triton_conformance.conformance.contract import Contract, Dim, Mask, Scalar, Tensor, Tolerance
from triton_conformance.conformance.performance import Performance
from triton_conformance.conformance.subject import Subject, get_subject, register, registry, subject

__all__ = [
    "Contract",
    "Dim",
    "Mask",
    "Performance",
    "Scalar",
    "Subject",
    "Tensor",
    "Tolerance",
    "get_subject",
    "register",
    "registry",
    "subject",
]
