"""Layout strategies: how a logical tensor sits in its storage.

The :class:`~triton_conformance.model.spec.Layout` value object and its
strides live in the model; this module draws them.
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from triton_conformance.model.spec import LAYOUT_CLASSES, Layout
from triton_conformance.strategies._internal.validation import check_one_of

__all__ = ["layouts"]


@lru_cache(maxsize=256)  # one strategy object per class and rank: a composite draws it at every example
def layouts(kind: str, ndim: int) -> st.SearchStrategy[Layout]:
    """Returns a strategy for a :class:`Layout` of class ``kind`` for a rank-``ndim`` tensor.

    - ``kind``: one of ``LAYOUT_CLASSES``.
    - ``ndim``: the tensor's rank.

    Shrinks towards the mildest layout of the class: a plain transpose, a step
    of 2 in the last dim, one element of padding, an offset of one element.
    """
    check_one_of("layouts", "kind", kind, LAYOUT_CLASSES)
    if kind == "contiguous" or ndim == 0:
        return st.just(Layout())
    if kind == "transposed":
        reversed_order = tuple(range(ndim))[::-1]
        return st.one_of(
            st.just(reversed_order),
            st.permutations(range(ndim)).map(tuple).filter(lambda p: p != tuple(range(ndim))),
        ).map(lambda p: Layout("transposed", perm=p))
    if kind == "sliced":
        return st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim).map(
            lambda s: Layout("sliced", steps=tuple(s[:-1]) + (max(s[-1], 2) if max(s) == 1 else s[-1],))
        )
    if kind == "padded":
        return st.sampled_from((1, 3, 16, 17, 61)).map(lambda p: Layout("padded", pad=p))
    if kind == "offset":
        return st.sampled_from((1, 2, 3, 16, 17, 64)).map(lambda o: Layout("offset", offset=o))
    if kind == "broadcast":
        return st.sets(st.integers(0, ndim - 1), min_size=1).map(
            lambda dims: Layout("broadcast", broadcast=tuple(sorted(dims)))
        )
    return st.sampled_from((7, 12345, 1 << 20)).map(lambda s: Layout("size1", odd_stride=s))
