"""The history database's tables (SQLAlchemy Core, one definition for SQLite and PostgreSQL) and its migrations.

Version 1 had ``runs`` and ``cells``; version 2 added each cell's precision verdict and declared
false-positive rate, and the ``reproducers`` table; version 3 changed only indexes, for the queries at
10,000 runs (a covering index of each run's cells, and runs by start time); version 4 added ``tallies``
(each cell's outcome counts per device and commit, kept as runs are recorded: what the flake count reads).  ``meta`` holds the version; :func:`upgrade`
brings an older database to :data:`VERSION` in place, one step at a time, keeping its rows.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

__all__ = ["TALLIED", "VERSION", "HistoryVersionError", "cells", "meta", "metadata", "reproducers", "runs",
           "tallies", "tally_column", "tally_select", "upgrade"]

VERSION = 4

metadata = sa.MetaData()

meta = sa.Table("meta", metadata,
                sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.String(255), nullable=False))

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("commit", sa.String(64)),
    sa.Column("branch", sa.String(255)),
    sa.Column("dirty", sa.Boolean),
    sa.Column("device", sa.String(128), nullable=False),  # the device label: interpreter, H200, ...
    sa.Column("backend", sa.String(32)),  # what the kernels ran on: interpreter or cuda
    sa.Column("compat", sa.Text),  # JSON: the interpreter shims the run installed
    sa.Column("gpu_name", sa.String(255)),
    sa.Column("driver", sa.String(64)),
    sa.Column("torch", sa.String(64)),
    sa.Column("triton", sa.String(64)),
    sa.Column("python", sa.String(32)),
    sa.Column("profile", sa.String(32)),
    sa.Column("seed", sa.String(32)),  # text: seeds reach 2**32, and None means derandomized
    sa.Column("shard", sa.String(16)),
    sa.Column("started", sa.Float, nullable=False),  # seconds since the epoch (UTC)
    sa.Column("ended", sa.Float),
    sa.Column("complete", sa.Boolean, nullable=False),  # False until every cell of the run is in
    sa.Column("cells", sa.Integer, nullable=False),
    sa.Column("failing", sa.Integer, nullable=False),  # failing cells that are no known bug: 0 is a green run
)
sa.Index("runs_by_device", runs.c.device, runs.c.started)
sa.Index("runs_by_started", runs.c.started, runs.c.id)  # version 3: the newest runs of every device

cells = sa.Table(
    "cells", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("subject", sa.String(255), nullable=False),
    sa.Column("cell", sa.String(255), nullable=False),
    sa.Column("outcome", sa.String(32), nullable=False),
    sa.Column("finding", sa.String(128)),
    sa.Column("message", sa.Text),
    sa.Column("shrunk_dims", sa.Text),  # JSON of the counterexample's dims
    sa.Column("examples", sa.Integer),
    sa.Column("duration_s", sa.Float),
    sa.Column("compiles", sa.Integer),
    sa.Column("expected_failure", sa.Text),
    # version 2
    sa.Column("precision_verdict", sa.String(64)),
    sa.Column("false_positive_rate", sa.Float),  # a stochastic cell's declared rate, else NULL
)
sa.Index("cells_by_name", cells.c.subject, cells.c.cell, cells.c.run_id)
# Version 3 (replacing version 2's cells_by_run): it holds what the flake count and a trend's "did this run
# record the cell" read, so those queries never touch the table's rows.
sa.Index("cells_by_run_cell", cells.c.run_id, cells.c.subject, cells.c.cell, cells.c.outcome,
         cells.c.false_positive_rate)

reproducers = sa.Table(
    "reproducers", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("subject", sa.String(255), primary_key=True),
    sa.Column("cell", sa.String(255), primary_key=True),
    sa.Column("script", sa.Text, nullable=False),
)

# Version 4: per device, commit and cell, how many complete runs recorded it and with which outcome (a column
# per outcome), and ``mode``: the count of its most common outcome.  The flake count (flakes.py) reads these
# rows, one per commit, instead of one per run; record() keeps them in the run's own transaction (an upsert
# that adds the run's cells).  ``commit`` is '' for a run outside git (NULL cannot be part of the key).
TALLIED = ("honoured", "rejected", "accepted", "wrong", "unsafe", "crash", "compile-error", "timeout", "skipped",
           "oracle-error", "harness-error")  # the outcomes of version 4; a new outcome needs a migration


def tally_column(outcome: str) -> str:
    return "o_" + outcome.replace("-", "_")


tallies = sa.Table(
    "tallies", metadata,
    sa.Column("device", sa.String(128), primary_key=True),
    sa.Column("commit", sa.String(64), primary_key=True),
    sa.Column("subject", sa.String(255), primary_key=True),
    sa.Column("cell", sa.String(255), primary_key=True),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("mode", sa.Integer, nullable=False),
    sa.Column("fpr", sa.Float),  # the largest declared false-positive rate recorded
    *(sa.Column(tally_column(o), sa.Integer, nullable=False, server_default="0") for o in TALLIED),
)


class HistoryVersionError(ValueError):
    """The database was written by a newer triton-conformance than this one."""


def _add_columns(table: sa.Table, *names: str) -> Callable[[sa.Connection], None]:
    """A migration step that adds ``names`` (as declared above) to ``table``: the type is compiled by the
    connection's own dialect, so the DDL is SQLAlchemy's, not ours."""
    def step(conn: sa.Connection) -> None:
        for name in names:
            column = table.c[name]
            kind = column.type.compile(dialect=conn.dialect)
            quote = conn.dialect.identifier_preparer.quote
            conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} ADD COLUMN {quote(name)} {kind}")
    return step


def _reindex(*drop: str) -> Callable[[sa.Connection], None]:
    """A migration step that drops the indexes named ``drop`` (where they are) and builds every index declared
    above that is missing."""
    def step(conn: sa.Connection) -> None:
        quote = conn.dialect.identifier_preparer.quote
        for name in drop:
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {quote(name)}")  # the same statement in both dialects
        for table in metadata.sorted_tables:
            for index in table.indexes:
                index.create(conn, checkfirst=True)
    return step


def _create(*tables: sa.Table) -> Callable[[sa.Connection], None]:
    def step(conn: sa.Connection) -> None:
        metadata.create_all(conn, tables=list(tables))
    return step


def tally_select(*where: sa.ColumnElement) -> sa.Select:
    """The ``tallies`` rows of the complete runs matching ``where``, counted from their cells (the migration to
    version 4 fills the table with it; the tests compare the kept tallies with it)."""
    commit = sa.func.coalesce(runs.c.commit, "").label("commit")
    per_outcome = (sa.select(runs.c.device, commit, cells.c.subject, cells.c.cell, cells.c.outcome,
                             sa.func.count().label("n"), sa.func.max(cells.c.false_positive_rate).label("fpr"))
                   .select_from(cells.join(runs, cells.c.run_id == runs.c.id))
                   .where(runs.c.complete.is_(True), *where)
                   .group_by(runs.c.device, commit, cells.c.subject, cells.c.cell, cells.c.outcome)
                   .subquery("per_outcome"))
    o = per_outcome.c
    return (sa.select(o.device, o.commit, o.subject, o.cell, sa.func.sum(o.n), sa.func.max(o.n), sa.func.max(o.fpr),
                      *(sa.func.sum(sa.case((o.outcome == name, o.n), else_=0)) for name in TALLIED))
            .group_by(o.device, o.commit, o.subject, o.cell))


def _fill_tallies(conn: sa.Connection) -> None:
    conn.execute(tallies.insert().from_select([c.name for c in tallies.c], tally_select()))


# MIGRATIONS[v]: the steps from version v to v + 1.
MIGRATIONS: dict[int, tuple[Callable[[sa.Connection], None], ...]] = {
    1: (_add_columns(cells, "precision_verdict", "false_positive_rate"), _create(reproducers)),
    2: (_reindex("cells_by_run"),),
    3: (_create(tallies), _fill_tallies),
}


def _version(conn: sa.Connection) -> int | None:
    if not sa.inspect(conn).has_table("meta"):
        return None
    row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "version")).first()
    return int(row[0]) if row else None


def upgrade(conn: sa.Connection, where: str) -> int:
    """Create the tables in an empty database, or upgrade an older one in place; returns the version it had
    (0 for a new database).  Run inside one transaction: a failed step leaves the old version whole."""
    found = _version(conn)
    if found is None:
        metadata.create_all(conn)
        conn.execute(meta.insert().values(key="version", value=str(VERSION)))
        return 0
    if found > VERSION:
        raise HistoryVersionError(f"history database {where}: version={found}, newer than this "
                                  f"triton-conformance's {VERSION}; upgrade triton-conformance to read it")
    for version in range(found, VERSION):
        for step in MIGRATIONS[version]:
            step(conn)
    if found < VERSION:
        conn.execute(meta.update().where(meta.c.key == "version").values(value=str(VERSION)))
    return found
