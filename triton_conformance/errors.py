"""Exceptions raised by triton-conformance.

Each subclasses a builtin so that callers can catch it the usual way, and each
message quotes the offending argument as ``name=value`` with what was expected.
"""

from __future__ import annotations

__all__ = ["InvalidContract", "InvalidArgument", "ConformanceUsageError", "StillFails"]


class InvalidContract(TypeError):
    """A subject's declaration is inconsistent (unknown dim, empty dtype list, ...)."""


class InvalidArgument(ValueError):
    """A strategy, option or helper was called with an argument it cannot accept."""


class ConformanceUsageError(RuntimeError):
    """The suite was asked to do something it cannot do here (e.g. cuda without a GPU)."""


class StillFails(AssertionError):
    """A reproducer's example failed again: the verdict, not an error of the reproducer (``replay`` exits 1
    for it, and 7 for any other exception: the reproducer could not run)."""
