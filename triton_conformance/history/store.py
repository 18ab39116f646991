"""The history store: where every run's cells are recorded, on SQLite (the default) or PostgreSQL.

:func:`history_url` turns the ``--conformance-history`` value into a database URL (or None: off);
:class:`HistoryStore` opens it (creating or upgrading the schema) and records a results document as
one run, in one transaction: a writer killed part-way leaves no run behind, never half of one.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterable
from typing import Any

from triton_conformance.history.location import HistoryError, history_url, shown
from triton_conformance.history.schema import (
    TALLIED,
    HistoryVersionError,
    cells,
    reproducers,
    runs,
    tallies,
    tally_column,
    upgrade,
)
from triton_conformance.model.outcomes import PASSING

__all__ = ["HistoryStore", "is_failing", "open_store", "provenance", "record_document"]

MESSAGE_CHARS = 2000  # a cell's message as stored: the results JSON keeps the whole one
_SETUP_TRIES = 8  # concurrent first writers race to create the tables: the losers retry


def _engine(url: str):
    import sqlalchemy as sa

    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        if path and path != ":memory:":
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 120})

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi, _record) -> None:
            dbapi.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's deferred one
            dbapi.execute("PRAGMA journal_mode=WAL")  # readers and one writer at once, across processes
            dbapi.execute("PRAGMA foreign_keys=ON")
            dbapi.execute("PRAGMA busy_timeout=120000")

        @sa.event.listens_for(engine, "begin")
        def _begin(conn) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlock later
        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def _git(root: str, *args: str) -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(root: str) -> dict[str, Any]:
    """The checkout's full commit, branch and dirty flag (None each outside a git checkout)."""
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": _git(root, "rev-parse", "HEAD"), "branch": _git(root, "rev-parse", "--abbrev-ref", "HEAD"),
            "dirty": None if status is None else bool(status)}


def is_failing(r: dict[str, Any]) -> bool:
    """A cell that keeps a run from being green: failing, and no known bug."""
    return r["outcome"] not in PASSING and not r.get("expected_failure")


def _device(doc: dict[str, Any]) -> str:
    env = doc.get("environment") or {}
    return str(env.get("device_label") or env.get("device") or "unknown")


def _fpr(details: dict[str, Any]) -> float | None:
    """A stochastic cell's declared false-positive rate: its tests' Bonferroni share times their count."""
    share = details.get("alpha_check")
    if not isinstance(share, (int, float)):
        return None
    return float(share) * max(1, len(details.get("tests") or ()))


def _precision(details: dict[str, Any]) -> str | None:
    verdict = details.get("precision")
    if isinstance(verdict, dict):
        verdict = verdict.get("verdict")
    return None if verdict is None else str(verdict)[:64]


def _cell_row(run_id: int, r: dict[str, Any]) -> dict[str, Any]:
    details = r.get("details") or {}
    dims = (r.get("counterexample") or {}).get("dims")
    return {"run_id": run_id, "subject": r["subject"], "cell": r["cell"], "outcome": r["outcome"],
            "finding": r.get("finding"), "message": (r.get("message") or "")[:MESSAGE_CHARS],
            "shrunk_dims": json.dumps(dims, sort_keys=True) if dims is not None else None,
            "examples": r.get("examples"), "duration_s": r.get("duration_s"), "compiles": r.get("compiles"),
            "expected_failure": r.get("expected_failure"), "precision_verdict": _precision(details),
            "false_positive_rate": _fpr(details)}


def _upsert(conn: Any):  # noqa: ANN202 - the dialect's INSERT ... ON CONFLICT (SQLAlchemy's, one per dialect)
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def _add_tallies(conn: Any, run: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Add the run's cells to ``tallies`` (schema.py): a new row per cell not tallied yet at the run's device
    and commit, else its counts plus one.  ``mode`` (the most common outcome's count) grows when the outcome
    just counted passes it: the new count is sum_o (old_o + new_o) * new_o, new_o being 1 for the run's
    outcome and 0 for the others.  A cell recorded twice in one run is added twice, one statement each."""
    import sqlalchemy as sa

    columns = {o: tally_column(o) for o in TALLIED}
    layers: list[dict[tuple[str, str], dict[str, Any]]] = []
    for r in rows:
        if r["outcome"] not in columns:
            raise HistoryError(f"outcome {r['outcome']!r} of {r['subject']}[{r['cell']}] has no tally column: "
                               "the history schema needs a migration for it")
        key = (r["subject"], r["cell"])
        layer = next((layer for layer in layers if key not in layer), None)
        if layer is None:
            layers.append(layer := {})
        layer[key] = {"device": run["device"], "commit": run["commit"] or "", "subject": key[0], "cell": key[1],
                      "runs": 1, "mode": 1, "fpr": _fpr(r.get("details") or {}),
                      **{c: int(o == r["outcome"]) for o, c in columns.items()}}
    insert = _upsert(conn)
    for layer in layers:
        stmt = insert(tallies)
        new, old = stmt.excluded, tallies.c
        count = sum((old[c] + new[c]) * new[c] for c in columns.values())
        stmt = stmt.on_conflict_do_update(
            index_elements=[old.device, old.commit, old.subject, old.cell],
            set_={"runs": old.runs + new.runs, "mode": sa.case((count > old.mode, count), else_=old.mode),
                  "fpr": sa.case((new.fpr.is_(None), old.fpr), (old.fpr.is_(None) | (new.fpr > old.fpr), new.fpr),
                                 else_=old.fpr),
                  **{c: old[c] + new[c] for c in columns.values()}})
        conn.execute(stmt, sorted(layer.values(), key=lambda v: (v["subject"], v["cell"])))


class HistoryStore:
    """An open history database.  ``url``: a SQLAlchemy URL (see :func:`history_url`)."""

    def __init__(self, url: str):
        try:
            import sqlalchemy as sa
        except ImportError:
            raise HistoryError("the results history needs SQLAlchemy: pip install 'SQLAlchemy>=2'") from None
        self.url = url
        self.where = shown(url)
        try:
            self.engine = _engine(url)
        except (ImportError, sa.exc.ArgumentError) as exc:
            hint = " (pip install 'triton-conformance[history-postgres]')" if "postgres" in url else ""
            raise HistoryError(f"history database {self.where}: {exc}{hint}") from None
        for attempt in range(_SETUP_TRIES):
            try:
                with self.engine.begin() as conn:
                    self.upgraded_from = upgrade(conn, self.where)
                break
            except HistoryVersionError as exc:
                raise HistoryError(str(exc)) from None
            except sa.exc.DBAPIError as exc:
                if attempt == _SETUP_TRIES - 1 or isinstance(exc, sa.exc.InterfaceError):
                    raise HistoryError(f"history database {self.where}: {exc.orig}") from None
                time.sleep(0.05 + random.random() * 0.2)  # another writer created the tables first

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, document: dict[str, Any], *, started: float | None = None, root: str | None = None,
               git: dict[str, Any] | None = None, results: Iterable[dict[str, Any]] | None = None,
               device: str | None = None, before_commit: Any = None) -> int:
        """Record ``document`` (a results document) as one run; returns its id.

        - ``git``: commit, branch and dirty flag (else read from the checkout at ``root``, else the
          document's commit);
        - ``results``/``device``: record these cells as the run of that device (a cross-device document
          is recorded one device at a time);
        - ``before_commit``: called inside the transaction before it commits (tests kill the writer there).
        The run row, its cells and reproducers commit together; the run is marked complete in the same
        transaction, so a reader never sees part of one.
        """
        env = document.get("environment") or {}
        info = dict(git or (provenance(root) if root else {}))
        info.setdefault("commit", env.get("commit"))
        rows = list(document.get("results") or () if results is None else results)
        now = time.time()
        run = {"commit": info.get("commit") or env.get("commit"), "branch": info.get("branch"),
               "dirty": info.get("dirty"), "device": device or _device(document), "backend": env.get("device"),
               "compat": json.dumps(env.get("compat")) if env.get("compat") is not None else None,
               "gpu_name": env.get("device_name"), "driver": env.get("driver"), "torch": env.get("torch"),
               "triton": env.get("triton"), "python": env.get("python"), "profile": env.get("profile"),
               "seed": None if env.get("seed") is None else str(env.get("seed")), "shard": env.get("shard"),
               "started": started if started is not None else now, "ended": now, "complete": False,
               "cells": len(rows), "failing": sum(1 for r in rows if is_failing(r))}
        with self.engine.begin() as conn:
            run_id = conn.execute(runs.insert().values(**run).returning(runs.c.id)).scalar_one()
            if rows:
                conn.execute(cells.insert(), [_cell_row(run_id, r) for r in rows])
            scripts = {(r["subject"], r["cell"]): r["reproducer"] for r in rows if r.get("reproducer")}
            if scripts:
                conn.execute(reproducers.insert(), [{"run_id": run_id, "subject": s, "cell": c, "script": text}
                                                    for (s, c), text in scripts.items()])
            _add_tallies(conn, run, rows)
            if before_commit is not None:
                before_commit()
            conn.execute(runs.update().where(runs.c.id == run_id).values(complete=True))
        return run_id


def record_document(store: HistoryStore, document: dict[str, Any], **kwargs: Any) -> list[int]:
    """Record ``document``: one run, or one run per device of a cross-device matrix; returns the run ids."""
    devices = document.get("devices")
    if not isinstance(devices, list) or not devices:
        return [store.record(document, **kwargs)]
    ids = []
    for entry in devices:
        label = str(entry.get("device"))
        env = dict(entry.get("environment") or {})
        env.setdefault("device_label", label)
        mine = [r for r in document.get("results") or () if str(r.get("device")) == label]
        ids.append(store.record({**document, "environment": env}, results=mine, device=label, **kwargs))
    return ids


def open_store(value: str | None, root: str, where: str = "--conformance-history") -> HistoryStore | None:
    """The store option ``value`` names (see :func:`history_url`), opened; None when it is off."""
    url = history_url(value, root, where)
    return None if url is None else HistoryStore(url)
