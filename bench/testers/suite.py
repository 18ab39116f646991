"""Tester 4: this suite, cell by cell in canonical order, stopping at the first failing cell.

Detection runs the ``ci`` profile (derandomized: the run is repeatable); the
false-alarm runs use ``dev`` (the same budget, randomized) with a fresh seed.
The counterexample's size is the product of its shrunk dims.
"""

from __future__ import annotations

import time

from bench.testers.common import Run, note_progress
from triton_conformance.model.config import run_config
from triton_conformance.conformance import runner
from triton_conformance.conformance.cells import cell_sort_key, cells_for
from triton_conformance.model.outcomes import Finding

__all__ = ["Suite"]


def counterexample_dims(ce: dict | None) -> dict[str, int] | None:
    """The shrunk dims of a cell's counterexample: its ``dims``, else the shape of its first tensor
    (a statistical cell records the shapes of its last launch)."""
    if not ce:
        return None
    if ce.get("dims"):
        return {k: int(v) for k, v in ce["dims"].items()}
    shapes = {n: t["shape"] for n, t in (ce.get("tensors") or {}).items() if isinstance(t, dict) and "shape" in t}
    shapes = shapes or dict((ce.get("last_launch") or {}).get("shapes") or {})
    for name, shape in shapes.items():
        return {f"{name}.shape[{i}]": int(n) for i, n in enumerate(shape)}
    return None


class Suite:
    """run_cell over cells_for(contract) in canonical order; the first failing cell is the detection."""

    name = "suite"

    def unavailable(self) -> str | None:
        return None

    def skip_reason(self, subject, untestable) -> str | None:
        return None  # every contract, stochastic or not, has cells

    def run(self, subject, *, seed: int, device: str, untestable, backend=None, randomize: bool = False) -> Run:
        profile = "dev" if randomize else "ci"
        start, cpu0 = time.perf_counter(), time.process_time()
        first: list[tuple[float, float]] = []
        original = runner.run_example

        def spy(*args, **kwargs):  # notes when the first example fails, before the cell shrinks it
            verdict = original(*args, **kwargs)
            if not first and isinstance(verdict, Finding):
                first.append((time.perf_counter() - start, time.process_time() - cpu0))
            return verdict

        runner.run_example = spy  # this process only: each task runs in its own forked child
        try:
            cells = sorted(cells_for(subject.contract), key=cell_sort_key)
            for i, cell in enumerate(cells):
                note_progress(cell)
                r = runner.run_cell(subject, cell, backend=backend, seed=seed if randomize else None, config=run_config(profile=profile))
                if not r.passed:
                    dims = counterexample_dims(r.counterexample)
                    return Run(failed=True, case=cell, dims=dims, message=f"{r.outcome}/{r.finding}: {r.message}",
                               seconds=time.perf_counter() - start, cpu_s=time.process_time() - cpu0,
                               first_failure_s=first[0][0] if first else None,
                               first_failure_cpu_s=first[0][1] if first else None, cases=i + 1)
                first.clear()  # a failing example inside a passing cell (e.g. a clean rejection) is no detection
        finally:
            runner.run_example = original
        return Run(failed=False, seconds=time.perf_counter() - start, cpu_s=time.process_time() - cpu0,
                   cases=len(cells))
