"""Memory layouts: how a logical tensor sits in its storage.

A :class:`Layout` is a small value object (it shrinks and prints well); the
strides it implies are computed by :func:`strides_for`, without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from triton_conformance.strategies._internal.validation import check_one_of

__all__ = ["LAYOUT_CLASSES", "Layout", "layouts", "strides_for", "layout_applies", "GUARD_ELEMENTS"]

LAYOUT_CLASSES = ("contiguous", "transposed", "sliced", "padded", "offset", "broadcast", "size1")
# Elements of sentinel after every input, so a read past the end changes the answer.
GUARD_ELEMENTS = 256


@dataclass(frozen=True, slots=True)
class Layout:
    """One tensor's layout.

    - ``kind``: the layout class it was drawn for (a label, for reports).
    - ``perm``: physical dim order, outermost first (``(1, 0)`` is a transpose).
    - ``steps``: per-dim step of a step-slice, leaving gaps between elements.
    - ``pad``: extra elements after each innermost row.
    - ``offset``: storage offset in elements (1 is misaligned).
    - ``broadcast``: dims given stride 0.
    - ``odd_stride``: stride given to size-1 dims (any stride is legal there).
    """

    kind: str = "contiguous"
    perm: tuple[int, ...] | None = None
    steps: tuple[int, ...] | None = None
    pad: int = 0
    offset: int = 0
    broadcast: tuple[int, ...] = ()
    odd_stride: int = 0

    def __repr__(self) -> str:
        fields = [repr(self.kind)]
        for name in ("perm", "steps", "pad", "offset", "broadcast", "odd_stride"):
            value = getattr(self, name)
            if value not in (None, 0, ()):
                fields.append(f"{name}={value!r}")
        return f"Layout({', '.join(fields)})"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "perm": self.perm, "steps": self.steps, "pad": self.pad,
                "offset": self.offset, "broadcast": self.broadcast, "odd_stride": self.odd_stride}

    @classmethod
    def from_dict(cls, d: dict) -> "Layout":
        return cls(kind=d["kind"], perm=tuple(d["perm"]) if d.get("perm") else None,
                   steps=tuple(d["steps"]) if d.get("steps") else None, pad=d.get("pad", 0),
                   offset=d.get("offset", 0), broadcast=tuple(d.get("broadcast", ())),
                   odd_stride=d.get("odd_stride", 0))


def layout_applies(kind: str, ndim: int, *, is_input: bool = True) -> bool:
    """Whether layout class ``kind`` means anything for a tensor of rank ``ndim``."""
    if kind in ("transposed", "padded"):
        return ndim >= 2
    if kind == "broadcast":
        return is_input and ndim >= 1
    return True


def strides_for(shape: tuple[int, ...], layout: Layout) -> tuple[tuple[int, ...], int, int]:
    """Return ``(strides, storage_offset, storage_elements)`` for ``shape`` in ``layout``."""
    n = len(shape)
    perm = layout.perm or tuple(range(n))
    steps = layout.steps or (1,) * n
    strides = [0] * n
    running = 1
    for position, d in enumerate(reversed(perm)):  # innermost first
        if d in layout.broadcast:
            continue
        strides[d] = running * steps[d]
        extent = shape[d] * steps[d] + (layout.pad if position == 0 else 0)
        running *= max(extent, 1)
    if layout.odd_stride:
        for d in range(n):
            if shape[d] == 1:
                strides[d] = layout.odd_stride
    if any(s == 0 for s in shape):
        return tuple(strides), layout.offset, layout.offset
    last = sum((s - 1) * abs(st_) for s, st_ in zip(shape, strides))
    return tuple(strides), layout.offset, layout.offset + last + 1


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
