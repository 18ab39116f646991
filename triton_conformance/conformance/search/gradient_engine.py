"""Search a ``grad`` cell: Hypothesis draws specs of the cell's class, each run as one backward example.

Each draw is one :func:`.gradients.run_gradient_example`.  On CUDA it runs
inside the cell's share of the compile budget, moved into a compiled class
once the cell may start no new one (:func:`.specializations.in_compiled_class`);
draws outside the contract, over the memory cap or refused by a budget are not
run, and the result says how many and why.  A failure is shrunk by Hypothesis
alone, within the profile's shrink budget, and reported with a reproducer that
calls :func:`.gradients.replay_gradients`.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from typing import Any

from hypothesis import given, reject
from hypothesis import seed as hypothesis_seed

from triton_conformance.conformance.search.compiles import BudgetExhausted
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.battery.backward import (
    GRAD_OUTPUT,
    cell_options,
    gradient_specs,
    output_shape,
    run_gradient_example,
)
from triton_conformance.conformance.results import (
    cell_result,
    failed,
    reproducer_script,
)
from triton_conformance.conformance.search.allowance import example_bytes, memory_cap
from triton_conformance.conformance.search.engine import (
    MAX_DISCARDS,
    counterexample,
    profile_settings,
    specializations,
)
from triton_conformance.conformance.search.specializations import counted, in_compiled_class
from triton_conformance.model.outcomes import (
    CellResult,
    Counterexample,
    Finding,
    TensorView,
)
from triton_conformance.model.spec import Spec, strides_for
from triton_conformance.model.subject import Subject

__all__ = ["search_gradients"]


class _Stop(BaseException):
    """The shrink budget is spent: the latest failure is the smallest so far (past Hypothesis)."""


class _Failed(Exception):
    def __init__(self, finding: Finding, spec: Spec):
        super().__init__(finding.message)
        self.finding, self.spec = finding, spec


def _counterexample(subject: Subject, spec: Spec) -> Counterexample:
    found = counterexample(subject, spec)
    shape = output_shape(subject, spec)
    strides, offset, _ = strides_for(shape, spec.layout(GRAD_OUTPUT))
    dtype = spec.dtypes[subject.contract.backward.grads[0]]
    return Counterexample(found.spec, {**found.tensors, GRAD_OUTPUT: TensorView(
        shape=shape, strides=strides, storage_offset=offset, dtype=dtype)})


_REPLAY = '''\
from triton_conformance.conformance.battery.backward import replay_gradients
from triton_conformance.strategies import Layout, Spec

spec = {spec!r}
verdict = replay_gradients({module!r}, {subject!r}, {cell!r}, spec, device={device!r})
'''


def search_gradients(context: Any, *, dtypes: tuple[str, ...]) -> CellResult:
    """Search the ``grad`` cell ``context.cell`` of ``context.subject``; the cell's result."""
    subject, cell, observer = context.subject, context.cell, context.observer
    options = cell_options(cell)
    profile = context.config.profile
    strategy = gradient_specs(subject, grad_layout=options["grad_layout"], dtype=options["dtype"],
                              memory=options["memory"], dtypes=dtypes, max_elements=profile.max_elements,
                              max_outer=profile.max_outer)
    counts: Counter = Counter()
    cap = memory_cap(context.config)
    failures: list[_Failed] = []
    examples = lambda: sum(n for k, n in counts.items() if k not in ("discarded", "after-failure"))
    budgets: Counter = Counter()  # discards by the budget that refused them (BudgetExhausted.discard)
    classes: Counter = Counter()  # on CUDA: examples steered into a compiled class, and that compiled nothing
    not_run: Counter = Counter()  # draws not run, by why

    def unrun() -> CellResult:
        return cell_result(subject, cell, "skipped", "every draw was over a budget before this cell ran an example ("
                           + ", ".join(f"{n} {k}" for k, n in budgets.items()) + ")")

    share = context.compiles if context.compiles is not None and context.compiles.budget is not None else None

    def probe(spec: Spec) -> None:
        if expectation(subject.contract, spec).kind != "honour":
            not_run["outside the contract"] += 1
            reject()  # the backward is judged inside the contract only
        if example_bytes(subject.contract, spec) > cap:
            not_run["over the memory cap"] += 1
            reject()
        if failures and len(failures) + counts["after-failure"] > profile.shrink_calls:
            raise _Stop
        if counts["discarded"] >= MAX_DISCARDS + 3 * examples():
            raise _Stop  # the compile budget is spent on kernels this cell keeps asking for
        if share is not None:  # on CUDA: inside a compiled class once the cell may start no new one
            drawn, spec = spec, in_compiled_class(context, spec, None, None, cap)
            if spec is None:
                counts["discarded"] += 1
                budgets["no-compiled-class"] += 1
                reject()
            classes["steered"] += spec is not drawn
        if failures:
            counts["after-failure"] += 1
        observer.example_started(subject, cell, spec)
        started = time.perf_counter()
        classes_before = share.classes if share is not None else 0
        try:
            verdict = counted(context, spec, lambda s: run_gradient_example(
                subject, s, context.backend, context.judge, second=options["second"],
                determinism=options["determinism"]))
            if share is not None and share.classes == classes_before:
                classes["reused"] += 1
        except BudgetExhausted as exc:
            counts["discarded"] += 1
            budgets[exc.discard] += 1
            observer.example_finished(subject, cell, spec, exc.discard, time.perf_counter() - started)
            reject()
        observer.example_finished(subject, cell, spec, verdict, time.perf_counter() - started)
        if isinstance(verdict, Finding):
            counts["failed"] += 1
            failures.append(_Failed(verdict, spec))
            raise failures[-1]
        counts[verdict] += 1

    probe._hypothesis_internal_add_digest = f"{subject.name}::{cell}".encode()  # type: ignore[attr-defined]
    test = profile_settings(context.config)(given(strategy)(probe))
    if profile.derandomize:
        test = hypothesis_seed(zlib.crc32(f"{subject.name}::{cell}".encode()))(test)
    elif context.seed is not None:
        test = hypothesis_seed(context.seed)(test)
    try:
        test()
        error = None
    except _Failed as exc:
        error = exc
    except _Stop:
        error = failures[-1] if failures else None  # or the compile budget: what ran, ran
    except Exception as exc:  # noqa: BLE001 - Hypothesis could not search (every draw rejected, a flaky replay)
        # A failure Hypothesis could not replay (a nondeterministic one) is still the failure it was.
        error = failures[-1] if failures else exc
    if not isinstance(error, _Failed) and examples() == 0 and counts["discarded"]:
        return unrun()
    if isinstance(error, _Failed):
        spec, finding = error.spec, error.finding
        body = _REPLAY.format(spec=spec, module=subject.module, subject=subject.name, cell=cell,
                              device=context.backend.device)
        return failed(subject, cell, finding, counterexample=_counterexample(subject, spec),
                      reproducer=reproducer_script(subject, cell, finding, context.backend, body),
                      examples=examples())
    if error is not None:
        return cell_result(subject, cell, "crash", f"hypothesis could not search this cell: {error}",
                           finding="search-error")
    n = examples()
    # Fewer examples than asked for: say which budget stopped the search (or that Hypothesis ran out).
    parts = [f"{n} examples, all gradients honoured"] + [f"{k} discarded ({b})" for b, k in budgets.items()]
    if n < context.config.examples and not budgets:
        why = ", ".join(f"{k} draws {reason}" for reason, k in not_run.items()) or "no draw left unrun"
        parts.append(f"Hypothesis ended the search after {n} of {context.config.examples} examples ({why})")
    details = {f"{b}_discarded": k for b, k in budgets.items()}
    if not_run:
        details["not_run"] = dict(not_run)
    if share is not None:
        details["specializations"] = specializations(share, examples=n, reused=classes["reused"],
                                                     steered=classes["steered"])
    return cell_result(subject, cell, "honoured", ", ".join(parts), examples=n, details=details)
