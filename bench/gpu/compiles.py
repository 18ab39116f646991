"""Count Triton compilations per subject over every cell of kernels_under_test, on CUDA.

Usage (from the repository root, on a machine with a GPU)::

    python bench/gpu/compiles.py [--out DIR] [--profile nightly] [--budget N] [--subjects add,softmax]
                                 [--max-examples N] [--jobs 2]

Each subject runs in its own child process (a fresh in-memory kernel cache,
and a CUDA context that a crashing cell cannot take from the next subject),
all of its cells in order, as the nightly command does.  A compilation is a
specialization Triton builds (or loads from its disk cache) on an in-memory
cache miss, counted through ``knobs.runtime.jit_cache_hook``; under a budget
(the profile's, 16 for nightly; ``--budget 0`` for none) examples that would
need more are discarded, and counted.

Prints one line per subject: cells run, compilations (the issue's target is
at most 16 with the nightly profile), examples discarded for the budget,
failing cells, seconds.  Writes ``compiles.txt`` and ``compiles.json`` (every
cell's outcome, compiles and message) under ``--out`` (default ``$OUT``,
else ``compiles-results``).  ``--jobs 2`` runs two subjects at once, one per
GPU (CUDA_VISIBLE_DEVICES), on a machine with two.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL_MODULES = ["kernels_under_test.vector_add", "kernels_under_test.softmax", "kernels_under_test.gemv",
                  "kernels_under_test.attention", "kernels_under_test.flash_attention",
                  "kernels_under_test.layer_norm", "kernels_under_test.matmul", "kernels_under_test.dropout"]


def _import_kernels() -> None:
    import importlib

    for name in KERNEL_MODULES:
        importlib.import_module(name)


def child(subject_name: str, profile: str, budget: str, max_examples: str, device: str) -> dict:
    """Run every cell of one subject on ``device`` (cuda; interpreter for a smoke test) in this child process."""
    sys.path.insert(0, ROOT)
    _import_kernels()
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.search.compiles import LEDGER
    from triton_conformance.conformance.kinds import cells_for
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config
    from triton_conformance.model.subject import get_subject

    backend = current_backend(device)
    subject = get_subject(subject_name)
    # "profile": the profile's budget; "0": no limit; N: at most N compilations for the subject
    config = run_config(device=device, profile=profile, compile_budget=None if budget == "profile" else budget,
                        max_examples=int(max_examples) or None)
    limit = config.compile_budget
    cells = []
    start = time.perf_counter()
    for cell in cells_for(subject):
        t = time.perf_counter()
        try:
            r = run_cell(subject, cell, backend=backend, config=config)
            row = {"cell": cell, "outcome": r.outcome, "finding": r.finding, "compiles": r.compiles,
                   "examples": r.examples, "discarded": (r.details or {}).get("compile_budget_discarded", 0),
                   "seconds": round(time.perf_counter() - t, 3), "message": r.message[:500]}
        except Exception as exc:  # noqa: BLE001 - a harness error in one cell is reported, the rest still run
            row = {"cell": cell, "outcome": "harness-error", "finding": type(exc).__name__, "compiles": None,
                   "examples": 0, "discarded": 0, "seconds": round(time.perf_counter() - t, 3),
                   "message": str(exc)[:500]}
        cells.append(row)
    return {"subject": subject_name, "budget": limit, "profile": profile, "cells": cells,
            "compiles": sum(c["compiles"] or 0 for c in cells), "distinct_specializations": LEDGER.used(subject_name),
            "discarded": sum(c["discarded"] for c in cells), "seconds": round(time.perf_counter() - start, 3)}


def run_child(name: str, args: argparse.Namespace, gpu: str | None) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if args.device == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    command = [sys.executable, os.path.abspath(__file__), "--child", name, args.profile, args.budget,
               str(args.max_examples), args.device]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"subject": name, "error": f"no answer in {args.timeout} s", "seconds": args.timeout}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"subject": name, "error": f"exit status {proc.returncode}: {(proc.stderr or proc.stdout)[-3000:]}",
            "seconds": round(time.perf_counter() - start, 3)}


def summary_line(r: dict) -> str:
    if "error" in r:
        return f"{r['subject']:<24} ERROR {r['error'][:400]}"
    failing = [f"{c['cell']}={c['outcome']}" for c in r["cells"] if c["outcome"] not in ("honoured", "rejected",
                                                                                          "skipped")]
    ran = sum(1 for c in r["cells"] if c["outcome"] != "skipped")
    return (f"{r['subject']:<24} cells {ran:>3}  compiles {r['compiles']:>4}  (distinct {r['distinct_specializations']:>3})"
            f"  discarded {r['discarded']:>5}  {r['seconds']:>8.1f} s  failing: {', '.join(failing) or '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "compiles-results")
    parser.add_argument("--profile", default="nightly", choices=("dev", "ci", "nightly"))
    parser.add_argument("--budget", default="profile", help="compilations per subject; 0 = no limit; "
                        "'profile' (default): the profile's (nightly: 16)")
    parser.add_argument("--subjects", default="", help="comma-separated subject names (default: all)")
    parser.add_argument("--max-examples", type=int, default=0, help="examples per cell (default: the profile's)")
    parser.add_argument("--jobs", type=int, default=1, help="subjects at once, one GPU each")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per subject")
    parser.add_argument("--device", default="cuda", choices=("cuda", "interpreter"),
                        help="cuda (default); interpreter only to smoke-test this script on a CPU")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0
    if args.budget != "profile" and not args.budget.isdigit():
        parser.error(f"--budget={args.budget!r}, expected a number of compilations (0: no limit) or 'profile'")
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs}, expected at least 1")
    sys.path.insert(0, ROOT)
    _import_kernels()
    from triton_conformance.model.subject import registry

    names = [s.name for s in registry if s.xfail is None]
    if args.subjects:
        wanted = [n.strip() for n in args.subjects.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            parser.error(f"--subjects: unknown {unknown}, expected some of {names}")
        names = wanted
    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    free: queue.Queue = queue.Queue()  # one GPU per running child
    for i in range(args.jobs):
        free.put(str(i) if args.jobs > 1 else None)

    lock = threading.Lock()
    partial = os.path.join(args.out, "compiles.partial.jsonl")  # what finished, should the run be cut short
    open(partial, "w").close()

    def one(name: str) -> dict:
        gpu = free.get()
        try:
            result = run_child(name, args, gpu)
        finally:
            free.put(gpu)
        with lock:
            print(summary_line(result), flush=True)
            with open(partial, "a") as f:
                f.write(json.dumps(result) + "\n")
        return result

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, names))
    lines = [summary_line(r) for r in results]
    total = sum(r.get("compiles", 0) for r in results)
    worst = max((r.get("compiles", 0) for r in results), default=0)
    lines.append(f"total compiles {total}, most for one subject {worst}, wall {time.perf_counter() - started:.1f} s "
                 f"(profile {args.profile}, budget {args.budget})")
    print(lines[-1])
    with open(os.path.join(args.out, "compiles.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "compiles.json"), "w") as f:
        json.dump(results, f, indent=2)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
