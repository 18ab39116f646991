"""Strategies built once per argument tuple, for draws inside a composite.

A composite that builds ``st.integers(lo, hi)`` afresh at every example
makes Hypothesis validate a new strategy object each time (about a third of
a spec's draw).  Strategies are immutable values, so the same arguments can
share one object: the draws are the same, only cheaper.
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

__all__ = ["integers", "sampled_from", "nonempty_subsets"]


@lru_cache(maxsize=4096)
def integers(min_value: int, max_value: int) -> st.SearchStrategy[int]:
    """``st.integers(min_value, max_value)``, one object per bounds."""
    return st.integers(min_value, max_value)


@lru_cache(maxsize=4096)
def sampled_from(values: tuple) -> st.SearchStrategy:
    """``st.sampled_from(values)``, one object per tuple of values."""
    return st.sampled_from(values)


@lru_cache(maxsize=1024)
def nonempty_subsets(values: tuple) -> st.SearchStrategy[list]:
    """Lists of distinct elements of ``values``, at least one: ``st.lists(st.sampled_from(values), min_size=1,
    unique=True)``, one object per tuple."""
    return st.lists(st.sampled_from(values), min_size=1, unique=True)
