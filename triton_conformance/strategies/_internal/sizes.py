"""Dimension sizes biased to where kernels break: block boundaries, primes, 1."""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from triton_conformance.strategies._internal.cached import integers
from triton_conformance.strategies._internal.validation import check_bounds

__all__ = ["boundary_sizes", "sizes", "non_power_of_two_sizes", "PRIMES", "palette_sizes", "specialization_class",
           "PALETTE_BLOCKS"]

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


@lru_cache(maxsize=4096)  # one strategy object per range: a composite draws it at every example
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
        return integers(lo, hi)

    return st.one_of(
        st.integers(0, bits).flatmap(log_uniform),
        st.sampled_from(boundary_sizes(min_value, max_value)),
    )


@lru_cache(maxsize=4096)
def non_power_of_two_sizes(*, min_value: int = 1, max_value: int = 4096) -> st.SearchStrategy[int]:
    """Returns a strategy for sizes that are not powers of two: ``2^k ± 1`` and primes.

    Falls back to all boundary sizes when the range holds no such size.
    Shrinks towards the smallest one.
    """
    check_bounds("non_power_of_two_sizes", min_value=min_value, max_value=max_value)
    pool = tuple(v for v in boundary_sizes(min_value, max_value) if not _is_pow2(v) and v > 1)
    return st.sampled_from(pool or boundary_sizes(min_value, max_value))


# Block sizes a palette brackets with BLOCK - 1, BLOCK, BLOCK + 1: every other
# power of two from 16, so a dim visits few octaves (each may be a new
# constexpr block size) while still crossing the common tile sizes.
PALETTE_BLOCKS = (16, 64, 256, 1024, 4096, 16384, 65536)


def specialization_class(n: int) -> str:
    """Triton's class for an int argument: ``"one"`` (== 1), ``"div16"`` (% 16 == 0) or ``"other"``."""
    if n == 1:
        return "one"
    return "div16" if n % 16 == 0 else "other"


@lru_cache(maxsize=256)
def palette_sizes(min_value: int, max_value: int) -> tuple[int, ...]:
    """A small, class-aware set of sizes in ``[min_value, max_value]``, for back ends that compile.

    Triton compiles one kernel per specialization: int arguments fall into the
    classes ``== 1``, ``% 16 == 0`` and other, and launchers derive constexpr
    block sizes from dims.  Drawing from this palette instead of any integer
    makes repeated examples reuse compiled kernels, while every class and the
    boundaries ``BLOCK - 1``, ``BLOCK``, ``BLOCK + 1`` of :data:`PALETTE_BLOCKS`
    stay reachable: 1, 2, 3, 48 (a multiple of 16 that is no power of two),
    the block boundaries, and both ends of the range.
    """
    check_bounds("palette_sizes", min_value=min_value, max_value=max_value)
    out = {1, 2, 3, 48, min_value, max_value}
    for block in PALETTE_BLOCKS:
        out.update((block - 1, block, block + 1))
    return tuple(sorted(v for v in out if min_value <= v <= max_value))
