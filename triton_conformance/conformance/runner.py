"""Run one contract cell: find its kind, check it applies, run it within its share of the compile budget.

The kind does the work (:mod:`.kinds`); this module adds what every cell
shares: the skip, the compile count against the subject's budget, on the
interpreter the cost allowance of interpreted work (:mod:`.interpreter_cost`), the
duration, an oracle that raises (a mistake in the declaration, not a
verdict about the kernel), and the ``cell_finished`` event.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace

from triton_conformance.conformance.autotune import quick_benchmarks, tuners_for
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.compiles import BudgetExhausted, CellCompiles, counting_compiles
from triton_conformance.conformance.harness import run_kind
from triton_conformance.conformance.interpreter_cost import cost_details, metering_cell
from triton_conformance.conformance.judge import OracleError
from triton_conformance.conformance.kinds import CellContext, cells_for, judge_for, kind_of
from triton_conformance.conformance.observe import NO_OBSERVER, Observer
from triton_conformance.conformance.results import cell_result, skipped
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.subject import Subject

__all__ = ["run_cell"]


def _later_cells(subject: Subject, cell: str, backend: Backend) -> tuple[tuple[str, bool], ...]:
    """The cells of ``subject`` after ``cell`` (in catalogue order, the order a run takes) that apply on
    ``backend``, each as (the kernels its classes compile, whether it can steer into compiled classes):
    the fair share of the compile budget keeps a class for each (:class:`~.compiles.CellCompiles`)."""
    cells = cells_for(subject.contract)
    later = cells[cells.index(cell) + 1:] if cell in cells else []
    applying = []
    for later_cell in later:
        kind, value = kind_of(later_cell)
        if kind.skip_reason(subject.contract, value, backend) is None:
            applying.append((kind.kernels, kind.steers))
    return tuple(applying)


def _tuning_quickly(subject: Subject, backend: Backend):  # noqa: ANN202 - a context manager
    """On CUDA, the subject's autotuners rank configs in a few timed runs (:func:`.autotune.quick_benchmarks`)."""
    if not backend.compiles:
        return contextlib.nullcontext()
    return quick_benchmarks(tuners_for(subject))


def _compile_budget(subject: Subject, backend: Backend, config: RunConfig) -> int | None:
    """The subject's compile budget on a compiling back end: the profile's, times the most configs of any
    of its autotuners (a real tuner compiles every config of a new specialization to time them), and
    twice that for a subject with a backward (its gradient cells compile backward kernels)."""
    if not backend.compiles or config.compile_budget is None:
        return None
    configs = [len(getattr(tuner, "configs", ()) or ()) for tuner in tuners_for(subject)]
    families = 2 if subject.contract.backward is not None else 1  # a backward's kernels are a family of their own
    return config.compile_budget * max([1, *configs]) * families


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
        budget = _compile_budget(subject, backend, config)
        later = _later_cells(subject, cell, backend) if budget else ()
        share = CellCompiles(subject.name, budget, later, kernels=kind.kernels, steers=kind.steers)
        context = CellContext(subject=subject, cell=cell, backend=backend, config=config, seed=seed,
                              observer=observer, judge=judge_for(subject, backend), compile_budget=budget,
                              compiles=share if backend.compiles else None)
        with counting_compiles(enabled=backend.compiles, subject=subject.name, budget=budget,
                               counter=share) as compiles, metering_cell(kind, context) as (context, meter):
            try:
                with _tuning_quickly(subject, backend):
                    result = run_kind(kind.run, context, value)  # HOOK(harness): escaped exceptions judged
            except BudgetExhausted as exc:  # an unsearched cell whose one example a budget could not pay for
                result = skipped(subject, cell, f"{exc.spent}: {exc}")
            except OracleError as exc:
                result = cell_result(subject, cell, "oracle-error", str(exc), finding="oracle-raised",
                                     details={"traceback": exc.traceback})
        compiled = compiles.count if compiles is not None else None
        result = cost_details(result, meter)
    result = replace(result, duration_s=time.perf_counter() - started, compiles=compiled)
    observer.cell_finished(result)
    return result
