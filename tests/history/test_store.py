"""The history store: concurrent writers lose nothing, a killed writer leaves no half run, an old database
is upgraded in place with its rows kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import sqlalchemy as sa

from triton_conformance.history.schema import tallies, tally_select
from triton_conformance.history.store import HistoryStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A child process that records one run of CELLS cells ("wrong" every 7th, with a reproducer).  The first 200
# cells are the writer's own; the others every writer records (their tallies are shared), every 5th a crash
# in the odd-numbered writers' runs.
WRITER = textwrap.dedent("""
    import os, sys, time
    from triton_conformance.history.store import HistoryStore
    url, tag, cells, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    odd = int(tag[-1]) % 2 if tag[-1].isdigit() else 0
    results = [{"subject": f"s{i // 20}", "family": "f", "cell": f"c{i % 20}" + (f":{tag}" if i < 200 else ""),
                "outcome": "wrong" if i % 7 == 0 else "crash" if i >= 200 and i % 5 == 0 and odd else "honoured", "finding": "mismatch" if i % 7 == 0 else None,
                "reproducer": "print(1)" if i % 7 == 0 else None, "duration_s": 0.1, "examples": 5}
               for i in range(cells)]
    doc = {"environment": {"device": "interpreter", "commit": "c0ffee", "seed": 1}, "results": results}

    def hang():
        open(pause, "w").close()  # the parent kills us now, inside the transaction
        time.sleep(60)

    HistoryStore(url).record(doc, git={"commit": "c0ffee"}, before_commit=hang if pause != "-" else None)
""")


def _writer(url: str, tag: str, cells: int, pause: str = "-") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, url, tag, str(cells), pause], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": ROOT})


def _counts(url: str) -> tuple[int, int, int, int]:
    """(runs, complete runs, cells, reproducers)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        out = tuple(conn.exec_driver_sql(q).scalar() for q in (
            "SELECT count(*) FROM runs", "SELECT count(*) FROM runs WHERE complete",
            "SELECT count(*) FROM cells", "SELECT count(*) FROM reproducers"))
    engine.dispose()
    return out


def _tallies(url: str) -> tuple[list[tuple], list[tuple]]:
    """(the tallies kept as the runs were recorded, the tallies counted again from the cells), sorted."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        kept = sorted(tuple(r) for r in conn.execute(sa.select(tallies)))
        counted = sorted(tuple(r) for r in conn.execute(tally_select()))
    engine.dispose()
    return kept, counted


def test_eight_concurrent_writers_of_400_cells_lose_nothing(store_url: str) -> None:
    if store_url.startswith("sqlite"):
        HistoryStore(store_url).close()  # WAL mode is a property of the file: check it is on
        engine = sa.create_engine(store_url)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        engine.dispose()
    writers = [_writer(store_url, f"w{k}", 400) for k in range(8)]
    assert [w.wait(timeout=240) for w in writers] == [0] * 8
    per_run = sum(1 for i in range(400) if i % 7 == 0)
    assert _counts(store_url) == (8, 8, 8 * 400, 8 * per_run)
    kept, counted = _tallies(store_url)
    assert kept == counted and len(kept) == 8 * 200 + 200, "every run's cells tallied, the shared ones once each"
    shared = next(t for t in kept if t[2:4] == ("s10", "c0"))  # cell 200: a crash in w1, w3, w5 and w7's runs
    row = dict(zip(tallies.c.keys(), shared))
    assert (row["runs"], row["mode"], row["o_crash"], row["o_honoured"]) == (8, 4, 4, 4)


def test_a_writer_killed_mid_run_leaves_no_half_run(store_url: str, tmp_path) -> None:  # noqa: ANN001
    pause = str(tmp_path / "inside")
    victim = _writer(store_url, "killed", 400, pause)
    deadline = time.time() + 120
    while not os.path.exists(pause):
        assert victim.poll() is None and time.time() < deadline, "the writer never reached its transaction"
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    after = _writer(store_url, "after", 400)  # the lock the dead writer held is free again
    assert after.wait(timeout=120) == 0
    runs, complete, cells, _ = _counts(store_url)
    assert (runs, complete, cells) == (1, 1, 400), "only the second writer's run, whole"
    kept, counted = _tallies(store_url)
    assert kept == counted and sum(row[4] for row in kept) == 400, "the dead writer's cells are not tallied"


V1 = [  # version 1's tables, as that release created them (written out here: the test must not trust the code)
    "CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value VARCHAR(255) NOT NULL)",
    "INSERT INTO meta VALUES ('version', '1')",
    'CREATE TABLE runs (id INTEGER PRIMARY KEY, "commit" VARCHAR(64), branch VARCHAR(255), dirty BOOLEAN, '
    "device VARCHAR(128) NOT NULL, backend VARCHAR(32), compat TEXT, gpu_name VARCHAR(255), driver VARCHAR(64), "
    "torch VARCHAR(64), triton VARCHAR(64), python VARCHAR(32), profile VARCHAR(32), seed VARCHAR(32), "
    "shard VARCHAR(16), started FLOAT NOT NULL, ended FLOAT, complete BOOLEAN NOT NULL, cells INTEGER NOT NULL, "
    "failing INTEGER NOT NULL)",
    "CREATE TABLE cells (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), "
    "subject VARCHAR(255) NOT NULL, cell VARCHAR(255) NOT NULL, outcome VARCHAR(32) NOT NULL, "
    "finding VARCHAR(128), message TEXT, shrunk_dims TEXT, examples INTEGER, duration_s FLOAT, compiles INTEGER, "
    "expected_failure TEXT)",
    "CREATE INDEX cells_by_run ON cells (run_id)",
    'INSERT INTO runs ("commit", branch, dirty, device, backend, compat, gpu_name, driver, torch, triton, python, '
    "profile, seed, shard, started, ended, complete, cells, failing) VALUES ('abc', 'main', false, 'interpreter', 'interpreter', NULL, NULL, NULL, NULL, "
    "NULL, NULL, 'ci', NULL, NULL, 1.0, 2.0, true, 1, 1)",
    "INSERT INTO cells (run_id, subject, cell, outcome, finding, message, shrunk_dims, examples, duration_s, "
    "compiles, expected_failure) VALUES (1, 'add', 'memory', 'unsafe', 'oob-write', 'wrote past', NULL, 3, 0.5, NULL, "
    "NULL)",
]


def test_a_version_1_database_is_upgraded_in_place_with_its_rows(store_url: str) -> None:
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        for statement in V1:
            if conn.dialect.name == "postgresql":  # what SQLAlchemy's autoincrement key is there
                statement = statement.replace("id INTEGER PRIMARY KEY", "id SERIAL PRIMARY KEY")
            conn.exec_driver_sql(statement)
    engine.dispose()
    with HistoryStore(store_url) as store:
        assert store.upgraded_from == 1
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT value FROM meta WHERE key = 'version'").scalar() == "4"
            tallied = conn.exec_driver_sql('SELECT device, "commit", subject, cell, runs, mode, o_unsafe '
                                           "FROM tallies").all()
            assert [tuple(r) for r in tallied] == [("interpreter", "abc", "add", "memory", 1, 1, 1)]
            indexes = {i["name"] for i in sa.inspect(conn).get_indexes("cells")}
            assert {"cells_by_run_cell", "cells_by_name"} <= indexes and "cells_by_run" not in indexes
            kept = conn.exec_driver_sql("SELECT subject, cell, outcome, finding, precision_verdict FROM cells").all()
        assert [tuple(r) for r in kept] == [("add", "memory", "unsafe", "oob-write", None)]
        store.record({"environment": {"device": "interpreter"}, "results": [
            {"subject": "add", "cell": "memory", "outcome": "unsafe", "reproducer": "print(2)",
             "details": {"precision": "within-bound"}}]}, git={"commit": "def"})
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT precision_verdict FROM cells WHERE run_id = 2").scalar() \
                == "within-bound"
            assert conn.exec_driver_sql("SELECT script FROM reproducers").scalar() == "print(2)"
    with HistoryStore(store_url) as again:
        assert again.upgraded_from == 4  # opened once more: nothing to do
    kept, counted = _tallies(store_url)
    assert kept == counted and [r[1] for r in kept] == ["abc", "def"], "the new run is tallied beside the migrated one"


def test_a_newer_database_is_refused_in_one_line(tmp_path) -> None:  # noqa: ANN001
    from triton_conformance.history.location import HistoryError

    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    HistoryStore(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE meta SET value = '99' WHERE key = 'version'")
    engine.dispose()
    with pytest.raises(HistoryError, match=r"version=99, newer than this triton-conformance's 4"):
        HistoryStore(url)


def test_every_outcome_has_a_tally_column() -> None:
    # A new outcome in the model needs a migration that adds its column to the tallies (schema.py).
    from triton_conformance.history.schema import TALLIED
    from triton_conformance.model.outcomes import OUTCOMES

    assert TALLIED == OUTCOMES
