"""Run one contract cell: find its kind, check it applies, run it within the cell's allowance.

The kind does the work (:mod:`.kinds`); this module adds what every cell
shares: the skip, one :class:`~.search.allowance.Allowance` (the cell's share
of the subject's compile budget on CUDA, its interpreted work on the
interpreter, the memory cap, the shrink calls), every kind's scope for the
subject's cells, the duration, an oracle that raises (a mistake in the
declaration, not a verdict about the kernel), the worst error its judge saw
(``details["error_ulps"]`` and ``["allowance_used"]``), and the ``cell_finished`` event.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import replace

from triton_conformance import compat
from triton_conformance.conformance import gpu_turns
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.harness import run_kind
from triton_conformance.conformance.judge import OracleError, claimed
from triton_conformance.conformance.kinds import (
    cells_for,
    judge_for,
    kind_of,
    registered_kinds,
    subject_scopes,
)
from triton_conformance.conformance.observe import NO_OBSERVER, Observer
from triton_conformance.conformance.results import cell_result, skipped
from triton_conformance.conformance.search.allowance import Allowance
from triton_conformance.conformance.search.compiles import LEDGER
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.conformance.discards import CUT, ExampleDiscarded
from triton_conformance.conformance.search.interpreter_cost import cost_details, cut_result
from triton_conformance.conformance.search.policy import SearchPolicy
from triton_conformance.conformance.search.shared_ledger import ledgers_for
from triton_conformance.conformance.triton_path import launch_note
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.subject import Subject

__all__ = ["run_cell", "cell_allowance"]


def _later_cells(subject: Subject, later: list[str], backend: Backend) -> tuple[tuple[str, bool], ...]:
    """Of the cells of ``subject`` still to come (:meth:`~.search.compiles.CompileLedger.to_come`), those that
    apply on ``backend``, each as (the kernels its classes compile, whether it can steer into compiled
    classes): the fair share of the compile budget keeps a class for each (:class:`~.search.compiles.CellCompiles`)."""
    applying = []
    for later_cell in later:
        kind, value = kind_of(later_cell)
        if kind.skip_reason(subject, value, backend) is None:
            applying.append((kind.kernels, kind.steers))
    return tuple(applying)


def _budget_factor(subject: Subject) -> int:
    """What every kind needs of the subject's compile budget for its kernels (an autotuner's configs, a
    backward's family): the profile's budget is multiplied by it (:meth:`~.search.allowance.Allowance.metered`)."""
    return math.prod(kind.budget_factor(subject) for kind in registered_kinds())


def cell_allowance(subject: Subject, cell: str, backend: Backend, policy: SearchPolicy
                   ) -> contextlib.AbstractContextManager[Allowance]:
    """The allowance of ``subject``'s ``cell`` (:meth:`~.search.allowance.Allowance.metered`): what its kind
    needs, the subject's compile budget times every kind's factor, the later cells it keeps a class for; the
    subject's ledger and class book are shared with other processes when the run split its cells."""
    kind, _ = kind_of(cell)
    shared, book = ledgers_for(subject.name)
    ledger = shared or LEDGER
    ledger.start_cell(subject.name, cell)
    return Allowance.metered(policy, subject, backend, kind, budget_factor=lambda: _budget_factor(subject),
                             later=lambda: _later_cells(subject, ledger.to_come(subject.name, cell,
                                                                                cells_for(subject)), backend),
                             ledger=shared, book=book)


def run_cell(
    subject: Subject,
    cell: str,
    *,
    backend: Backend | None = None,
    config: RunConfig | None = None,
    observer: Observer = NO_OBSERVER,
) -> CellResult:
    """Run ``cell`` of ``subject`` and return its verdict.

    - ``backend``: where kernels run (default: the interpreter).
    - ``config``: the run's :class:`RunConfig` (profile, seed, compile budget, examples): each search's seed
      is drawn from ``config.seed`` and the cell's name (:meth:`~.search.policy.SearchPolicy.seed_for`).
    - ``observer``: told of each example and of the cell's end (a flight recorder, a benchmark).
    """
    backend = backend or Backend()
    config = config or RunConfig()
    subject, claims_of = claimed(subject, backend.compiles)  # the one contract every step of the cell reads
    kind, value = kind_of(cell)
    started = time.perf_counter()
    reason = kind.skip_reason(subject, value, backend)
    compiled = None
    if reason is not None:
        result = skipped(subject, cell, reason)
    else:
        policy = SearchPolicy.of(config)
        # one patch of triton.language for the cell's launches, not one each (compat.language_patch); the
        # cell's GPU work in this process's shared turn (gpu_turns)
        with cell_allowance(subject, cell, backend, policy) as allowance, compat.held_language_patch(), \
                gpu_turns.cell():
            context = CellContext(subject=subject, cell=cell, backend=backend, config=config,
                                  judge=judge_for(subject, backend), policy=policy, allowance=allowance,
                                  observer=observer)
            try:
                with subject_scopes(context):
                    result = run_kind(kind.run, context, value)  # an exception that escapes the kind: its judge
            except ExampleDiscarded as exc:  # an unsearched cell whose one example a budget could not pay for
                if exc.reason == CUT and allowance.meter is not None:  # a hang is never a silent skip
                    result = cut_result(subject, cell, allowance.meter)
                else:
                    result = skipped(subject, cell, f"{exc.skips}: {exc}", code=f"discard:{exc.reason}")
            except OracleError as exc:
                result = cell_result(subject, cell, "oracle-error", str(exc), finding="oracle-raised",
                                     details={"traceback": exc.traceback})
        compiled = allowance.compiled
        result = launch_note(cost_details(result, allowance.meter), allowance.meter, subject)
        worst = context.judge.worst.details()  # the cell's worst error, pass or fail
        if worst and result.outcome != "skipped":
            result = replace(result, details={**result.details, **worst})
    if claims_of is not None:  # the contract's claims differ by device: say whose applied
        result = replace(result, details={**result.details, "claims_of": claims_of})
    result = replace(result, duration_s=time.perf_counter() - started, compiles=compiled)
    observer.cell_finished(result)
    return result
