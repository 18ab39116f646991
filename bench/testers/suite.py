"""Tester 4: this suite, cell by cell in canonical order, stopping at the first failing cell.

Detection runs the ``ci`` profile (derandomized: the run is repeatable); the
false-alarm runs use ``dev`` (the same budget, randomized) with a fresh seed.
The counterexample's size is the product of its shrunk dims.
"""

from __future__ import annotations

import time

from bench.testers.common import Run, note_progress
from triton_conformance.conformance.kinds import catalogue, cells_for
from triton_conformance.conformance.observe import Observer
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config
from triton_conformance.model.outcomes import Finding

__all__ = ["Suite"]


def counterexample_dims(ce) -> dict[str, int] | None:
    """The shrunk dims of a cell's counterexample: its ``dims``, else the shape of its first tensor
    (a statistical cell records the shapes of its last launch)."""
    if not ce:
        return None
    ce = ce.to_dict() if hasattr(ce, "to_dict") else ce  # a Counterexample, or its JSON
    if ce.get("dims"):
        return {k: int(v) for k, v in ce["dims"].items()}
    shapes = {n: t["shape"] for n, t in (ce.get("tensors") or {}).items() if isinstance(t, dict) and "shape" in t}
    shapes = shapes or dict((ce.get("last_launch") or {}).get("shapes") or {})
    for name, shape in shapes.items():
        return {f"{name}.shape[{i}]": int(n) for i, n in enumerate(shape)}
    return None


class FirstFailure(Observer):
    """Notes when the first example fails (wall and CPU seconds from ``start``), before the cell shrinks it."""

    def __init__(self, start: float, cpu0: float):
        self.start, self.cpu0 = start, cpu0
        self.at: tuple[float, float] | None = None

    def example_finished(self, subject, cell, spec, verdict, seconds) -> None:
        if self.at is None and isinstance(verdict, Finding):
            self.at = (time.perf_counter() - self.start, time.process_time() - self.cpu0)


class Suite:
    """run_cell over cells_for(contract) in canonical order; the first failing cell is the detection."""

    name = "suite"

    def unavailable(self) -> str | None:
        return None

    def skip_reason(self, subject, untestable) -> str | None:
        return None  # every contract, stochastic or not, has cells

    def run(self, subject, *, seed: int, device: str, untestable, backend=None, randomize: bool = False) -> Run:
        profile = "dev" if randomize else "ci"
        config = run_config(profile=profile, device=backend.name if backend is not None else "interpreter",
                            seed=seed if randomize else None)
        start, cpu0 = time.perf_counter(), time.process_time()
        first = FirstFailure(start, cpu0)
        cells = sorted(cells_for(subject), key=catalogue().sort_key)
        for i, cell in enumerate(cells):
            note_progress(cell)
            r = run_cell(subject, cell, backend=backend, config=config, observer=first)
            if not r.passed:
                dims = counterexample_dims(r.counterexample)
                at = first.at
                return Run(failed=True, case=cell, dims=dims, message=f"{r.outcome}/{r.finding}: {r.message}",
                           seconds=time.perf_counter() - start, cpu_s=time.process_time() - cpu0,
                           first_failure_s=at[0] if at else None, first_failure_cpu_s=at[1] if at else None,
                           cases=i + 1)
            first.at = None  # a failing example inside a passing cell (e.g. a clean rejection) is no detection
        return Run(failed=False, seconds=time.perf_counter() - start, cpu_s=time.process_time() - cpu0,
                   cases=len(cells))
