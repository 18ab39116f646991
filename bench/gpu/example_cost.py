"""Where a nightly cell's time goes on CUDA: per stage of an example, discarded examples, Hypothesis.

Usage (from the repository root, on a machine with a GPU)::

    python bench/gpu/example_cost.py [--subjects add,softmax] [--budget 16] [--jobs 4] [--out DIR]

Each subject runs every cell of the nightly profile in its own child process
(``--jobs`` of them at once, all on the first visible GPU), with timers around
the stages of :func:`run_example`: building inputs, the launcher call
(compile included), the oracle comparison and the memory checks.  An example
the compile budget discards is timed apart.  What is left of a cell's time is
Hypothesis (drawing, shrinking) and the runner.  Writes ``example_cost.txt``
and one cProfile dump per subject under ``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))

PROFILE = os.environ.get("COST_PROFILE", "nightly")
STAGES = ("build_inputs", "_call", "_compare_outputs", "_memory_findings")


def child(name: str, budget: str, out: str, device: str = "cuda") -> dict:
    sys.path.insert(0, ROOT)
    from compiles import _import_kernels

    _import_kernels()
    from triton_conformance.model.config import run_config
from triton_conformance.conformance import checks, runner
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.cells import cells_for
    from triton_conformance.conformance.compiles import BudgetExhausted
    from triton_conformance.model.subject import get_subject

    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def timed(label, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            except BudgetExhausted:
                label2 = label + " (discarded)"
                spent[label2] += time.perf_counter() - t
                calls[label2] += 1
                raise
            finally:
                spent[label] += time.perf_counter() - t
                calls[label] += 1
        return wrapper

    for stage in STAGES:
        setattr(checks, stage, timed(stage, getattr(checks, stage)))
    runner.run_example = timed("run_example", runner.run_example)
    backend = current_backend(device)
    subject = get_subject(name)
    rows = []
    profile = cProfile.Profile()
    start = time.perf_counter()
    for cell in cells_for(subject.contract):
        before = dict(spent)
        t = time.perf_counter()
        profile.enable()
        r = runner.run_cell(subject, cell, backend=backend, config=run_config(profile=PROFILE, compile_budget=int(budget)))
        profile.disable()
        seconds = time.perf_counter() - t
        in_examples = spent["run_example"] - before.get("run_example", 0.0)
        discarded = spent["run_example (discarded)"] - before.get("run_example (discarded)", 0.0)
        rows.append({"cell": cell, "outcome": r.outcome, "seconds": round(seconds, 3), "examples": r.examples,
                     "discarded": (r.details or {}).get("compile_budget_discarded", 0), "compiles": r.compiles,
                     "in_examples_s": round(in_examples, 3), "in_discards_s": round(discarded, 3),
                     "elsewhere_s": round(seconds - in_examples, 3)})
    total = time.perf_counter() - start
    profile.dump_stats(os.path.join(out, f"{name}.prof"))
    with open(os.path.join(out, f"{name}.pstats.txt"), "w") as f:
        pstats.Stats(os.path.join(out, f"{name}.prof"), stream=f).sort_stats("cumulative").print_stats(60)
    return {"subject": name, "seconds": round(total, 3), "cells": rows,
            "stages": {k: [round(v, 3), calls[k]] for k, v in spent.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default="attention_naive,softmax,add,gemv")
    parser.add_argument("--budget", default="16")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--out", default=os.environ.get("OUT") or "example-cost")
    parser.add_argument("--device", default="cuda", choices=("cuda", "interpreter"))
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0
    os.makedirs(args.out, exist_ok=True)

    def one(name: str) -> dict:
        env = dict(os.environ, TRITON_INTERPRET="1") if args.device == "interpreter" else None
        command = [sys.executable, os.path.abspath(__file__), "--child", name, args.budget, args.out, args.device]
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        return {"subject": name, "error": proc.stderr[-3000:]}

    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, args.subjects.split(",")))
    lines = []
    for r in results:
        if "error" in r:
            lines.append(f"{r['subject']}: ERROR {r['error']}")
            continue
        lines.append(f"{r['subject']}: {r['seconds']} s over {len(r['cells'])} cells")
        for stage, (sec, n) in sorted(r["stages"].items()):
            lines.append(f"    {stage:<32} {sec:8.2f} s  {n:6d} calls  {1000 * sec / max(n, 1):8.1f} ms each")
        for c in r["cells"]:
            lines.append(f"    {c['cell']:<26} {c['outcome']:<9} {c['seconds']:6.2f} s  ex {c['examples']:>3}  "
                         f"disc {c['discarded']:>3}  comp {c['compiles']}  examples {c['in_examples_s']:.2f} s  "
                         f"of which discards {c['in_discards_s']:.2f} s  elsewhere {c['elsewhere_s']:.2f} s")
    lines.append(f"wall {time.perf_counter() - started:.1f} s, {args.jobs} at once on one GPU")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "example_cost.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "example_cost.json"), "w") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
