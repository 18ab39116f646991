"""Exceptions raised by triton-conformance.

Each subclasses a builtin so that callers can catch it the usual way, and each
message quotes the offending argument as ``name=value`` with what was expected.
"""

from __future__ import annotations

__all__ = ["InvalidContract", "InvalidArgument", "ConformanceUsageError"]


class InvalidContract(TypeError):
    """A subject's declaration is inconsistent (unknown dim, empty dtype list, ...)."""


class InvalidArgument(ValueError):
    """A strategy, option or helper was called with an argument it cannot accept."""


class ConformanceUsageError(RuntimeError):
    """The suite was asked to do something it cannot do here (e.g. cuda without a GPU)."""
