"""What the interpreter's cost unit is in seconds here: every example's counted units against its time.

Usage (from a folder whose subjects import, on the interpreter)::

    python bench/interpreter_cost.py kernels_under_test.softmax,kernels_under_test.attention \
        --cells layout:contiguous,shape:beyond-block [--subjects softmax] [--out example_cost.json]

Runs each named cell in this process under the ``ci`` profile with an unbounded pool (nothing is
discarded), records each example's units (``conformance/interpreter_cost.py``) and seconds (the
observer's), and fits seconds = a + b x units: ``b`` is the seconds a unit costs on this machine
now, ``a`` an example's work outside the interpreter (inputs, oracle, checks).  docs/benchmarks.md
has the figures it gave.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import statistics
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("modules", help="subject modules, comma-separated")
    parser.add_argument("--cells", default="layout:contiguous,shape:beyond-block")
    parser.add_argument("--subjects", default="")
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, os.getcwd())
    from triton_conformance import compat
    from triton_conformance.model.subject import registry

    compat.install()
    for module in args.modules.split(","):
        importlib.import_module(module)
    from triton_conformance.conformance.search import interpreter_cost
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.kinds import cells_for
    from triton_conformance.conformance.observe import Observer
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import PROFILES, RunConfig

    class Examples(Observer):
        def __init__(self) -> None:
            self.rows: list[dict] = []
            self.start = 0

        def example_started(self, subject, cell, spec) -> None:
            self.start = interpreter_cost.active_meter().spent

        def example_finished(self, subject, cell, spec, verdict, seconds) -> None:
            self.rows.append({"cell": f"{subject.name}[{cell}]", "dims": dict(spec.dims), "seconds": seconds,
                              "units": interpreter_cost.active_meter().spent - self.start})

    unbounded = dataclasses.replace(PROFILES["ci"], interpreter_cost=1 << 60, interpreter_example_cost=1 << 56)
    config, backend, seen = RunConfig(profile=unbounded, isolation="none"), current_backend("interpreter"), Examples()
    wanted, only = args.cells.split(","), [s for s in args.subjects.split(",") if s]
    for subject in list(registry):
        for cell in (c for c in cells_for(subject) if c in wanted and (not only or subject.name in only)):
            result = run_cell(subject, cell, backend=backend, config=config, observer=seen)
            print(f"{result.duration_s:7.2f} s  {subject.name}[{cell}]  {result.outcome}, {result.examples} examples",
                  flush=True)
    rows = [r for r in seen.rows if r["units"] > 0]
    n, mu, mt = len(rows), statistics.fmean(r["units"] for r in rows), statistics.fmean(r["seconds"] for r in rows)
    b = sum((r["units"] - mu) * (r["seconds"] - mt) for r in rows) / sum((r["units"] - mu) ** 2 for r in rows)
    per_unit = sorted(r["seconds"] / r["units"] for r in rows if r["units"] > 200_000)
    print(f"{n} examples: seconds = {(mt - b * mu) * 1e3:.1f} ms + {b * 1e6:.3f} us x units")
    if per_unit:
        print(f"examples over 200k units ({len(per_unit)}): {statistics.median(per_unit) * 1e6:.2f} us a unit "
              f"(median; {per_unit[0] * 1e6:.2f} to {per_unit[-1] * 1e6:.2f})")
    largest = max(rows, key=lambda r: r["units"])
    print(f"largest example: {largest['units']:,} units, {largest['seconds']:.2f} s, {largest['cell']} {largest['dims']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
