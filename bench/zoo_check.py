"""Run every zoo bug's intended cell, and the same cell on its correct twin.

    python bench/zoo_check.py --device interpreter
    python bench/zoo_check.py --device cuda
    python bench/zoo_check.py --bugs zoo_add_missing_store_mask   # some bugs only

Prints one row per bug: caught (outcome/finding as intended), and whether the
correct kernel passes the same cell, with timings.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="interpreter", choices=("interpreter", "cuda"))
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--bugs", default="", help="comma-separated substrings of zoo bug names (default: all)")
    args = parser.parse_args()
    from triton_conformance.conformance.backend import current_backend, select_device

    device = select_device(args.device)  # before any kernel is defined (TRITON_INTERPRET)
    import importlib

    from tests.zoo import all_bugs, correct_twin
    from triton_conformance import get_subject
    from triton_conformance.model.subject import registry
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    for name in ("vector_add", "softmax", "gemv", "attention", "flash_attention", "layer_norm", "matmul"):
        importlib.import_module(f"kernels_under_test.{name}")
    backend = current_backend(device)
    config = run_config(profile=args.profile, device=device)
    bugs = all_bugs()
    wanted = [w for w in args.bugs.split(",") if w]
    bugs = [b for b in bugs if not wanted or any(w in b[0] for w in wanted)]
    if not bugs:
        parser.error(f"--bugs={args.bugs!r} matches no zoo bug")
    caught = twins_ok = 0
    print(f"{'bug':36s} {'cell':20s} {'expected':28s} {'got':28s} {'s':>6s}  twin")
    for name, cell, outcome, finding in bugs:
        buggy = get_subject(name)
        t0 = time.perf_counter()
        r = run_cell(buggy, cell, backend=backend, config=config)
        dt = time.perf_counter() - t0
        twin_subject = correct_twin(buggy, registry)
        twin = run_cell(twin_subject, cell, backend=backend, config=config)
        ok = (r.outcome, r.finding) == (outcome, finding)
        caught += ok
        twins_ok += twin.passed and twin.outcome != "skipped"
        print(f"{name:36s} {cell:20s} {outcome + '/' + finding:28s} {str(r.outcome) + '/' + str(r.finding):28s} "
              f"{dt:6.2f}  {twin_subject.name}: {twin.outcome}", flush=True)
    print(f"caught as intended: {caught}/{len(bugs)}; correct twins passing: {twins_ok}/{len(bugs)}")
    return 0 if caught == twins_ok == len(bugs) else 1


if __name__ == "__main__":
    sys.exit(main())
