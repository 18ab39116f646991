"""One defect, one finding: failing cells of a subject that found the same thing, grouped.

A reduction that divides by zero on an empty input fails every cell whose
search can reach N=0, each shrunk to the same crash at N=0: twelve cells, one
defect.  The reports list it once, naming its cells.  Two cells found the same
thing when their subject, outcome, finding kind, output (or gradient) and
shrunk dims are equal; a
cell without a shrunk counterexample (a timeout, a harness error) is a group
of its own, since nothing says it is the same as another.

Plain data only: results as the JSON holds them (or ``CellResult``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from triton_conformance.model.outcomes import FAILING

__all__ = ["FindingGroup", "finding_key", "finding_groups"]


def _as_dict(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) else result.to_dict()


def _shrunk_dims(result: dict[str, Any]) -> dict[str, Any] | None:
    cx = result.get("counterexample")
    if not isinstance(cx, dict) or cx.get("shrunk") is False:
        return None
    dims = cx.get("dims")
    return dims if isinstance(dims, dict) else None


def finding_key(result: Any) -> tuple | None:
    """What makes two failing cells one finding: (subject, outcome, finding, the output or gradient it is
    on, shrunk dims); None for a cell with no shrunk dims (it is a finding of its own)."""
    r = _as_dict(result)
    dims = _shrunk_dims(r)
    if dims is None:
        return None
    details = r.get("details") or {}
    on = details.get("output") or details.get("gradient")
    return (r.get("subject"), r.get("device"), r.get("outcome"), r.get("finding"), on,
            json.dumps(dims, sort_keys=True, default=str))


@dataclass(frozen=True)
class FindingGroup:
    """Failing cells of one subject that found the same thing; ``cells[0]`` stands for them all."""

    cells: tuple[dict[str, Any], ...]

    @property
    def first(self) -> dict[str, Any]:
        return self.cells[0]

    @property
    def others(self) -> tuple[dict[str, Any], ...]:
        return self.cells[1:]


def finding_groups(results: Iterable[Any], order: Callable[[dict[str, Any]], Any] | None = None
                   ) -> list[FindingGroup]:
    """The failing cells of ``results`` as findings: cells with the same :func:`finding_key` together, in
    the order of each group's first cell (``order``: a sort key over result dicts; default as given)."""
    failing = [r for r in map(_as_dict, results) if r.get("outcome") in FAILING]
    if order is not None:
        failing.sort(key=order)
    groups: dict[Any, list[dict[str, Any]]] = {}
    for i, r in enumerate(failing):
        key = finding_key(r)
        groups.setdefault(key if key is not None else ("alone", i), []).append(r)
    return [FindingGroup(tuple(cells)) for cells in groups.values()]
