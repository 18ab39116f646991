"""What the results history costs: recording a 400-cell run, and each ``history`` query over many runs.

    python bench/history_cost.py [--runs 10000] [--cells 400] [--devices 25] [--repeats 5]
                                 [--postgres URL]   (default: $CONFORMANCE_TEST_POSTGRES_URL, if set)

Synthetic data: ``--runs`` runs spread over ``--devices`` devices (a year of nightly runs over 25 devices is
about 10,000), ``--cells`` cells each, a few of them failing or flipping.  It prints the median time to record
one more run (the figure to hold against the main job's ~100 s: under 1 % is under 1 s), then the median of
each query (trend, new, flaky over the last 50 runs of a device, slower, first-bad without git: the store part),
on SQLite and, where a server is given, PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from triton_conformance.history import queries  # noqa: E402
from triton_conformance.history.schema import cells, runs  # noqa: E402
from triton_conformance.history.store import HistoryStore  # noqa: E402


def _document(n: int, seed: int, device: str) -> dict:
    rnd = random.Random(seed)
    results = [{"subject": f"subject{i // 25}", "family": "f", "cell": f"cell{i % 25}",
                "outcome": "wrong" if rnd.random() < 0.01 else "honoured", "finding": None,
                "message": "x" * 80, "duration_s": rnd.uniform(0.1, 2.0), "compiles": rnd.randint(0, 8),
                "examples": 30, "details": {}} for i in range(n)]
    for r in results:
        if r["outcome"] == "wrong":
            r.update(finding="mismatch", reproducer="print('reproducer')\n" * 20)
    return {"environment": {"device": "cuda", "device_label": device, "profile": "nightly", "seed": seed,
                            "torch": "2.11", "triton": "3.6", "python": "3.11"}, "results": results}


def _fill(store: HistoryStore, n_runs: int, n_cells: int, n_devices: int) -> None:
    """Bulk-load synthetic runs (the same rows a record() writes, inserted in batches)."""
    from triton_conformance.history.store import _cell_row

    base = _document(n_cells, 0, "d0")["results"]
    batch = 50
    for start in range(0, n_runs, batch):
        with store.engine.begin() as conn:
            run_rows = [{"commit": f"commit{(i // n_devices) // 2}", "device": f"d{i % n_devices}",
                         "started": 1.7e9 + i * 3600, "ended": 1.7e9 + i * 3600 + 100, "complete": True,
                         "cells": n_cells, "failing": 1 if i % 7 == 0 else 0, "profile": "nightly"}
                        for i in range(start, min(n_runs, start + batch))]
            ids = [conn.execute(runs.insert().values(**r).returning(runs.c.id)).scalar_one() for r in run_rows]
            rows = []
            for run_id in ids:
                for j, r in enumerate(base):
                    row = _cell_row(run_id, r)
                    row["outcome"] = "wrong" if (run_id * 31 + j) % 97 == 0 else "honoured"
                    rows.append(row)
            conn.execute(cells.insert(), rows)


def _median(fn, repeats: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench(url: str, name: str, args: argparse.Namespace) -> None:
    with HistoryStore(url) as store:
        t = time.perf_counter()
        _fill(store, args.runs, args.cells, args.devices)
        print(f"{name}: loaded {args.runs} runs x {args.cells} cells in {time.perf_counter() - t:.1f} s", flush=True)
        seeds = iter(range(1, 10**6))
        record = _median(lambda: store.record(_document(args.cells, next(seeds), "d0"), git={"commit": "x"}),
                         args.repeats)
        print(f"{name}: record one {args.cells}-cell run: median {record * 1000:.0f} ms "
              f"({record / 100 * 100:.2f} % of a 100 s main job)", flush=True)
        from triton_conformance.history.section import history_section

        # What a run pays in all, in a fresh process: import SQLAlchemy, open the store, record, the section.
        child = ("import sys, time; t = time.perf_counter(); sys.path.insert(0, sys.argv[2]); "
                 "from bench.history_cost import _document; "
                 "from triton_conformance.history.store import HistoryStore; "
                 "from triton_conformance.history.section import history_section; "
                 "s = HistoryStore(sys.argv[1]); i = s.record(_document(int(sys.argv[3]), 99, 'd0')); "
                 "history_section(s, i, 'd0'); print(time.perf_counter() - t)")
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        whole = statistics.median(float(subprocess.run([sys.executable, "-c", child, url, root, str(args.cells)],
                                                       capture_output=True, text=True, check=True).stdout)
                                  for _ in range(args.repeats))
        print(f"{name}: a fresh process importing SQLAlchemy, opening the store, recording a {args.cells}-cell run "
              f"and computing its history section: median {whole * 1000:.0f} ms ({whole:.2f} % of a 100 s job)",
              flush=True)

        last = queries.latest_run(store, "d0")["id"]
        for label, fn in (
                ("trend subject0[cell3] -n 10", lambda: queries.trend(store, "subject0[cell3]", last=10)),
                ("trend subject0 -n 10 (25 cells)", lambda: queries.trend(store, "subject0", last=10)),
                ("new --device d0", lambda: queries.new_since_green(store, device="d0")),
                ("flaky --device d0 -n 50", lambda: queries.flaky(store, device="d0", last=50)),
                ("flaky -n 500 (the command's default)", lambda: queries.flaky(store, last=500)),
                *((("flaky -n 0 (every run, every device)", lambda: queries.flaky(store)),) if args.every else ()),
                ("slower --device d0", lambda: queries.slower(store, device="d0")),
                ("the results document's history section", lambda: history_section(store, last, "d0"))):
            print(f"{name}: {label}: median {_median(fn, args.repeats) * 1000:.0f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--cells", type=int, default=400)
    parser.add_argument("--devices", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("CONFORMANCE_TEST_POSTGRES_URL"))
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--every", action="store_true",
                        help="also flaky over every recorded run (83 s on SQLite at 10,000 runs here)")
    args = parser.parse_args()
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            bench(f"sqlite:///{tmp}/history.sqlite", "sqlite", args)
    if args.postgres:
        import sqlalchemy as sa

        db = f"bench_{random.randrange(10**8)}"
        admin = sa.create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {db}")
        try:
            bench(args.postgres.rsplit("/", 1)[0] + f"/{db}", "postgresql", args)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


if __name__ == "__main__":
    main()
