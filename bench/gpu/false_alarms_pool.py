"""Fresh-seed false alarms of the correct kernels, many seeds in one go: (subject, seed) tasks over a pool.

    python3 bench/gpu/false_alarms_pool.py --seeds 20 --workers 14 --profile nightly --device cuda \
        --out $OUT/false_alarms.jsonl [--root SNAPSHOT]

Each task runs every cell of one correct subject of ``kernels_under_test``
(those not marked as known bugs) at one seed, in a long-lived worker process
(its compiled kernels reused across seeds); the workers share the GPU.  A
false alarm is a failing cell of a correct subject.  Every result is written
as a line of JSON (subject, cell, seed, outcome, finding, message), and the
summary at the end counts them by cell and says how to replay each one
(``--conformance-seed``).  ``--root`` runs another checkout's code (an
older commit's snapshot) with the same tasks, for a before/after count.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import time

PASSING = ("honoured", "rejected", "accepted", "skipped")


def _setup(root: str, device: str) -> None:
    sys.path.insert(0, root)
    if device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
        from triton_conformance import compat

        compat.install()


def _task(args: tuple) -> list[dict]:
    root, device, profile, name, seed = args
    _setup(root, device)
    import importlib

    import conftest  # the repository's own list of subject modules
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.kinds import cells_for
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config
    from triton_conformance.model.subject import get_subject

    for module in conftest.KERNEL_MODULES:
        importlib.import_module(module)
    subject = get_subject(name)
    backend = current_backend(device)
    config = run_config(profile=profile, device=device, seed=seed)
    try:
        cells = cells_for(subject)
    except (AttributeError, TypeError):  # an older commit's kinds took the contract
        cells = cells_for(subject.contract)
    out = []
    for cell in cells:
        started = time.perf_counter()
        r = run_cell(subject, cell, backend=backend, config=config)
        out.append({"subject": name, "cell": cell, "seed": seed, "outcome": r.outcome, "finding": r.finding,
                    "message": r.message[:400], "examples": r.examples,
                    "seconds": round(time.perf_counter() - started, 3)})
    return out


def _subjects(root: str, device: str) -> list[str]:
    _setup(root, device)
    import importlib

    import conftest
    from triton_conformance.model.subject import registry

    for module in conftest.KERNEL_MODULES:
        importlib.import_module(module)
    return sorted(s.name for s in registry if s.xfail is None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--profile", default="nightly")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--root", default=os.getcwd(), help="the checkout whose code runs [this one]")
    parser.add_argument("--out", default="false_alarms.jsonl")
    parser.add_argument("--first-seed", type=int, default=None, help="seeds first-seed, first-seed+1, ... "
                        "(default: fresh random seeds, printed)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    # Each worker's share of the cores for torch's CPU threads, as the nightly gives its workers (the spawned
    # workers inherit it): without it 14 workers of 16 threads made the stochastic subjects' CPU-side
    # statistics 10-20x slower than in the nightly (stochastic_round_bf16: 342 s a seed).
    sys.path.insert(0, root)
    from triton_conformance.running import share_cores

    threads = share_cores(args.workers)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as probe:
        names = probe.apply(_subjects, (root, args.device))
    rng = random.SystemRandom()
    seeds = ([args.first_seed + i for i in range(args.seeds)] if args.first_seed is not None
             else [rng.randrange(2**32) for _ in range(args.seeds)])
    print(f"{len(names)} correct subjects x {len(seeds)} seeds on {args.device} ({args.profile}) from {root}, "
          f"{args.workers} workers of {threads} CPU threads; seeds {seeds}", flush=True)
    tasks = [(root, args.device, args.profile, n, s) for s in seeds for n in names]
    started = time.perf_counter()
    alarms, cells = [], 0
    with open(args.out, "w") as fh, ctx.Pool(args.workers, maxtasksperchild=None) as pool:
        for rows in pool.imap_unordered(_task, tasks):
            for row in rows:
                fh.write(json.dumps(row) + "\n")
                cells += 1
                if row["outcome"] not in PASSING:
                    alarms.append(row)
                    print(f"ALARM {row['subject']}[{row['cell']}] seed {row['seed']}: {row['outcome']} "
                          f"({row['finding']}) {row['message'][:200]}", flush=True)
    wall = time.perf_counter() - started
    runs = {(r["subject"], r["seed"]) for r in alarms}
    print(f"{cells} cells in {wall:.0f} s: {len(alarms)} false alarms in {len(runs)} of {len(tasks)} subject-runs "
          f"({len({r['seed'] for r in alarms})} of {len(seeds)} seeds with any)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
