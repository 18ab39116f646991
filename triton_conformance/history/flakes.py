"""Flake rates: cells whose outcome differs between runs at the same commit and device, each judged against
its declared false-positive rate by a one-sided binomial test.

The counting is SQL and reads ``tallies`` (each cell's outcome counts per device and commit, kept as runs
are recorded): one row per commit and cell rather than one per run and cell.  Only a commit whose runs are
partly in the window (the oldest in it, typically) is counted from the cells of its runs in the window.
A query over 10,000 runs returns one row per cell and device, never the cells' rows.
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa

from triton_conformance.history.location import FLAKE_LEVEL, FLAKE_RUNS
from triton_conformance.history.queries import cell_filter
from triton_conformance.history.schema import TALLIED, cells, runs, tallies, tally_column
from triton_conformance.history.store import HistoryStore
from triton_conformance.model.cells import cell_id
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


def _ranked(where: list[sa.ColumnElement], last: int | None) -> sa.Subquery:
    """The runs a flake count looks at: complete runs matching ``where``, each device's newest ``last``; each
    with ``whole``: 1 when every complete run of its device and commit is in the window, else 0."""
    commit = sa.func.coalesce(runs.c.commit, "")
    order = (runs.c.started.desc(), runs.c.id.desc())
    ranked = sa.select(runs.c.id, runs.c.device, commit.label("commit"),
                       sa.func.row_number().over(partition_by=runs.c.device, order_by=order).label("rank"),
                       sa.func.count().over(partition_by=(runs.c.device, commit)).label("recorded")
                       ).where(*where).subquery("ranked")
    inside = sa.select(ranked.c.id, ranked.c.device, ranked.c.commit, ranked.c.recorded)
    if last is not None:
        inside = inside.where(ranked.c.rank <= last)
    inside = inside.subquery("inside")
    return sa.select(inside.c.id, inside.c.device, inside.c.commit,
                     sa.case((sa.func.count().over(partition_by=(inside.c.device, inside.c.commit))
                              == inside.c.recorded, 1), else_=0).label("whole")).subquery("window")


def _from_cells(window: sa.Subquery, cell_where: list[sa.ColumnElement]) -> sa.Select:
    """Per cell, device and commit, from the window's cells: runs, ``mode`` (its most common outcome's count),
    the declared rate and a count per outcome: what ``tallies`` keeps (the slow way, for a commit only part of
    whose runs are in the window, and the reference the tests compare the tallies with)."""
    per_outcome = (sa.select(cells.c.subject, cells.c.cell, window.c.device, window.c.commit, cells.c.outcome,
                             sa.func.count().label("n"), sa.func.max(cells.c.false_positive_rate).label("fpr"))
                   .select_from(cells.join(window, cells.c.run_id == window.c.id))
                   .where(*cell_where)
                   .group_by(cells.c.subject, cells.c.cell, window.c.device, window.c.commit, cells.c.outcome)
                   .subquery("per_outcome"))
    o = per_outcome.c
    return (sa.select(o.subject, o.cell, o.device, sa.func.sum(o.n).label("runs"), sa.func.max(o.n).label("mode"),
                      sa.func.max(o.fpr).label("fpr"),
                      *(sa.func.sum(sa.case((o.outcome == name, o.n), else_=0)).label(tally_column(name))
                        for name in TALLIED))
            .group_by(o.subject, o.cell, o.device, o.commit))


def _from_tallies(window: sa.Subquery, names: list[str] | None) -> sa.Select:
    """The same rows from ``tallies``, for the commits all of whose runs are in the window (one row per commit
    and cell, where the cells table has one per run)."""
    groups = (sa.select(window.c.device, window.c.commit).where(window.c.whole == 1)
              .group_by(window.c.device, window.c.commit).having(sa.func.count() > 1).subquery("groups"))
    t = tallies.c
    query = (sa.select(t.subject, t.cell, t.device, t.runs, t.mode, t.fpr, *(t[tally_column(o)] for o in TALLIED))
             .select_from(tallies.join(groups, sa.and_(t.device == groups.c.device, t.commit == groups.c.commit))))
    return query.where(sa.or_(*(cell_filter(n, tallies) for n in names))) if names else query


def _per_cell(where: list[sa.ColumnElement], names: list[str] | None, last: int | None, from_cells: bool
              ) -> sa.Select:
    """One row per cell and device: runs at its commits recorded more than once, flips (runs whose outcome
    is not its commit's most common one), the declared rate, and a count per outcome."""
    window = _ranked(where, last)
    cell_where = [sa.or_(*(cell_filter(n) for n in names))] if names else []
    if from_cells:
        per_commit = _from_cells(window, cell_where).subquery("per_commit")
    else:
        part = window.select().where(window.c.whole == 0).subquery("part")
        per_commit = sa.union_all(_from_tallies(window, names), _from_cells(part, cell_where)).subquery("per_commit")
    c = per_commit.c
    return (sa.select(c.subject, c.cell, c.device, sa.func.sum(c.runs).label("runs"),
                      sa.func.sum(c.runs - c.mode).label("flips"), sa.func.max(c.fpr).label("fpr"),
                      *(sa.func.sum(c[tally_column(o)]).label(tally_column(o)) for o in TALLIED))
            .where(c.runs > 1)
            .group_by(c.subject, c.cell, c.device))


def flaky(store: HistoryStore, *, device: str | None = None, names: list[str] | None = None,
          include_stable: bool = False, last: int | None = FLAKE_RUNS, level: float = FLAKE_LEVEL,
          from_cells: bool = False) -> list[dict[str, Any]]:
    """Cells whose outcome differs between runs at the same commit and device.

    Each row: cell, device, ``runs`` (its runs at commits recorded more than once), ``flips`` (of those, the
    runs whose outcome differs from the commit's most common one), ``rate`` = flips / runs, the outcomes
    seen, the declared ``false_positive_rate`` of a stochastic cell (None: a deterministic one, which
    declares 0), ``p_value`` = P(this many flips or more | the declared rate), and ``flagged``: p_value below
    ``level`` / the number of stochastic cells tested (Bonferroni), so a stochastic cell that flips as
    often as it may is not flagged, while a deterministic cell that flips at all is.
    ``include_stable``: the cells that never flipped too; ``last``: only each device's newest ``last`` runs
    (None: every recorded run).  ``from_cells``: count from the cells table alone, not from the tallies kept
    as runs are recorded (the same answer, slowly: the reference the tests compare with).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r}, expected a probability strictly between 0 and 1")
    if last is not None and last < 1:
        raise ValueError(f"last={last!r}, expected a positive count of runs (or None: every run)")
    where = [runs.c.complete.is_(True)] + ([runs.c.device == device] if device else [])
    with store.engine.connect() as conn:
        rows = conn.execute(_per_cell(where, names, last, from_cells)).all()
    tested = max(1, sum(1 for r in rows if r.fpr is not None))
    out = []
    for r in sorted(rows, key=lambda r: (r.subject, r.cell, r.device)):
        flips, total = int(r.flips), int(r.runs)
        if flips == 0 and not include_stable:
            continue
        p_value = flips_p_value(flips, total, r.fpr or 0.0)
        out.append({"cell": cell_id(r.subject, r.cell), "device": r.device, "runs": total, "flips": flips,
                    "rate": flips / total, "outcomes": {name: int(r._mapping[tally_column(name)])
                                                        for name in TALLIED if r._mapping[tally_column(name)]},
                    "false_positive_rate": r.fpr, "p_value": p_value, "level": level / tested,
                    "flagged": p_value < level / tested})
    return out
