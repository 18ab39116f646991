"""The catalogue of cells: which dimensions and classes there are, their order, and what each one means.

A cell id is ``"dimension:class"`` (``"layout:transposed"``) or a bare
dimension for a single-cell one (``"memory"``).  The engine's cell kinds
(:mod:`triton_conformance.conformance.kinds`) each declare the classes they
own; the :class:`Catalogue` built from them orders the matrix and explains
every cell in the report's legend.  It travels in the results JSON, so a
report rendered later needs no engine to order and explain its cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["CellClass", "Dimension", "Catalogue", "split_cell", "cell_id", "split_cell_id"]


def cell_id(subject: str, cell: str) -> str:
    """``"add[layout:transposed]"``: a subject's cell as node ids, the terminal, the reports and
    ``--conformance-cell`` name it."""
    return f"{subject}[{cell}]"


def split_cell_id(name: str) -> tuple[str, str] | None:
    """``"add[layout:transposed]"`` -> ``("add", "layout:transposed")``; None for a name that is no cell id."""
    subject, bracket, cell = name.partition("[")
    if not subject or not bracket or not cell.endswith("]"):
        return None
    return subject, cell[:-1]


def split_cell(cell: str) -> tuple[str, str]:
    """``"layout:transposed"`` -> ``("layout", "transposed")``; ``"memory"`` -> ``("memory", "")``."""
    dimension, _, value = cell.partition(":")
    return dimension, value


@dataclass(frozen=True)
class CellClass:
    """One class of a dimension, with the one line the report's legend shows for it."""

    value: str
    summary: str

    def cell(self, dimension: str) -> str:
        return f"{dimension}:{self.value}" if self.value else dimension


@dataclass(frozen=True)
class Dimension:
    """A column group of the matrix: its classes in order (one class with value ``""`` for a bare cell)."""

    name: str
    summary: str
    classes: tuple[CellClass, ...]

    def merged(self, other: "Dimension") -> "Dimension":
        """This dimension with ``other``'s classes appended (two kinds may share a dimension)."""
        known = {c.value for c in self.classes}
        return Dimension(self.name, self.summary or other.summary,
                         self.classes + tuple(c for c in other.classes if c.value not in known))


@dataclass(frozen=True)
class Catalogue:
    """Dimensions in matrix order; a cell not in it sorts after every known one."""

    dimensions: tuple[Dimension, ...] = ()

    @classmethod
    def of(cls, dimensions: Iterable[Dimension]) -> "Catalogue":
        """Merge dimensions of the same name, keeping the order each name first appears in."""
        merged: dict[str, Dimension] = {}
        for d in dimensions:
            merged[d.name] = merged[d.name].merged(d) if d.name in merged else d
        return cls(tuple(merged.values()))

    def sort_key(self, cell: str) -> tuple[int, int, str]:
        dimension, value = split_cell(cell)
        names = [d.name for d in self.dimensions]
        if dimension not in names:
            return len(names), 0, cell
        values = [c.value for c in self.dimensions[names.index(dimension)].classes]
        return names.index(dimension), values.index(value) if value in values else len(values), value

    def sorted(self, cells: Iterable[str]) -> list[str]:
        return sorted(set(cells), key=self.sort_key)

    def describe(self, cell: str) -> str:
        """The legend's line for ``cell``: what its dimension and class test ("" if unknown)."""
        dimension, value = split_cell(cell)
        for d in self.dimensions:
            if d.name == dimension:
                for c in d.classes:
                    if c.value == value:
                        return c.summary if not value else f"{d.summary}: {c.summary}" if d.summary else c.summary
        return ""

    def to_dict(self) -> list[dict[str, Any]]:
        return [{"name": d.name, "summary": d.summary, "classes": [[c.value, c.summary] for c in d.classes]}
                for d in self.dimensions]

    @classmethod
    def from_dict(cls, data: Any) -> "Catalogue":
        if not isinstance(data, list):
            return cls()
        return cls(tuple(Dimension(d["name"], d.get("summary", ""), tuple(CellClass(v, s) for v, s in d["classes"]))
                         for d in data if isinstance(d, dict) and "name" in d))
