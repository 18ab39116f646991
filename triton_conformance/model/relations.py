"""Relations between a contract's dims: ``C = G * Cg`` (:class:`Product`) and ``C % G == 0`` (:class:`Divisible`).

A relation names one **derived** dim and the dims it is built from.  The strategies draw the others and
build the derived dim from them (construct, never filter), so every drawn spec satisfies every relation;
the out-of-range cell also breaks a relation on purpose, and a spec that breaks one lies outside the
contract.  A dim that appears in no input's shape but in a relation (``G``, ``Cg``) is handed to the
launcher and the oracle by keyword, beside the scalars: a group norm's ``num_groups``.

:func:`check_relations` validates a contract's declaration (:class:`~triton_conformance.errors.InvalidContract`
naming the relation and what was expected).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from triton_conformance.model.inputs import Dim, _fail

__all__ = ["Product", "Divisible", "check_relations", "relate", "broken_relations", "derived_dims"]


@dataclass(frozen=True, slots=True)
class Product:
    """``dim`` is the product of ``factors``: ``Product("C", ("G", "Cg"))`` is C = G x Cg."""

    dim: str
    factors: tuple[str, ...]

    def __post_init__(self) -> None:
        factors = (self.factors,) if isinstance(self.factors, str) else tuple(self.factors)
        if not isinstance(self.dim, str) or len(factors) < 2 or not all(isinstance(f, str) for f in factors):
            raise _fail("Product", "factors", self.factors, f"two or more dim names whose product is {self.dim!r}")
        object.__setattr__(self, "factors", factors)

    @property
    def sources(self) -> tuple[str, ...]:
        return self.factors

    def value(self, dims: Mapping[str, int]) -> int:
        """The derived dim's value for the sources in ``dims``."""
        return math.prod(dims[f] for f in self.factors)

    def holds(self, dims: Mapping[str, int]) -> bool:
        return dims[self.dim] == self.value(dims)

    def describe(self) -> str:
        return f"{self.dim} == {' * '.join(self.factors)}"


@dataclass(frozen=True, slots=True)
class Divisible:
    """``dim`` is a multiple of ``by``: ``Divisible("C", by="G")`` is C % G == 0."""

    dim: str
    by: str

    def __post_init__(self) -> None:
        if not isinstance(self.dim, str) or not isinstance(self.by, str) or self.dim == self.by:
            raise _fail("Divisible", "by", self.by, f"the name of a dim other than {self.dim!r} that divides it")

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.by,)

    def value(self, dims: Mapping[str, int]) -> int:
        """The derived dim moved to a multiple of ``by`` (down, to no less than ``by``): what a change of
        ``by`` or of the dim itself leaves, where the relation must still hold."""
        by = max(dims[self.by], 1)
        return max(by, dims[self.dim] // by * by) if dims[self.dim] else 0

    def holds(self, dims: Mapping[str, int]) -> bool:
        return dims[self.by] > 0 and dims[self.dim] % dims[self.by] == 0

    def describe(self) -> str:
        return f"{self.dim} % {self.by} == 0"


RELATIONS = (Product, Divisible)


def _feasible(rel: Any, dims: Mapping[str, Dim]) -> bool:
    d = dims[rel.dim]
    if isinstance(rel, Product):
        return math.prod(dims[f].min for f in rel.factors) <= d.max and math.prod(
            dims[f].max for f in rel.factors) >= d.min
    by = dims[rel.by]
    return any(-(-d.min // b) * b <= d.max for b in range(by.min, min(by.max, d.max, by.min + 4096) + 1))


def check_relations(relations: Any, dims: Mapping[str, Dim]) -> tuple[Any, ...]:
    """``relations`` validated against ``dims``: each a Product or Divisible of declared dims, each dim
    derived by one relation at most, a derived dim built from none but free dims, the ranges able to meet."""
    rels = (relations,) if isinstance(relations, RELATIONS) else tuple(relations or ())
    derived: dict[str, Any] = {}
    for rel in rels:
        if not isinstance(rel, RELATIONS):
            raise _fail("Contract", "relations", rel, "Product(dim, factors) or Divisible(dim, by=...) relations")
        for sym in (rel.dim, *rel.sources):
            if sym not in dims:
                raise _fail("Contract", "relations", rel.describe(), f"dims declared in dims={sorted(dims)}")
        if rel.dim in derived:
            raise _fail("Contract", "relations", rel.describe(), f"one relation per derived dim ({rel.dim!r} is "
                        f"already {derived[rel.dim].describe()})")
        derived[rel.dim] = rel
        if isinstance(rel, Divisible) and dims[rel.by].min < 1:
            raise _fail("Contract", f"dims[{rel.by!r}]", dims[rel.by], f"a divisor's range to start at 1 or more "
                        f"({rel.describe()})")
        if not _feasible(rel, dims):
            raise _fail("Contract", "relations", rel.describe(), "dims whose ranges let it hold (no values in "
                        f"{ {s: dims[s] for s in (rel.dim, *rel.sources)} } satisfy it)")
    for rel in rels:
        chained = [s for s in rel.sources if s in derived]
        if chained:
            raise _fail("Contract", "relations", rel.describe(), f"sources that no other relation derives "
                        f"({chained} are derived: declare the relation from their own sources)")
    return rels


def derived_dims(relations: tuple[Any, ...]) -> set[str]:
    return {rel.dim for rel in relations}


def relate(relations: tuple[Any, ...], dims: Mapping[str, int]) -> dict[str, int]:
    """``dims`` with every derived dim rebuilt from its sources, so that every relation holds."""
    out = dict(dims)
    for rel in relations:
        if all(s in out for s in rel.sources) and rel.dim in out:
            out[rel.dim] = rel.value(out)
    return out


def broken_relations(relations: tuple[Any, ...], dims: Mapping[str, int]) -> list[str]:
    """The relations ``dims`` breaks, as their descriptions with the values (``"C % G == 0 (C=6, G=4)"``)."""
    return [f"{rel.describe()} ({', '.join(f'{s}={dims[s]}' for s in (rel.dim, *rel.sources))})"
            for rel in relations if not rel.holds(dims)]
