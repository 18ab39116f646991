"""Cost and flakiness of the stochastic cells on the correct dropout kernel.

    python bench/stochastic.py cost [--repeats 3] [--device interpreter]
    python bench/stochastic.py flakiness --runs 200 [--jobs 8] [--device cuda]

``cost`` times each stochastic cell of the stochastic kernels under test (median of the
repeats, each with a fresh seed) and prints the elements it launched and the
plan behind its sample sizes.  The target is under 10 s a cell on a 2-core CPU.

``flakiness`` runs every stochastic cell of each subject ``--runs`` times
with fresh seeds and counts failures.  Each run's false-positive rate is at most the model's
alpha (1e-6, split by Bonferroni over the run's checks), so 200 runs expect
at most 200 * 1e-6 = 2e-4 false failures.  Every failure prints its seed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBJECTS = {"relu_dropout": "kernels_under_test.dropout",
            "stochastic_round_bf16": "kernels_under_test.stochastic_rounding"}


def _setup(device: str, name: str):
    if device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, ROOT)
    import importlib

    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.kinds import cells_for
    from triton_conformance.model.subject import get_subject

    importlib.import_module(SUBJECTS[name])
    subject = get_subject(name)
    cells = [c for c in cells_for(subject) if c.startswith("stochastic:")]
    return subject, cells, current_backend(device)


def _run(subject, cell: str, backend, seed: int):
    """One stochastic cell through the runner, as the battery runs it (its duration_s is the runner's)."""
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    return run_cell(subject, cell, backend=backend, config=run_config(device=backend.name, seed=seed))


def _runs(device: str, names: list[str], seeds: list[int], threads: int = 0) -> list[tuple]:
    if threads:  # one torch thread pool per job, or the jobs' pools fight over the cores
        import torch

        torch.set_num_threads(threads)
    rows = []
    t0 = time.perf_counter()
    for name in names:
        subject, cells, backend = _setup(device, name)
        for seed in seeds:
            for cell in cells:
                r = _run(subject, cell, backend, seed)
                smallest = min((t["p_value"] for t in r.details.get("tests", [])), default=1.0)
                rows.append((seed, f"{name}[{cell}]", r.outcome, r.message, r.duration_s, smallest))
    print(f"job of {len(seeds)} seeds done in {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


def cost(args) -> int:
    from triton_conformance.conformance.kinds import stochastic_plan

    worst = 0.0
    for name in args.subjects.split(","):
        subject, cells, backend = _setup(args.device, name)
        plan = stochastic_plan(subject)
        print(f"\n{name} on {backend.name}, {os.cpu_count()} CPUs; {plan.describe()}")
        print("rate trials per level:", {q: n for q, n in plan.rate_trials.items()},
              f"agreement pairs: {plan.agreement_pairs}")
        print(f"{'cell':28s} {'median s':>9s} {'max s':>7s} {'elements':>9s} {'tests':>6s}  outcome")
        worst = max(worst, _cost_table(subject, cells, backend, args.repeats))
    print(f"slowest cell (median): {worst:.2f} s; target < 10 s")
    return 0 if worst < 10 else 1


def _cost_table(subject, cells, backend, repeats) -> float:
    worst = 0.0
    for cell in cells:
        times, elements, outcomes, tests = [], 0, set(), 0
        for i in range(repeats):
            r = _run(subject, cell, backend, 1000 + i)
            times.append(r.duration_s)
            elements, tests = r.details.get("elements", 0), len(r.details.get("tests", []))
            outcomes.add(r.outcome)
        worst = max(worst, statistics.median(times))
        print(f"{cell:28s} {statistics.median(times):9.2f} {max(times):7.2f} {elements:9d} {tests:6d}  "
              f"{','.join(sorted(outcomes))}", flush=True)
    return worst


def flakiness(args) -> int:
    rng = random.SystemRandom()
    seeds = [rng.randrange(2**31) for _ in range(args.runs)]
    chunks = [seeds[i::args.jobs] for i in range(args.jobs)]
    t0 = time.perf_counter()
    names = args.subjects.split(",")
    if args.jobs == 1:
        rows = _runs(args.device, names, seeds)
    else:
        import multiprocessing

        threads = max(1, (os.cpu_count() or 1) // args.jobs)
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            parts = pool.map(_runs, [args.device] * args.jobs, [names] * args.jobs, chunks, [threads] * args.jobs)
            rows = [row for part in parts for row in part]
    failures = [r for r in rows if r[2] != "honoured"]
    smallest = min(r[5] for r in rows)
    print(f"{args.runs} runs x {len(rows) // args.runs} stochastic cells of {', '.join(names)} on {args.device}, "
          f"fresh seeds: {len(failures)} failures in {time.perf_counter() - t0:.0f} s")
    print(f"smallest p-value seen in any test: {smallest:.3g}")
    print(f"expected false failures at alpha 1e-6 per subject and run: at most {args.runs * len(names) * 1e-6:.1e}")
    slowest = sorted(r[4] for r in rows)
    print(f"cell seconds: median {statistics.median(slowest):.2f}, max {slowest[-1]:.2f}")
    for seed, cell, outcome, message, *_ in failures:
        print(f"  seed {seed}: {cell} {outcome}: {message[:300]}")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--repeats", type=int, default=3)
    c.add_argument("--device", default="interpreter", choices=("interpreter", "cuda"))
    c.add_argument("--subjects", default=",".join(SUBJECTS))
    f = sub.add_parser("flakiness")
    f.add_argument("--runs", type=int, default=200)
    f.add_argument("--jobs", type=int, default=1)
    f.add_argument("--device", default="interpreter", choices=("interpreter", "cuda"))
    f.add_argument("--subjects", default=",".join(SUBJECTS))
    args = parser.parse_args()
    return cost(args) if args.command == "cost" else flakiness(args)


if __name__ == "__main__":
    sys.exit(main())
