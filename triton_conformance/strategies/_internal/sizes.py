"""Dimension sizes biased to where kernels break: block boundaries, primes, 1."""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from triton_conformance.strategies._internal.validation import check_bounds

__all__ = ["boundary_sizes", "sizes", "non_power_of_two_sizes", "PRIMES"]

# Primes near powers of two, where a tail block is almost full or almost empty.
PRIMES = (2, 3, 5, 7, 13, 17, 31, 61, 67, 127, 131, 251, 257, 509, 521, 1021, 1031, 2039, 2053, 4093, 4099, 8191)


@lru_cache(maxsize=256)
def boundary_sizes(min_value: int, max_value: int) -> tuple[int, ...]:
    """Sizes in ``[min_value, max_value]`` at block boundaries: 1, 2^k - 1, 2^k, 2^k + 1, primes."""
    out = {1, 2, 3, min_value, max_value}
    k = 2
    while k <= 2 * max_value:
        out.update((k - 1, k, k + 1))
        k *= 2
    out.update(PRIMES)
    return tuple(sorted(v for v in out if min_value <= v <= max_value))


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def sizes(*, min_value: int = 1, max_value: int = 4096) -> st.SearchStrategy[int]:
    """Returns a strategy for a dimension size in ``[min_value, max_value]``.

    - ``min_value``: the smallest size drawn (0 allows empty dims).
    - ``max_value``: the largest size drawn.

    Half the draws are block-boundary sizes (``2^k - 1``, ``2^k``, ``2^k + 1``,
    primes near powers of two, 1); the rest are log-uniform, so large and small
    sizes are both common.  Shrinks towards ``min_value``.

    >>> sizes(min_value=1, max_value=8192).example()  # doctest: +SKIP
    1025
    """
    check_bounds("sizes", min_value=min_value, max_value=max_value)
    bits = max(1, max_value.bit_length())

    def log_uniform(k: int) -> st.SearchStrategy[int]:
        lo = min(max(min_value, (1 << k) - 1 if k else 0), max_value)
        hi = max(lo, min(max_value, (1 << (k + 1)) + 1))
        return st.integers(lo, hi)

    return st.one_of(
        st.integers(0, bits).flatmap(log_uniform),
        st.sampled_from(boundary_sizes(min_value, max_value)),
    )


def non_power_of_two_sizes(*, min_value: int = 1, max_value: int = 4096) -> st.SearchStrategy[int]:
    """Returns a strategy for sizes that are not powers of two: ``2^k ± 1`` and primes.

    Falls back to all boundary sizes when the range holds no such size.
    Shrinks towards the smallest one.
    """
    check_bounds("non_power_of_two_sizes", min_value=min_value, max_value=max_value)
    pool = tuple(v for v in boundary_sizes(min_value, max_value) if not _is_pow2(v) and v > 1)
    return st.sampled_from(pool or boundary_sizes(min_value, max_value))
