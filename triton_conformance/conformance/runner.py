"""Run one contract cell: find its kind, check it applies, run it within the subject's compile budget.

The kind does the work (:mod:`.kinds`); this module adds what every cell
shares: the skip, the compile count against the subject's budget, the
duration, an oracle that raises (a mistake in the declaration, not a
verdict about the kernel), and the ``cell_finished`` event.
"""

from __future__ import annotations

import time
from dataclasses import replace

from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.compiles import BudgetExhausted, counting_compiles
from triton_conformance.conformance.judge import OracleError
from triton_conformance.conformance.kinds import CellContext, judge_for, kind_of, unsearched_cells
from triton_conformance.conformance.observe import NO_OBSERVER, Observer
from triton_conformance.conformance.results import cell_result, skipped
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.subject import Subject

__all__ = ["run_cell"]


def _budget(subject: Subject, kind, backend: Backend, config: RunConfig) -> int | None:  # noqa: ANN001
    """What the cell may compile.  Searched cells leave one compile for each unsearched cell that
    applies, so those find room for a kernel of their own however greedy the search was."""
    budget = config.compile_budget if backend.compiles else None
    if budget is not None and kind.searched:
        budget = max(1, budget - len(unsearched_cells(subject.contract, backend)))
    return budget


def run_cell(
    subject: Subject,
    cell: str,
    *,
    backend: Backend | None = None,
    config: RunConfig | None = None,
    seed: int | None = None,
    observer: Observer = NO_OBSERVER,
) -> CellResult:
    """Run ``cell`` of ``subject`` and return its verdict.

    - ``backend``: where kernels run (default: the interpreter).
    - ``config``: the run's :class:`RunConfig` (profile, compile budget, examples).
    - ``seed``: a Hypothesis seed (or a stochastic design's), for profiles that are not derandomized.
    - ``observer``: told of each example and of the cell's end (a flight recorder, a benchmark).
    """
    backend = backend or Backend()
    config = config or RunConfig()
    kind, value = kind_of(cell)
    started = time.perf_counter()
    reason = kind.skip_reason(subject.contract, value, backend)
    compiled = None
    if reason is not None:
        result = skipped(subject, cell, reason)
    else:
        budget = _budget(subject, kind, backend, config)
        context = CellContext(subject=subject, cell=cell, backend=backend, config=config, seed=seed,
                              observer=observer, judge=judge_for(subject, backend), compile_budget=budget)
        with counting_compiles(enabled=backend.compiles, subject=subject.name, budget=budget) as compiles:
            try:
                result = kind.run(context, value)
            except BudgetExhausted as exc:  # an unsearched cell whose one kernel the budget could not pay for
                result = skipped(subject, cell, f"the compile budget was used before this cell: {exc}")
            except OracleError as exc:
                result = cell_result(subject, cell, "oracle-error", str(exc), finding="oracle-raised",
                                     details={"traceback": exc.traceback})
        compiled = compiles.count if compiles is not None else None
    result = replace(result, duration_s=time.perf_counter() - started, compiles=compiled)
    observer.cell_finished(result)
    return result
