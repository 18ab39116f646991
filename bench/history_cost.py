"""What the results history costs, before and after a change, side by side in one run: recording a 400-cell run
(in the process, and in a fresh one as a run pays it), and each ``history`` query over many runs.

    python bench/history_cost.py [--runs 10000] [--cells 400] [--devices 25] [--repeats 3]
                                 [--before REV] [--every] [--keep DIR]
    python bench/history_cost.py --recording [--main-job-seconds S] [--repeats 11] [--prior 50]

``--recording``: what recording adds to the main job, in one run on this machine, under its load as it is.  It
runs the main job (tox's conformance command: ``triton-conformance run --device interpreter --profile ci -n 2``,
history off, results in a scratch directory) and times it, unless ``--main-job-seconds`` gives a figure; then it
times the plugin's recording hook (``plugin.history.record_run``: open the store, record the run, the results
document's history section, as the session does at its end) ``--repeats`` times on a 400-cell run and on the
main job's own results, into a SQLite store already holding ``--prior`` runs of the device: in this process
(SQLAlchemy imported, every statement compiled anew: each call opens its own engine), and in a fresh process
each time (SQLAlchemy's import and the history modules' too: what the main job pays, since it records once; the
plugin's module, with pytest, is loaded before the clock starts, as it is in the session).

Synthetic data: ``--runs`` runs spread over ``--devices`` devices (a year of nightly runs over 25 devices is
about 10,000), ``--cells`` cells each, a few of them failing or flipping; each commit is run twice per device,
and the commits are real ones of a scratch git repository, so that ``first-bad`` orders them with git.

The store is loaded once, by the package at ``--before`` (default ``main``: its schema, its indexes), and
copied; the before package measures one copy, this checkout's the other (opening it upgrades the schema in
place: that migration is timed too).  Each side runs in a process of its own, with only its package on the
path.  SQLite only: the PostgreSQL figures in docs/history.md are the previous benchmark's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def _scratch_repo(path: str, count: int) -> list[str]:
    """A git repository of ``count`` empty commits in a line (git fast-import: a second for thousands)."""
    subprocess.run(["git", "init", "-q", path], check=True)
    stream = "".join(f"commit refs/heads/main\nmark :{i + 1}\ncommitter b <b@b> {1700000000 + i} +0000\n"
                     f"data 2\nc\n" + (f"from :{i}\n" if i else "") + "\n" for i in range(count))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=stream, text=True, check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=path, check=True)
    return subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=path, capture_output=True, text=True,
                          check=True).stdout.split()


def _fill(url: str, args: argparse.Namespace, commits: list[str]) -> None:
    """Bulk-load synthetic runs through the driver (the columns every schema version has)."""
    from triton_conformance.history.store import HistoryStore

    base = _document(args.cells, 0, "d0")["results"]
    cols = ("run_id", "subject", "cell", "outcome", "finding", "message", "examples", "duration_s", "compiles")
    with HistoryStore(url) as store:
        for start in range(0, args.runs, 100):
            with store.engine.begin() as conn:
                mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
                run_rows = [(commits[(i // args.devices) // 2], f"d{i % args.devices}", 1.7e9 + i * 3600,
                             1.7e9 + i * 3600 + 100, True, args.cells, 1 if i % 7 == 0 else 0, "nightly")
                            for i in range(start, min(args.runs, start + 100))]
                ids = [conn.exec_driver_sql(
                    'INSERT INTO runs ("commit", device, started, ended, complete, cells, failing, profile) '
                    f"VALUES ({', '.join([mark] * 8)}) RETURNING id", row).scalar_one() for row in run_rows]
                rows = [(run_id, r["subject"], r["cell"], "wrong" if (run_id * 31 + j) % 97 == 0 else "honoured",
                         None, r["message"], r["examples"], r["duration_s"], r["compiles"])
                        for run_id in ids for j, r in enumerate(base)]
                conn.exec_driver_sql(f"INSERT INTO cells ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))})",
                                     rows)


def _median(fn, repeats: int) -> tuple[float, float]:  # noqa: ANN001
    """(wall, CPU) seconds of ``fn``, each the median of ``repeats`` calls: the CPU time (this process's) is what
    the query itself costs, whatever the shared machine's load does to the wall clock."""
    walls, cpus = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


# What a run pays in all, in a fresh process: import SQLAlchemy, open the store, record, the history section.
CHILD = ("import sys, time; t = time.perf_counter(); sys.path[:0] = [sys.argv[2], sys.argv[3]]; "
         "from history_cost import _document; "
         "from triton_conformance.history.store import HistoryStore; "
         "from triton_conformance.history.section import history_section; "
         "s = HistoryStore(sys.argv[1]); i = s.record(_document(int(sys.argv[4]), 99, 'd0')); "
         "history_section(s, i, 'd0'); print(time.perf_counter() - t)")


def _measure(url: str, args: argparse.Namespace, repo: str) -> dict[str, float]:
    """Seconds per figure, with the package on the path (the side this process measures)."""
    from triton_conformance.history import queries
    from triton_conformance.history.bisect import first_bad
    from triton_conformance.history.section import history_section
    from triton_conformance.history.store import HistoryStore

    try:  # after: the flake count has a module of its own; before: it was in queries
        from triton_conformance.history.flakes import flaky
    except ImportError:
        flaky = queries.flaky
    out = {}
    holder = []
    out["open the store (after: the upgrade to schema 4, once)"] = _median(lambda: holder.append(HistoryStore(url)), 1)
    store = holder[0]
    out["open the store again"] = _median(lambda: HistoryStore(url).close(), args.repeats)
    seeds = iter(range(1, 10**6))
    out["record one run (store open)"] = _median(
        lambda: store.record(_document(args.cells, next(seeds), "d0"), git={"commit": "x"}), args.repeats)
    fresh = []
    for _ in range(args.repeats):
        before = os.times()
        wall = float(subprocess.run([sys.executable, "-c", CHILD, url, sys.path[0], os.path.join(ROOT, "bench"),
                                     str(args.cells)], capture_output=True, text=True, check=True).stdout)
        after = os.times()
        fresh.append((wall, after.children_user - before.children_user + after.children_system
                      - before.children_system))
    out["a fresh process: import, open, record, the section"] = (statistics.median(f[0] for f in fresh),
                                                                 statistics.median(f[1] for f in fresh))
    last = queries.latest_run(store, "d0")["id"]
    cell = "subject0[cell3]"
    figures = [
        ("trend subject0[cell3] -n 10", lambda: queries.trend(store, cell, last=10)),
        ("trend subject0 -n 10 (25 cells)", lambda: queries.trend(store, "subject0", last=10)),
        ("new", lambda: queries.new_since_green(store)),
        ("new --device d0", lambda: queries.new_since_green(store, device="d0")),
        ("flaky --device d0 -n 50", lambda: flaky(store, device="d0", last=50)),
        ("flaky -n 50 (every device)", lambda: flaky(store, last=50)),
        ("flaky -n 500 (per device) [once]", lambda: flaky(store, last=500)),
        *((("flaky -n 0 (every run, every device) [once]", lambda: flaky(store, last=None)),) if args.every else ()),
        ("slower --device d0", lambda: queries.slower(store, device="d0")),
        ("slower (every device)", lambda: queries.slower(store)),
        (f"first-bad {cell} (git order of {args.runs // args.devices // 2} commits)",
         lambda: first_bad(store, cell, repo, device="d0", workdir=os.path.join(repo, ".conformance"))),
        ("the results document's history section", lambda: history_section(store, last, "d0"))]
    for label, fn in figures:
        out[label] = _median(fn, 1 if label.endswith("[once]") else args.repeats)  # the slow ones: once
        print(f"  {label}: {out[label][0] * 1000:.0f} ms, CPU {out[label][1] * 1000:.0f} ms", file=sys.stderr,
              flush=True)
    store.close()
    return out


def _record_once(url: str, document: dict) -> float:
    from triton_conformance.plugin.history import record_run

    t = time.perf_counter()
    section = record_run(url, document, started=time.time(), root=ROOT)
    took = time.perf_counter() - t
    if section is None:
        raise SystemExit("the recording failed (said above)")
    return took


# The hook in a fresh process, timed from before its imports (SQLAlchemy's first), the plugin's module and pytest
# loaded before, as in the session that records: argv = url, document, root.
FRESH = ("import json, sys, time; from triton_conformance.plugin.history import record_run; "
         "doc = json.load(open(sys.argv[2])); t = time.perf_counter(); import sqlalchemy; i = time.perf_counter(); "
         "assert record_run(sys.argv[1], doc, started=time.time(), root=sys.argv[3]) is not None; "
         "print(i - t, time.perf_counter() - t)")


def _recording(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="history-recording.")
    env = {**os.environ, "PYTHONPATH": ROOT}
    main_doc = None
    if args.main_job_seconds is None:
        results = os.path.join(work, "results", "results.json")
        argv = [sys.executable, "-m", "triton_conformance.cli", "run", "--device", "interpreter", "--profile", "ci",
                "-n", "2", "--history", "none", "--results", results]
        print("the main job:", " ".join(argv[1:]), flush=True)
        before = os.times()
        t = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        main_s = time.perf_counter() - t
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        with open(results) as f:
            main_doc = json.load(f)
        print(f"  {len(main_doc['results'])} cells, exit {done.returncode}: {main_s:.1f} s wall, {cpu:.1f} s CPU "
              f"(user+sys of its processes)", flush=True)
    else:
        main_s = args.main_job_seconds
        print(f"the main job: {main_s:.1f} s (given, not measured in this run)")
    docs = {f"a {args.cells}-cell run": _document(args.cells, 99, "interpreter")}
    if main_doc is not None:
        docs[f"the main job's own results ({len(main_doc['results'])} cells)"] = main_doc
    print(f"\nthe recording hook, median of {args.repeats}, into a store holding {args.prior} runs of the device:")
    sys.path[:0] = [ROOT]
    rows = []
    for label, doc in docs.items():
        url = f"sqlite:///{os.path.join(work, f'store{len(rows)}.sqlite')}"
        from triton_conformance.history.store import HistoryStore
        with HistoryStore(url) as store:
            for i in range(args.prior):
                store.record(doc, git={"commit": f"prior{i // 2}"}, started=time.time() - 86400 + i)
        path = os.path.join(work, "doc.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        here = statistics.median(_record_once(url, doc) for _ in range(args.repeats))
        fresh = [tuple(map(float, subprocess.run([sys.executable, "-c", FRESH, url, path, ROOT], env=env,
                                                 capture_output=True, text=True, check=True).stdout.split()))
                 for _ in range(args.repeats)]
        imports, whole = statistics.median(f[0] for f in fresh), statistics.median(f[1] for f in fresh)
        rows.append((label, here, whole, imports))
    width = max(len(r[0]) for r in rows)
    print(f"{'':<{width}}  {'in process':>12}  {'fresh process':>14}  {'of which import sqlalchemy':>26}")
    for label, here, whole, imports in rows:
        print(f"{label:<{width}}  {here:9.3f} s   {whole:11.3f} s   {imports:23.3f} s")
    for label, here, whole, _ in rows:
        print(f"{label}: {100 * here / main_s:.2f} % of the main job's {main_s:.1f} s in process, "
              f"{100 * whole / main_s:.2f} % in a fresh process")
    shutil.rmtree(work, ignore_errors=True)


def _side(role: str, package: str, url: str, args: argparse.Namespace, extra: list[str]) -> dict | None:
    argv = [sys.executable, os.path.abspath(__file__), "--role", role, "--package", package, "--url", url,
            "--runs", str(args.runs), "--cells", str(args.cells), "--devices", str(args.devices),
            "--repeats", str(args.repeats), *(["--every"] if args.every else []), *extra]
    out = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
    return json.loads(out.stdout) if out.stdout.strip() else None


def _copy(src: str, dst: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, dst + suffix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--cells", type=int, default=400)
    parser.add_argument("--devices", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", default="main", help="the revision measured as 'before' [default: main]")
    parser.add_argument("--every", action="store_true",
                        help="also flaky over every recorded run (83 s before, on SQLite at 10,000 runs here)")
    parser.add_argument("--recording", action="store_true",
                        help="what recording adds to the main job (its time against the recording hook's)")
    parser.add_argument("--main-job-seconds", type=float, default=None,
                        help="with --recording: this figure for the main job instead of running it")
    parser.add_argument("--prior", type=int, default=50,
                        help="with --recording: runs already in the store [default: 50, the flake window]")
    parser.add_argument("--keep", default=None, help="work in this directory and leave it (else a temporary one)")
    parser.add_argument("--role", choices=("fill", "measure"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--package", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--repo", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.recording:
        _recording(args)
        return
    if args.role:  # one side, in its own process: only its package on the path
        sys.path[:0] = [args.package, os.path.join(ROOT, "bench")]
        commits = subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=args.repo, capture_output=True,
                                 text=True, check=True).stdout.split()
        if args.role == "fill":
            _fill(args.url, args, commits)
        else:
            print(json.dumps(_measure(args.url, args, args.repo)))
        return
    work = args.keep or tempfile.mkdtemp(prefix="history-cost.")
    os.makedirs(work, exist_ok=True)
    before = os.path.join(work, "before")
    shutil.rmtree(before, ignore_errors=True)
    os.makedirs(before)
    archive = subprocess.run(["git", "archive", args.before, "triton_conformance"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", before], input=archive, check=True)
    repo = os.path.join(work, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    _scratch_repo(repo, max(1, args.runs // args.devices // 2 + 1))
    loaded = os.path.join(work, "loaded.sqlite")
    if not os.path.exists(loaded):
        t = time.perf_counter()
        _side("fill", before, f"sqlite:///{loaded}", args, ["--repo", repo])
        print(f"loaded {args.runs} runs x {args.cells} cells with {args.before}'s schema in "
              f"{time.perf_counter() - t:.0f} s", flush=True)
    figures = {}
    for name, package in ((f"before ({args.before})", before), ("after (this checkout)", ROOT)):
        copy = os.path.join(work, f"{name.split()[0]}.sqlite")
        _copy(loaded, copy)
        print(f"{name}:", file=sys.stderr, flush=True)
        figures[name] = _side("measure", package, f"sqlite:///{copy}", args, ["--repo", repo])
        os.remove(copy)
    (b, before_fig), (a, after_fig) = figures.items()
    width = max(len(k) for k in after_fig)
    print(f"\nSQLite, {args.runs} runs x {args.cells} cells over {args.devices} devices; median of {args.repeats}, ms "
          f"(wall, and CPU: this process's, or the fresh process's own)")
    print(f"{'':<{width}}  {'before':>9}  {'after':>9}  {'CPU before':>10}  {'CPU after':>10}")
    for label, (wall, cpu) in after_fig.items():
        old = before_fig.get(label) or ("", "")
        shown = [f"{v * 1000:.0f}" if v != "" else "" for v in (old[0], wall, old[1], cpu)]
        print(f"{label:<{width}}  {shown[0]:>9}  {shown[1]:>9}  {shown[2]:>10}  {shown[3]:>10}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
