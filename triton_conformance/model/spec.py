"""The example a cell draws, as plain data: a :class:`Spec` and each input's :class:`Layout`.

A spec holds dims, dtypes, a layout per input, the value class, the mask class,
scalar values and a seed.  Tensors are built from it afterwards
(:mod:`triton_conformance.strategies._internal.tensors`), so a failure shrinks
to a short, readable spec.  The strides a layout implies are computed by
:func:`strides_for`, without torch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import triton_conformance.model.vocabulary as vocabulary

__all__ = ["LAYOUT_CLASSES", "GUARD_ELEMENTS", "Layout", "Spec", "strides_for", "layout_applies"]

# The layout classes of one tensor, in matrix order: the names of the tensor rows of the one layout
# table, ``vocabulary.LAYOUTS`` (what each draws and the sentence the report shows are there).
LAYOUT_CLASSES = vocabulary.LAYOUTS.names(scope="tensor")
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
    """Whether layout class ``kind`` means anything for a tensor of rank ``ndim`` (its row says)."""
    return vocabulary.LAYOUTS[kind].applies(ndim, is_input=is_input)


def strides_for(shape: tuple[int, ...], layout: Layout) -> tuple[tuple[int, ...], int, int]:
    """Return ``(strides, storage_offset, storage_elements)`` for ``shape`` in ``layout``."""
    shape = tuple(shape)
    try:
        return _cached_strides(shape, layout)  # an example asks for each input's several times
    except TypeError:  # a layout built with lists: unhashable
        return _strides(shape, layout)


def _strides(shape: tuple[int, ...], layout: Layout) -> tuple[tuple[int, ...], int, int]:
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


_cached_strides = functools.lru_cache(maxsize=4096)(_strides)

CONTIGUOUS = Layout()  # the default layout, built once: specs compare against it at every hash


@dataclass(frozen=True)
class Spec:
    """One example: everything needed to rebuild the exact input tensors."""

    dims: dict[str, int]
    dtypes: dict[str, str]
    layouts: dict[str, Layout]
    scalars: dict[str, float] = field(default_factory=dict)
    values: str = "ordinary"
    mask: str | None = None
    seed: int = 0

    def __repr__(self) -> str:
        parts = [f"dims={self.dims!r}", f"dtypes={self.dtypes!r}"]
        odd = {k: v for k, v in self.layouts.items() if v != CONTIGUOUS}
        parts.append(f"layouts={odd!r}" if odd else "layouts={}")
        if self.scalars:
            parts.append(f"scalars={self.scalars!r}")
        if self.values != "ordinary":
            parts.append(f"values={self.values!r}")
        if self.mask is not None:
            parts.append(f"mask={self.mask!r}")
        parts.append(f"seed={self.seed!r}")
        return f"Spec({', '.join(parts)})"

    def key(self) -> tuple:
        """The spec's identity, hashable: a layout left contiguous is the same as none, and scalars compare as
        they print (``-0.0`` is not ``0.0``)."""
        return (tuple(sorted(self.dims.items())), tuple(sorted(self.dtypes.items())),
                tuple(sorted((k, v) for k, v in self.layouts.items() if v != CONTIGUOUS)),
                tuple(sorted((k, repr(v)) for k, v in self.scalars.items())), self.values, self.mask, self.seed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def layout(self, name: str) -> Layout:
        return self.layouts.get(name, CONTIGUOUS)

    def to_dict(self) -> dict[str, Any]:
        return {"dims": dict(self.dims), "dtypes": dict(self.dtypes),
                "layouts": {k: v.to_dict() for k, v in self.layouts.items()},
                "scalars": dict(self.scalars), "values": self.values, "mask": self.mask,
                "seed": self.seed}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Spec":
        return cls(dims=dict(d["dims"]), dtypes=dict(d["dtypes"]),
                   layouts={k: Layout.from_dict(v) for k, v in d.get("layouts", {}).items()},
                   scalars=dict(d.get("scalars", {})), values=d.get("values", "ordinary"),
                   mask=d.get("mask"), seed=d.get("seed", 0))

    def elements(self) -> int:
        """Product of all dims: the size of the example, for reports."""
        n = 1
        for v in self.dims.values():
            n *= v
        return n
