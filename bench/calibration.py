"""The tolerance's calibration: torch's own ops as subjects, every cell, at fresh seeds.

    python bench/calibration.py --seeds 200                 # the figure in docs/tolerance.md
    python bench/calibration.py --seeds 5 --subjects sum,layer_norm --cells grad:
    python bench/calibration.py --seed 768670918 --subjects torch_sum --cells layout:transposed
    python bench/calibration.py --minutes 40                # as many seeds as fit

A tolerance is right only when torch's own operations, in the kernel's
precision, pass every cell at every seed: each failing cell here is a false
alarm the suite would raise on a correct kernel.  The subjects are declared in
``tests/calibration/`` (one family a module).  Each seed is a fresh draw of the
``nightly`` profile (``run_config(profile="nightly", seed=...)``), on the CPU;
the cells run in this process (torch's ops cannot crash it).  Prints one line per
seed and every failing cell with what replays it; exits 1 if any cell failed.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PASSING = ("honoured", "rejected", "accepted", "skipped")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1, help="how many fresh seeds (default 1)")
    parser.add_argument("--seed", type=int, action="append", default=[], help="run this seed (repeatable)")
    parser.add_argument("--minutes", type=float, default=None, help="stop starting seeds after this long")
    parser.add_argument("--profile", default="nightly")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where torch's ops run: the CPU (no interpreter is involved), or CUDA")
    parser.add_argument("--subjects", default="", help="comma-separated substrings of subject names")
    parser.add_argument("--cells", default="", help="comma-separated prefixes of cell names (e.g. grad:,values:)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per cell, with its time")
    args = parser.parse_args()

    from tests.calibration import subjects
    from triton_conformance.conformance.backend import Backend, current_backend
    from triton_conformance.conformance.kinds.base import cells_for
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    wanted = [w for w in args.subjects.split(",") if w]
    chosen = [s for s in subjects() if not wanted or any(w in s.name for w in wanted)]
    prefixes = tuple(c for c in args.cells.split(",") if c)
    if not chosen:
        parser.error(f"--subjects={args.subjects!r} matches no calibration subject")
    # torch's ops never go through the interpreter, so its bf16 probe does not concern them.
    backend = current_backend("cuda") if args.device == "cuda" else Backend(name="interpreter")
    rng = random.SystemRandom()
    seeds = list(args.seed) or [rng.randrange(2**32) for _ in range(args.seeds)]
    start = time.perf_counter()
    failures, cells, ran = [], 0, 0
    for seed in seeds:
        if args.minutes is not None and time.perf_counter() - start > args.minutes * 60:
            break
        config = run_config(profile=args.profile, seed=seed, device="cuda" if args.device == "cuda" else "interpreter")
        t0 = time.perf_counter()
        failed_here = 0
        for subject in chosen:
            for cell in cells_for(subject):
                if prefixes and not cell.startswith(prefixes):
                    continue
                t_cell = time.perf_counter()
                result = run_cell(subject, cell, backend=backend, config=config)
                cells += 1
                if args.verbose:
                    print(f"    {subject.name}[{cell}] {result.outcome} {time.perf_counter() - t_cell:.1f} s", flush=True)
                if result.outcome not in PASSING:
                    failed_here += 1
                    failures.append((seed, subject.name, cell, result))
        ran += 1
        print(f"seed {seed:10d}: {failed_here} failing cells, {time.perf_counter() - t0:.0f} s", flush=True)
        for s, name, cell, result in failures[len(failures) - failed_here:]:
            print(f"  {name}[{cell}] {result.outcome} ({result.finding}): {result.message[:400]}", flush=True)
            print(f"    replay: python bench/calibration.py --seed {s} --subjects {name} --cells {cell}", flush=True)
    elapsed = time.perf_counter() - start
    print(f"\n{ran} seeds, {cells} cells of {len(chosen)} subjects, {len(failures)} failing "
          f"({elapsed / max(ran, 1):.0f} s a seed, {elapsed / 60:.1f} min in all)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
