"""Layout strategies: how a logical tensor sits in its storage.

The :class:`~triton_conformance.model.spec.Layout` value object and its
strides live in the model; this module draws them.
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from triton_conformance.errors import InvalidArgument
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.spec import Layout
from triton_conformance.model.vocabulary import LayoutClass
from triton_conformance.strategies._internal.validation import check_one_of

__all__ = ["layouts", "drawn_layouts", "TENSOR_LAYOUT_DRAWS"]


def _permuted(row: LayoutClass, ndim: int) -> st.SearchStrategy[Layout]:
    reversed_order = tuple(range(ndim))[::-1]
    return st.one_of(
        st.just(reversed_order),
        st.permutations(range(ndim)).map(tuple).filter(lambda p: p != tuple(range(ndim))),
    ).map(lambda p: Layout(row.name, perm=p))


def _swap_last(row: LayoutClass, ndim: int) -> st.SearchStrategy[Layout]:
    return st.just(Layout(row.name, perm=tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)))


def _stepped(row: LayoutClass, ndim: int) -> st.SearchStrategy[Layout]:
    return st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim).map(
        lambda s: Layout(row.name, steps=tuple(s[:-1]) + (max(s[-1], 2) if max(s) == 1 else s[-1],))
    )


def _stride0(row: LayoutClass, ndim: int) -> st.SearchStrategy[Layout]:
    return st.sets(st.integers(0, ndim - 1), min_size=1).map(
        lambda dims: Layout(row.name, broadcast=tuple(sorted(dims)))
    )


# What each layout row's ``draw`` names: a strategy of Layouts from the row and the tensor's rank.  A draw
# of one of the row's ``choices`` sets one field of the layout to it.
TENSOR_LAYOUT_DRAWS = {
    "contiguous": lambda row, ndim: st.just(Layout()),
    "permuted": _permuted,
    "swap-last": _swap_last,
    "stepped": _stepped,
    "padded": lambda row, ndim: st.sampled_from(row.choices).map(lambda p: Layout(row.name, pad=p)),
    "offset": lambda row, ndim: st.sampled_from(row.choices).map(lambda o: Layout(row.name, offset=o)),
    "stride0": _stride0,
    "odd-stride": lambda row, ndim: st.sampled_from(row.choices).map(lambda s: Layout(row.name, odd_stride=s)),
}


@lru_cache(maxsize=256)  # one strategy object per row and rank: a composite draws it at every example
def drawn_layouts(row: LayoutClass, ndim: int) -> st.SearchStrategy[Layout]:
    """Returns a strategy for a :class:`Layout` of the tensor layout row ``row`` (of any table: the layout
    classes, the descriptor classes) for a rank-``ndim`` tensor: what its ``draw`` names."""
    if row.draw not in TENSOR_LAYOUT_DRAWS:
        raise InvalidArgument(f"drawn_layouts: row.draw={row.draw!r} of layout class {row.name!r}, expected one of "
                              f"{tuple(TENSOR_LAYOUT_DRAWS)} (a spec-scope class is drawn per input by specs)")
    if ndim == 0 and row.rule is None:  # a scalar tensor has one layout (a descriptor row keeps its breach)
        return st.just(Layout())
    return TENSOR_LAYOUT_DRAWS[row.draw](row, ndim)


def layouts(kind: str, ndim: int) -> st.SearchStrategy[Layout]:
    """Returns a strategy for a :class:`Layout` of class ``kind`` for a rank-``ndim`` tensor.

    - ``kind``: one of ``LAYOUT_CLASSES`` (the tensor rows of ``vocabulary.LAYOUTS``).
    - ``ndim``: the tensor's rank.

    Shrinks towards the mildest layout of the class: a plain transpose, a step
    of 2 in the last dim, one element of padding, an offset of one element.
    """
    row = next((r for r in vocabulary.LAYOUTS.rows if r.name == kind and r.scope == "tensor"), None)
    if row is None:
        check_one_of("layouts", "kind", kind, vocabulary.LAYOUTS.names(scope="tensor"))
    return drawn_layouts(row, ndim)
