"""Flake rates: cells whose outcome differs between runs at the same commit and device, each judged against
its declared false-positive rate by a one-sided binomial test.

The counting is SQL (one aggregation over the window's cells, through the covering index
``cells_by_run_cell``), so a query over 10,000 runs returns one row per cell and device, never the cells' rows.
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa

from triton_conformance.history.location import FLAKE_LEVEL, FLAKE_RUNS
from triton_conformance.history.queries import cell_filter
from triton_conformance.history.schema import cells, runs
from triton_conformance.history.store import HistoryStore
from triton_conformance.model.cells import cell_id
from triton_conformance.model.outcomes import OUTCOMES
from triton_conformance.oracles.statistics import log_tail

__all__ = ["FLAKE_LEVEL", "FLAKE_RUNS", "flaky", "flips_p_value"]


def flips_p_value(flips: int, runs_: int, declared: float) -> float:
    """P(at least ``flips`` of ``runs_`` runs flip) when each flips with probability ``declared``: how
    improbable the count is under the declared rate.  A deterministic cell declares 0: any flip has p 0."""
    if flips <= 0:
        return 1.0
    if declared <= 0.0:
        return 0.0
    if declared >= 1.0 or flips <= runs_ * declared:
        return 1.0  # at or below the expected count: no evidence against the declared rate
    return min(1.0, math.exp(log_tail(flips, runs_, declared, +1)))


def _window(where: list[sa.ColumnElement], last: int | None) -> sa.Subquery:
    """The runs a flake count looks at: complete runs matching ``where``, each device's newest ``last``."""
    if last is None:
        return sa.select(runs.c.id, runs.c.device, runs.c.commit).where(*where).subquery("window")
    rank = sa.func.row_number().over(partition_by=runs.c.device,
                                     order_by=(runs.c.started.desc(), runs.c.id.desc())).label("rank")
    ranked = sa.select(runs.c.id, runs.c.device, runs.c.commit, rank).where(*where).subquery("ranked")
    return sa.select(ranked.c.id, ranked.c.device, ranked.c.commit).where(ranked.c.rank <= last).subquery("window")


def _per_cell(window: sa.Subquery, cell_where: list[sa.ColumnElement]) -> sa.Select:
    """One row per cell and device: runs at its commits recorded more than once, flips (runs whose outcome
    is not its commit's most common one), the declared rate, and a count per outcome."""
    per_outcome = (sa.select(cells.c.subject, cells.c.cell, window.c.device, window.c.commit, cells.c.outcome,
                             sa.func.count().label("n"), sa.func.max(cells.c.false_positive_rate).label("fpr"))
                   .select_from(cells.join(window, cells.c.run_id == window.c.id))
                   .where(*cell_where)
                   .group_by(cells.c.subject, cells.c.cell, window.c.device, window.c.commit, cells.c.outcome)
                   .subquery("per_outcome"))
    o = per_outcome.c
    per_commit = (sa.select(o.subject, o.cell, o.device, sa.func.sum(o.n).label("runs"),
                            sa.func.max(o.n).label("mode"), sa.func.max(o.fpr).label("fpr"),
                            *(sa.func.sum(sa.case((o.outcome == name, o.n), else_=0)).label(f"o{i}")
                              for i, name in enumerate(OUTCOMES)))
                  .group_by(o.subject, o.cell, o.device, o.commit)
                  .having(sa.func.sum(o.n) > 1)
                  .subquery("per_commit"))
    c = per_commit.c
    return (sa.select(c.subject, c.cell, c.device, sa.func.sum(c.runs).label("runs"),
                      sa.func.sum(c.runs - c.mode).label("flips"), sa.func.max(c.fpr).label("fpr"),
                      *(sa.func.sum(c[f"o{i}"]).label(f"o{i}") for i in range(len(OUTCOMES))))
            .group_by(c.subject, c.cell, c.device))


def flaky(store: HistoryStore, *, device: str | None = None, names: list[str] | None = None,
          include_stable: bool = False, last: int | None = FLAKE_RUNS, level: float = FLAKE_LEVEL
          ) -> list[dict[str, Any]]:
    """Cells whose outcome differs between runs at the same commit and device.

    Each row: cell, device, ``runs`` (its runs at commits recorded more than once), ``flips`` (of those, the
    runs whose outcome differs from the commit's most common one), ``rate`` = flips / runs, the outcomes
    seen, the declared ``false_positive_rate`` of a stochastic cell (None: a deterministic one, which
    declares 0), ``p_value`` = P(this many flips or more | the declared rate), and ``flagged``: p_value below
    ``level`` / the number of stochastic cells tested (Bonferroni), so a stochastic cell that flips as
    often as it may is not flagged, while a deterministic cell that flips at all is.
    ``include_stable``: the cells that never flipped too; ``last``: only each device's newest ``last`` runs
    (None: every recorded run).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r}, expected a probability strictly between 0 and 1")
    if last is not None and last < 1:
        raise ValueError(f"last={last!r}, expected a positive count of runs (or None: every run)")
    where = [runs.c.complete.is_(True)] + ([runs.c.device == device] if device else [])
    cell_where = [sa.or_(*(cell_filter(n) for n in names))] if names else []
    with store.engine.connect() as conn:
        rows = conn.execute(_per_cell(_window(where, last), cell_where)).all()
    tested = max(1, sum(1 for r in rows if r.fpr is not None))
    out = []
    for r in sorted(rows, key=lambda r: (r.subject, r.cell, r.device)):
        flips, total = int(r.flips), int(r.runs)
        if flips == 0 and not include_stable:
            continue
        p_value = flips_p_value(flips, total, r.fpr or 0.0)
        out.append({"cell": cell_id(r.subject, r.cell), "device": r.device, "runs": total, "flips": flips,
                    "rate": flips / total, "outcomes": {name: int(r._mapping[f"o{i}"])
                                                        for i, name in enumerate(OUTCOMES) if r._mapping[f"o{i}"]},
                    "false_positive_rate": r.fpr, "p_value": p_value, "level": level / tested,
                    "flagged": p_value < level / tested})
    return out
