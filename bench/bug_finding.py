"""Bug-finding power: four testers against the bug zoo, and their false alarms on the correct kernels.

    PYTHONPATH=. python bench/bug_finding.py --out bench/results/cpu-2026-11-30 [--workers 2]
    PYTHONPATH=. python bench/bug_finding.py --testers fixed,suite --bugs softmax --runs 2
    PYTHONPATH=.:/tmp/site python3 bench/bug_finding.py --device cuda --workers 8 --budget 420 --out $OUT/bug_finding

Testers (bench/testers/): ``fixed`` (KernelBench-style: 5 random trials at one
moderate shape), ``grid`` (a tutorial-style parametrize grid), ``gpucheck``
(gpucheck 0.1.0's edge and fuzzed shapes with its assert_close; needs gpucheck
importable, or ``--gpucheck-site DIR``), ``suite`` (this suite's cells, ci
profile, canonical order).

Detection: each tester runs on each zoo bug until its first failure (the
failing case or cell, the time to it, the size of its counterexample).  False
alarms: ``--runs`` runs of each tester on every correct kernel
(``kernels_under_test`` subjects without ``xfail``) with fresh seeds; the suite
uses its ``dev`` profile there.  Each task runs in a forked child, ``--workers``
at a time.  Writes ``bug_finding.json`` and ``bug_finding.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import pkgutil
import platform
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="interpreter", choices=("interpreter", "cuda"))
    parser.add_argument("--testers", default="fixed,grid,gpucheck,suite", help="comma-separated tester names")
    parser.add_argument("--bugs", default="", help="comma-separated substrings of zoo bug names (default: all)")
    parser.add_argument("--runs", type=int, default=20, help="false-alarm runs per tester (0: none)")
    parser.add_argument("--runs-per-tester", default="", help="overrides of --runs, e.g. gpucheck=5,suite=3")
    parser.add_argument("--workers", type=int, default=2, help="tasks run at once, each in a forked process")
    parser.add_argument("--no-detect", action="store_true", help="only the false-alarm runs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the hand-written testers' detection runs")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds after which no new task starts (e.g. under a 600 s limit); the rest is 'not run'")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a task is killed")
    parser.add_argument("--gpucheck-site", default=None, help="a pip --target directory holding gpucheck 0.1.0")
    parser.add_argument("--from-json", default=None,
                        help="recompute the summary and tables of an earlier bug_finding.json (runs nothing)")
    parser.add_argument("--out", default=None, help="directory for bug_finding.json and bug_finding.md")
    args = parser.parse_args(argv)
    for name in ("runs", "workers"):
        if getattr(args, name) < (0 if name == "runs" else 1):
            parser.error(f"--{name}={getattr(args, name)}, expected {'>= 0' if name == 'runs' else '>= 1'}")
    try:
        args.runs_for = {k: int(v) for k, v in (item.split("=") for item in args.runs_per_tester.split(",") if item)}
    except ValueError:
        parser.error(f"--runs-per-tester={args.runs_per_tester!r}, expected NAME=RUNS[,NAME=RUNS...]")
    if any(n < 0 for n in args.runs_for.values()):
        parser.error(f"--runs-per-tester={args.runs_per_tester!r}, expected runs >= 0")
    return args


def load_subjects():
    """Import every kernels_under_test module and the zoo; return (correct subjects, zoo bugs)."""
    import kernels_under_test
    from tests.zoo import all_bugs
    from triton_conformance.model.subject import registry

    for info in pkgutil.iter_modules(kernels_under_test.__path__):
        importlib.import_module(f"kernels_under_test.{info.name}")
    bugs = all_bugs()
    correct = [s for s in registry if s.xfail is None and s.module.startswith("kernels_under_test.")]
    return correct, bugs


def make_backend(device: str):
    """The backend; on CUDA it is built without touching the GPU, so that children can fork."""
    from triton_conformance.conformance.backend import Backend

    if device == "cuda":
        return Backend(name="cuda", device="cuda")
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from triton_conformance.conformance.backend import current_backend

    return current_backend("interpreter")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    if args.gpucheck_site:
        os.environ["GPUCHECK_SITE"] = os.path.abspath(args.gpucheck_site)
    from bench.testers import make_tester
    from bench.testers.pool import run_tasks
    from bench.testers.report import bug_table, summary_table
    from bench.testers.summary import detection_status, summarize
    from triton_conformance import get_subject
    from triton_conformance.conformance.kinds import kind_of

    if args.from_json:
        return resummarize(args)
    testers = {name: make_tester(name) for name in args.testers.split(",") if name}
    unknown = sorted(set(args.runs_for) - set(testers))
    if unknown:
        raise SystemExit(f"--runs-per-tester names {unknown}, expected testers from --testers={args.testers!r}")
    backend = make_backend(args.device)
    correct, bugs = load_subjects()
    if args.device == "cuda":
        import torch

        if torch.cuda.is_initialized():  # forked children could not use the GPU
            raise SystemExit("bench/bug_finding.py: CUDA was initialized while importing the subjects; "
                             "the workers fork, so the parent must not touch the GPU")
    wanted = [w for w in args.bugs.split(",") if w]
    bugs = [] if args.no_detect else [b for b in bugs if not wanted or any(w in b[0] for w in wanted)]
    if not bugs and wanted:
        raise SystemExit(f"--bugs={args.bugs!r} matches no zoo bug")
    unavailable = {name: t.unavailable() for name, t in testers.items()}
    stochastic = [b[0] for b in bugs if get_subject(b[0]).contract.model is not None]
    print(f"{len(bugs)} zoo bugs ({len(stochastic)} stochastic), {len(correct)} correct kernels, "
          f"testers {list(testers)}, device {args.device}, workers {args.workers}", flush=True)
    for name, why in unavailable.items():
        if why:
            print(f"tester {name} unavailable: {why}", flush=True)

    progress_dir = tempfile.mkdtemp(prefix="bug-finding-")

    def progress_file(task) -> str:
        return os.path.join(progress_dir, "-".join(str(x) for x in task))

    def task_fn(task):
        kind, tester, subject, seed = task
        os.environ["BUG_FINDING_PROGRESS"] = progress_file(task)  # this child only
        run = testers[tester].run(get_subject(subject), seed=seed, device=backend.device,
                                  untestable=backend.untestable, backend=backend, randomize=(kind == "fa"))
        return run.to_dict()

    rng = random.SystemRandom()
    tasks = []
    for name in testers:
        if unavailable[name]:
            continue
        runs = args.runs_for.get(name, args.runs)
        tasks += [("fa", name, s.name, rng.randrange(2**31)) for _ in range(runs) for s in correct]
        tasks += [("detect", name, b[0], args.seed) for b in bugs]
    tasks.sort(key=lambda t: t[1] != "suite")  # the long suite tasks first: a shorter makespan

    meta = {b[0]: b for b in bugs}
    detections, alarms = [], []
    for name, why in unavailable.items():
        if why:
            detections += [{"tester": name, "bug": b[0], "intended_cell": b[1], "status": "unavailable",
                            "message": why} for b in bugs]

    def on_result(task, result, wall):
        kind, tester, subject, seed = task
        status, fields = detection_status(result)
        if fields.get("seconds") is None and status == "caught":  # a dead or killed child: its wall time
            fields["seconds"] = round(wall, 3)
        if "died" in result or "timeout" in result:  # place it at the case the child was running
            with contextlib.suppress(OSError), open(progress_file(task)) as f:
                fields["case"] = f"{f.read()} ({fields['case']})"
        record = {"tester": tester, "subject": subject, "seed": seed, "status": status, "wall_s": round(wall, 3),
                  **fields}
        if kind == "detect":
            _, cell, outcome, finding = meta[subject]
            cell_kind, value = kind_of(cell)
            record.update(bug=subject, intended_cell=cell, expected=f"{outcome}/{finding}",
                          detectable=cell_kind.skip_reason(get_subject(subject), value, backend) is None)
            detections.append(record)
            print(f"[detect] {tester:8s} {subject:40s} {status:8s} {record.get('case')} "
                  f"{record.get('seconds') or 0:.2f}s size={record.get('size')}", flush=True)
        else:
            alarms.append(record)
            verdict = {"caught": "FALSE ALARM", "missed": "ok"}.get(status, status)
            print(f"[runs]   {tester:8s} {subject:40s} {verdict:8s} {record.get('case') or ''} {wall:.1f}s "
                  f"{record.get('message', '')[:200] if status != 'missed' else ''}", flush=True)

    t0 = time.perf_counter()
    left = run_tasks(tasks, task_fn, workers=args.workers, timeout=args.timeout, on_result=on_result,
                     budget=args.budget)
    wall = time.perf_counter() - t0
    if left:
        print(f"--budget={args.budget}: {len(left)} of {len(tasks)} tasks not run "
              f"({sum(t[0] == 'detect' for t in left)} detections)", flush=True)
    order = {b[0]: i for i, b in enumerate(bugs)}
    detections.sort(key=lambda d: (list(testers).index(d["tester"]), order[d["bug"]]))
    summaries = [summarize(name, detections, alarms, unavailable[name]) for name in testers]
    tables = summary_table(summaries) + "\n\n" + bug_table(detections, list(testers))
    print("\n" + tables + f"\n\nwall time {wall:.0f} s", flush=True)
    doc = {
        "command": " ".join([os.path.basename(sys.executable), "bench/bug_finding.py", *sys.argv[1:]]),
        "args": vars(args), "wall_s": wall, "stochastic_bugs": stochastic, "tasks_not_run": [list(t) for t in left],
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    **_versions()},
        "summaries": summaries, "detections": detections, "false_alarm_runs": alarms,
    }
    if args.out:
        write(doc, tables, args.out)
    errors = sum(s["errors"] for s in summaries)
    return 1 if errors else 0


def resummarize(args) -> int:
    """Recompute the summaries and tables of an earlier run's JSON (the records are kept as they are)."""
    from bench.testers.report import bug_table, summary_table
    from bench.testers.summary import TIMEOUT, TIMEOUT_MESSAGE, summarize

    with open(args.from_json) as f:
        doc = json.load(f)
    for record in doc["detections"] + doc["false_alarm_runs"]:  # older runs counted a timeout as caught
        if record.get("message") == TIMEOUT_MESSAGE:
            record["status"] = TIMEOUT
    testers = [s["tester"] for s in doc["summaries"]]
    unavailable = {s["tester"]: s["unavailable"] for s in doc["summaries"]}
    doc["summaries"] = [summarize(t, doc["detections"], doc["false_alarm_runs"], unavailable[t]) for t in testers]
    tables = summary_table(doc["summaries"]) + "\n\n" + bug_table(doc["detections"], testers)
    print(tables)
    if args.out:
        write(doc, tables, args.out)
    return 0


def write(doc: dict, tables: str, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "bug_finding.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    with open(os.path.join(out, "bug_finding.md"), "w") as f:
        f.write(f"`{doc['command']}` on {doc['machine']['platform']}, {doc['machine']['cpus']} CPUs, "
                f"wall {doc['wall_s']:.0f} s\n\n{tables}\n")


def _versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "triton"):
        try:
            out[name] = importlib.import_module(name).__version__
        except ImportError:
            out[name] = "absent"
    return out


if __name__ == "__main__":
    sys.exit(main())
