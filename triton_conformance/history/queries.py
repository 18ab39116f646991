"""What the history answers: a cell's trend, what is new since the last green run and time regressions.  Each query reads complete runs only and returns plain dicts (the CLI prints them, or their
JSON).  Flake rates are in :mod:`.flakes`; the first bad commit, which needs git, is in :mod:`.bisect`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import sqlalchemy as sa

from triton_conformance.history.schema import cells, runs
from triton_conformance.history.store import HistoryStore, is_failing
from triton_conformance.model.cells import cell_id, split_cell_id
from triton_conformance.model.outcomes import PASSING

__all__ = ["RUN_FIELDS", "cell_filter", "latest_run", "new_since_green", "run_cells", "slower", "trend"]

RUN_FIELDS = ("id", "commit", "branch", "dirty", "device", "started", "profile", "seed", "failing", "cells")


def cell_filter(name: str, table: sa.Table = cells) -> sa.ColumnElement:
    """The rows of ``table`` (cells, or any with subject and cell columns) that ``name`` names:
    ``subject[cell]``, or every cell of a subject."""
    named = split_cell_id(name)
    if named is None:
        return table.c.subject == name
    return sa.and_(table.c.subject == named[0], table.c.cell == named[1])


def _run(row: Any) -> dict[str, Any]:
    return {k: getattr(row, k) for k in RUN_FIELDS}


def _runs(conn: sa.Connection, *where: sa.ColumnElement, limit: int | None = None) -> list[dict[str, Any]]:
    """Complete runs matching ``where``, newest first."""
    query = sa.select(*(runs.c[k] for k in RUN_FIELDS)).where(runs.c.complete.is_(True), *where) \
        .order_by(runs.c.started.desc(), runs.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [_run(r) for r in conn.execute(query)]


def latest_run(store: HistoryStore, device: str | None = None) -> dict[str, Any] | None:
    """The newest complete run (on ``device``), or None."""
    with store.engine.connect() as conn:
        found = _runs(conn, *([runs.c.device == device] if device else []), limit=1)
    return found[0] if found else None


def run_cells(conn: sa.Connection, run_ids: list[int], *where: sa.ColumnElement) -> list[dict[str, Any]]:
    """The cells of ``run_ids`` (matching ``where``), as dicts with their run id."""
    if not run_ids:
        return []
    query = sa.select(cells.c.run_id, cells.c.subject, cells.c.cell, cells.c.outcome, cells.c.finding,
                      cells.c.expected_failure, cells.c.duration_s, cells.c.compiles,
                      cells.c.false_positive_rate).where(cells.c.run_id.in_(run_ids), *where)
    return [dict(r._mapping) for r in conn.execute(query)]


def trend(store: HistoryStore, name: str, *, last: int = 10, device: str | None = None,
          every_cell: bool = False) -> dict[str, Any]:
    """The outcomes of ``name`` (a cell or a subject; every cell with ``every_cell``) in the last ``last``
    runs that recorded it, oldest first: ``{"name", "runs": [run...], "cells": {cell name: [{"outcome",
    "finding"} or None per run]}}``."""
    with store.engine.connect() as conn:
        where = [runs.c.device == device] if device else []
        chosen = [] if every_cell else [cell_filter(name)]
        if chosen:
            # newest first, probing each run's cells (the index cells_by_run_cell) until ``last`` have it
            where.append(sa.exists().where(cells.c.run_id == runs.c.id, *chosen))
        recent = list(reversed(_runs(conn, *where, limit=last)))
        rows = run_cells(conn, [r["id"] for r in recent], *chosen)
    column = {r["id"]: i for i, r in enumerate(recent)}
    table: dict[str, list[dict[str, Any] | None]] = {}
    for row in rows:
        strip = table.setdefault(cell_id(row["subject"], row["cell"]), [None] * len(recent))
        strip[column[row["run_id"]]] = {"outcome": row["outcome"], "finding": row["finding"]}
    return {"name": name, "device": device, "runs": recent, "cells": dict(sorted(table.items()))}


def _green_before(conn: sa.Connection, run: dict[str, Any]) -> dict[str, Any] | None:
    found = _runs(conn, runs.c.device == run["device"], runs.c.failing == 0,
                  sa.or_(runs.c.started < run["started"],
                         sa.and_(runs.c.started == run["started"], runs.c.id < run["id"])), limit=1)
    return found[0] if found else None


def new_since_green(store: HistoryStore, *, device: str | None = None, run_id: int | None = None) -> dict[str, Any]:
    """What changed in run ``run_id`` (default: the newest on ``device``) since the last green run on its
    device: ``new_failures``, ``new_passes`` and ``changed_findings``, each a list of
    ``{"cell", "then", "now"}``; ``baseline`` is that green run (None if there is none: every failure is new)."""
    with store.engine.connect() as conn:
        if run_id is not None:
            found = _runs(conn, runs.c.id == run_id, limit=1)
        else:
            found = _runs(conn, *([runs.c.device == device] if device else []), limit=1)
        if not found:
            return {"run": None, "baseline": None, "new_failures": [], "new_passes": [], "changed_findings": []}
        run = found[0]
        green = _green_before(conn, run)
        now = {cell_id(r["subject"], r["cell"]): r for r in run_cells(conn, [run["id"]])}
        then = {cell_id(r["subject"], r["cell"]): r for r in run_cells(conn, [green["id"]])} if green else {}
    out: dict[str, Any] = {"run": run, "baseline": green, "new_failures": [], "new_passes": [],
                           "changed_findings": []}

    def entry(name: str) -> dict[str, Any]:
        old = then.get(name)
        return {"cell": name, "then": None if old is None else {"outcome": old["outcome"], "finding": old["finding"]},
                "now": {"outcome": now[name]["outcome"], "finding": now[name]["finding"]}}

    for name in sorted(now):
        cur, old = now[name], then.get(name)
        if is_failing(cur) and (old is None or not is_failing(old)):
            out["new_failures"].append(entry(name))
        elif old is not None and old["outcome"] not in PASSING and cur["outcome"] in PASSING:
            out["new_passes"].append(entry(name))
        elif old is not None and cur["outcome"] not in PASSING and (old["outcome"], old["finding"]) != \
                (cur["outcome"], cur["finding"]):
            out["changed_findings"].append(entry(name))
    return out


def slower(store: HistoryStore, *, device: str | None = None, threshold: float = 1.5, last: int = 20,
           min_seconds: float = 0.5) -> list[dict[str, Any]]:
    """Cells of the newest run (on each device, or on ``device``) whose duration or compile count grew past
    ``threshold`` x their median over the ``last`` runs before it (a duration also by ``min_seconds`` at
    least, so that noise in fast cells is no regression).  Each row: cell, device, what (duration_s or
    compiles), now, median, ratio, runs."""
    where = [runs.c.complete.is_(True)] + ([runs.c.device == device] if device else [])
    rank = sa.func.row_number().over(partition_by=runs.c.device, order_by=(runs.c.started.desc(), runs.c.id.desc()))
    ranked = sa.select(runs.c.id, runs.c.device, rank.label("rank")).where(*where).subquery("ranked")
    recent = sa.select(ranked).where(ranked.c.rank <= last + 1).subquery("recent")  # rank 1: the newest run
    query = (sa.select(recent.c.device, recent.c.rank, cells.c.subject, cells.c.cell, cells.c.duration_s,
                       cells.c.compiles).select_from(cells.join(recent, cells.c.run_id == recent.c.id)))
    with store.engine.connect() as conn:  # plain tuples, fetched at once: 10,000 runs x 400 cells in a second
        rows = conn.execute(query).all()
    runs_seen: dict[str, set[int]] = defaultdict(set)
    by_cell: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for dev, order, subject, cell, duration, compiles in rows:
        runs_seen[dev].add(order)
        by_cell[(dev, subject, cell)][order] = (duration, compiles)
    out = []
    for (dev, subject, cell), seen in sorted(by_cell.items()):
        if len(runs_seen[dev]) < 2 or 1 not in seen:
            continue
        now = seen[1]
        for k, (what, floor) in enumerate((("duration_s", min_seconds), ("compiles", 1))):
            past = [v[k] for order, v in seen.items() if order != 1 and v[k] is not None]
            if now[k] is None or not past:
                continue
            median = statistics.median(past)
            if now[k] > threshold * median and now[k] - median >= floor:
                out.append({"cell": cell_id(subject, cell), "device": dev, "what": what, "now": now[k],
                            "median": median, "ratio": now[k] / median if median else None, "runs": len(past)})
    return out
