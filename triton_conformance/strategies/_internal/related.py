"""Drawing dims that a contract relates (``C = G * Cg``, ``C % G == 0``): construct, never filter.

A derived dim is never drawn.  Its sources are, each within the room the derived dim's range (and the
element budget) leaves it after the other sources, and the derived dim is then built from them: the
product of a :class:`~triton_conformance.model.relations.Product`'s factors, a drawn multiple of a
:class:`~triton_conformance.model.relations.Divisible`'s divisor.  The shape classes apply to the drawn
sources (a non-power-of-two ``Cg``, a block boundary ``G``) and to the multiple; the out-of-range cell
also draws specs that break a relation on purpose (:func:`break_relation`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from hypothesis import strategies as st

from triton_conformance.model.contract import Contract
from triton_conformance.model.relations import Divisible, Product, derived_dims
from triton_conformance.strategies._internal.cached import integers
from triton_conformance.strategies._internal.sizes import non_power_of_two_sizes, sizes

__all__ = ["source_bounds", "derive", "break_relation", "unforced", "breakable", "broken_relations_strategy"]


def _relations_from(contract: Contract, sym: str) -> list[Any]:
    return [rel for rel in contract.relations if sym in rel.sources]


def source_bounds(contract: Contract, sym: str, out: dict[str, int], lo: int, cap: int,
                  room: Callable[[str], int], floors: dict[str, int]) -> tuple[int, int]:
    """``[lo, cap]`` for source dim ``sym`` narrowed so that every relation it feeds can still hold: the
    other sources take their drawn values, or their minimum (for the cap) and maximum (for the floor) where
    not drawn yet.  ``room(dim)``: the most a dim may be, its range and the element budget considered;
    ``floors``: the least a derived dim must reach (a class pinned it past a block)."""
    dims = contract.dims
    for rel in _relations_from(contract, sym):
        target = dims[rel.dim]
        if rel.dim in out:  # pinned by a cell (out of range on purpose): the sources are drawn freely
            continue
        floor = max(target.min, floors.get(rel.dim, 0))
        top = max(floor, min(target.max, room(rel.dim)))
        if isinstance(rel, Product):
            others = [f for f in rel.factors if f != sym]
            least = math.prod(max(out.get(f, dims[f].min), 1) for f in others)
            most = math.prod(out.get(f, dims[f].max) for f in others)
            cap = min(cap, top // least)
            if any(f not in out for f in others):  # not the last: [floor, top] must hold a multiple of the rest
                drawn = math.prod(max(out[f], 1) for f in others if f in out)
                cap = min(cap, max(1, (top - floor + 1) // drawn))
            if most:
                lo = max(lo, -(-floor // most))
        else:  # a divisor: [floor, top] holds a multiple of any divisor up to its length
            cap = min(cap, max(1, top - floor + 1))
    return lo, max(lo, cap)


def derive(draw: Any, contract: Contract, out: dict[str, int], shape_class: str,
           room: Callable[[str], int], floors: dict[str, int]) -> dict[str, int]:
    """``out`` with every derived dim built from its drawn sources (at least its floor, where a class pinned
    one); where a cell pinned a derived dim's value (to 1 or 0, the only dim that could take it), its
    sources are moved to divisors of it instead (:func:`_fit_sources`)."""
    for rel in contract.relations:
        if rel.dim in out:
            _fit_sources(rel, out)
            continue
        if isinstance(rel, Product):
            out[rel.dim] = rel.value(out)
            continue
        target, by = contract.dims[rel.dim], max(out[rel.by], 1)
        lo = -(-max(target.min, floors.get(rel.dim, 0)) // by)
        hi = max(lo, min(target.max, max(room(rel.dim), floors.get(rel.dim, 0))) // by)
        if shape_class == "tiny":
            k = draw(integers(lo, max(lo, min(hi, 3))))
        elif shape_class == "non-pow2":
            k = draw(non_power_of_two_sizes(min_value=lo, max_value=hi))
        else:
            k = draw(sizes(min_value=lo, max_value=hi))
        out[rel.dim] = k * by
    return out


def _fit_sources(rel: Any, out: dict[str, int]) -> None:
    """Move ``rel``'s drawn sources so that it holds for its pinned derived dim: a divisor becomes its
    greatest common divisor with the dim; a product's factors take divisors of it in turn, the last what is
    left (a source may then leave its range, as the pinned dim itself may)."""
    value = out[rel.dim]
    if not value:
        return
    if isinstance(rel, Divisible):
        out[rel.by] = math.gcd(max(out[rel.by], 1), value)
        return
    left = value
    for f in rel.factors[:-1]:
        out[f] = math.gcd(max(out[f], 1), left)
        left //= out[f]
    out[rel.factors[-1]] = left


def break_relation(contract: Contract, rel: Any, dims: dict[str, int]) -> dict[str, int]:
    """``dims`` moved so that ``rel`` no longer holds (for the out-of-range cell): a product one off, or a
    dim that leaves a remainder of 1 by a divisor of at least 2."""
    out = dict(dims)
    target = contract.dims[rel.dim]
    if isinstance(rel, Product):
        value = rel.value(out)
        out[rel.dim] = value + 1 if value + 1 <= target.max or value <= target.min else value - 1
    elif isinstance(rel, Divisible):
        by = max(out[rel.by], 2)
        out[rel.by] = by
        out[rel.dim] = max(out[rel.dim] // by, 1) * by + 1
    return out


def unforced(contract: Contract, syms: list[str]) -> list[str]:
    """``syms`` less the derived dims, which a cell moves through their sources (unless only they remain)."""
    derived = derived_dims(contract.relations)
    return [s for s in syms if s not in derived] or syms


def breakable(contract: Contract) -> tuple[Any, ...]:
    """The relations a spec can break inside the dims' ranges."""
    return tuple(rel for rel in contract.relations
                 if isinstance(rel, Product) or contract.dims[rel.by].max >= 2)


def broken_relations_strategy(contract: Contract):
    """Strategy for None (break no relation) or a relation to break."""
    rels = breakable(contract)
    return st.one_of(st.none(), st.sampled_from(rels)) if rels else st.none()
