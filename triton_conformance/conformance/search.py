"""The search-and-shrink engine of the searched cells: search, shrink, assemble.

:func:`search` runs Hypothesis over a kind's spec strategy.  Every example of
a cell raises the same :class:`Violation` from the same place when it fails,
so Hypothesis treats all failures as one bug and shrinks to the smallest spec
that fails in any way.  :func:`shrink` finishes with a per-dim binary search
and, for a wrong answer, the error-against-size series; :func:`assemble`
turns what was found into the cell's result.

The cut-offs count kernel runs, never seconds, so a derandomized profile
reports the same failure on any machine: a search ends once the compile
budget keeps discarding, or once the shrinker has spent the profile's
``shrink_calls`` after the first failure.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import HypothesisException, Unsatisfiable

from triton_conformance.conformance.checks import (
    EXAMPLE_ACCEPTED,
    EXAMPLE_REJECTED,
    EXAMPLE_REJECTED_UNEXPLAINED,
    EXAMPLE_UNJUDGED,
    run_example,
)
from triton_conformance.conformance.compiles import BudgetExhausted
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.results import cell_result, failed, reproducer, skipped
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding, TensorView
from triton_conformance.model.spec import Spec, strides_for

__all__ = ["Violation", "SearchOutcome", "profile_settings", "search", "shrink", "assemble", "minimize_dims",
           "counterexample", "MAX_DISCARDS"]

DISCARDED = "discarded"
# Once a cell has discarded this many examples (plus three per example it ran) for
# want of compile budget, its search ends: each discard builds inputs and starts a
# launch (about 2 ms on an H200), and a cell whose kernels the budget never paid for
# would otherwise spend Hypothesis's whole allowance of invalid examples.
MAX_DISCARDS = 100


class _StopSearch(BaseException):
    """Ends a cell's search early, past Hypothesis (which would keep drawing): a budget is spent.

    A BaseException, so Hypothesis does not take it for a failure to shrink.
    """


class Violation(Exception):
    """One example broke the contract."""

    def __init__(self, finding: Finding, spec: Spec):
        super().__init__(f"{finding.outcome}/{finding.kind}: {finding.message}")
        self.finding = finding
        self.spec = spec


def profile_settings(config: RunConfig) -> settings:
    """Hypothesis settings for a searched cell under ``config``'s profile."""
    p = config.profile
    database = DirectoryBasedExampleDatabase(p.database) if p.database else None
    return settings(
        max_examples=config.examples,
        derandomize=p.derandomize,
        database=database,
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        verbosity=Verbosity.quiet,
        print_blob=False,
    )


@dataclass
class SearchOutcome:
    """What a search found: the smallest failure (or a search error), and what it ran."""

    failure: Violation | None = None
    error: Exception | None = None
    counts: Counter = field(default_factory=Counter)  # "honoured" / "rejected" / "failed" -> examples

    @property
    def discarded(self) -> int:
        return self.counts[DISCARDED]

    @property
    def examples(self) -> int:
        return sum(n for k, n in self.counts.items() if k != DISCARDED)


def search(context: Any, strategy: Any, *, determinism: bool = False) -> SearchOutcome:
    """Search ``strategy``'s specs for one that breaks ``context.subject``'s contract."""
    subject, cell, observer = context.subject, context.cell, context.observer
    outcome = SearchOutcome()
    counts = outcome.counts
    # repr(spec) -> its violation, for Hypothesis's replays; the shrinker only tries
    # smaller specs, so the one added last is the best so far.
    failures: dict[str, Violation] = {}
    shrink_calls = context.config.profile.shrink_calls
    after_failure = [0]  # kernel runs since the first failure: the shrinker's spend

    def probe(spec: Spec) -> None:
        key = repr(spec)
        if key in failures:
            raise failures[key]  # a replay of a known failure: no need to run the kernel again
        if failures and after_failure[0] >= shrink_calls:
            raise _StopSearch  # the shrink budget is spent: the latest failure is the smallest so far
        if counts[DISCARDED] >= MAX_DISCARDS + 3 * outcome.examples:
            raise _StopSearch  # the compile budget is spent on kernels this cell keeps asking for
        observer.example_started(subject, cell, spec)
        if failures:
            after_failure[0] += 1
        started = time.perf_counter()
        try:
            verdict = run_example(subject, spec, context.backend, context.judge, determinism=determinism)
        except BudgetExhausted:
            counts[DISCARDED] += 1
            observer.example_finished(subject, cell, spec, DISCARDED, time.perf_counter() - started)
            reject()  # not a failure: the example needs a kernel the budget cannot pay for
        observer.example_finished(subject, cell, spec, verdict, time.perf_counter() - started)
        if isinstance(verdict, Finding):
            counts["failed"] += 1
            failures[key] = Violation(verdict, spec)
            raise failures[key]
        counts[verdict] += 1

    probe._hypothesis_internal_add_digest = f"{subject.name}::{cell}".encode()  # distinct database keys
    test = profile_settings(context.config)(given(strategy)(probe))
    if context.seed is not None and not context.config.profile.derandomize:
        test = hypothesis_seed(context.seed)(test)
    try:
        test()
    except Violation as exc:
        outcome.failure = exc
    except HypothesisException as exc:
        outcome.error = exc
    except _StopSearch:
        outcome.failure = next(reversed(failures.values()), None)
    return outcome


def minimize_dims(subject: Any, spec: Spec, finding: Finding, fails: Callable[[Spec], Finding | None],
                  *, budget: int = 60) -> tuple[Spec, Finding]:
    """Shrink each dim of a failing spec as far as it still fails.

    Hypothesis shrinks a size drawn from a list of block boundaries only along
    that list; this pass finishes the job with a binary search per dim, so a
    bug that starts at 1025 is reported at 1025, not at the boundary 2049.
    """
    attempts = 0
    changed = True
    while changed and attempts < budget:
        changed = False
        for sym in sorted(spec.dims, key=lambda s: -spec.dims[s]):
            lo, hi = subject.contract.dims[sym].min, spec.dims[sym] - 1  # search [lo, hi] for a failure
            while lo <= hi and attempts < budget:
                mid = lo if lo == hi else (lo + hi) // 2
                candidate = replace(spec, dims={**spec.dims, sym: mid})
                attempts += 1
                found = fails(candidate)
                if found is not None:
                    spec, finding, changed = candidate, found, True
                    hi = mid - 1
                else:
                    lo = mid + 1
    return spec, finding


def _error_by_size(context: Any, spec: Spec, *, determinism: bool, points: int = 8) -> tuple[str, list[dict]]:
    """Max abs error against the size of the counterexample's largest dim, for a plot.

    Sizes run from the contract's minimum to twice the failing size, so a bug
    that starts at 1025 shows as a step there.  A non-numeric failure plots as NaN.
    """
    subject = context.subject
    sym = max(spec.dims, key=lambda s: spec.dims[s])
    d = subject.contract.dims[sym]
    top = min(d.max, max(2 * spec.dims[sym], d.min + 1))
    sizes = sorted({d.min, spec.dims[sym] - 1, spec.dims[sym], top} |
                   {int(d.min + (top - d.min) * i / (points - 1)) for i in range(points)})
    series = []
    for n in (n for n in sizes if d.min <= n <= d.max):
        try:
            verdict = run_example(subject, replace(spec, dims={**spec.dims, sym: n}), context.backend,
                                  context.judge, determinism=determinism)
        except BudgetExhausted:
            continue  # the plot loses a point rather than the subject its compile budget
        if isinstance(verdict, Finding):
            err = verdict.details.get("max_abs_err")
            series.append({"x": n, "y": float(err) if err is not None else float("nan"), "outcome": verdict.outcome})
        else:
            series.append({"x": n, "y": 0.0, "outcome": verdict})
    return sym, series


def shrink(context: Any, violation: Violation, *, keeps_class: Callable[[Spec, Spec], bool], minimize: bool,
           determinism: bool) -> tuple[Spec, Finding, dict]:
    """The smallest spec that fails like ``violation`` does, its finding and details (with the error plot).

    ``keeps_class(candidate, original)``: whether a candidate still belongs to the
    cell's class; candidates that leave it, or cross the contract's edge, do not count.
    """
    contract = context.subject.contract
    kind = expectation(contract, violation.spec).kind

    def fails(candidate: Spec) -> Finding | None:
        if expectation(contract, candidate).kind != kind or not keeps_class(candidate, violation.spec):
            return None  # stay on the same side of the contract, and in the cell's class
        try:
            verdict = run_example(context.subject, candidate, context.backend, context.judge,
                                  determinism=determinism)
        except BudgetExhausted:
            return None  # a candidate the budget cannot compile does not count as failing
        return verdict if isinstance(verdict, Finding) else None

    spec, finding = violation.spec, violation.finding
    if minimize:
        spec, finding = minimize_dims(context.subject, spec, finding, fails)
    details = dict(finding.details)
    if kind == "honour":
        sym, details["series"] = _error_by_size(context, spec, determinism=determinism)
        details["series_labels"] = {"x": f"{sym} (other dims as in the counterexample)", "y": "max abs error"}
    return spec, finding, details


def counterexample(subject: Any, spec: Spec) -> Counterexample:
    """The spec, with each input's real shape, strides and storage offset."""
    tensors = {}
    for name, decl in subject.contract.inputs.items():
        shape = tuple(spec.dims[s] for s in decl.shape)
        strides, offset, _ = strides_for(shape, spec.layout(name))
        tensors[name] = TensorView(shape=shape, strides=strides, storage_offset=offset, dtype=spec.dtypes[name])
    return Counterexample(spec.to_dict(), tensors)


def assemble(context: Any, outcome: SearchOutcome, shrunk: tuple[Spec, Finding, dict] | None) -> CellResult:
    """The cell's result from its search (and the shrunk failure, if there was one)."""
    subject, cell = context.subject, context.cell
    counts, discarded, examples = outcome.counts, outcome.discarded, outcome.examples
    rejected = counts[EXAMPLE_REJECTED]
    if shrunk is not None:
        spec, finding, details = shrunk
        return failed(subject, cell, finding, details=details, counterexample=counterexample(subject, spec),
                      reproducer=reproducer(subject, cell, spec, finding, context.backend),
                      examples=examples, rejected_examples=rejected)
    error = outcome.error
    if isinstance(error, Unsatisfiable) and discarded:
        error = None  # every example needed a kernel past the budget: nothing was wrong, little was run
    if error is not None:
        return cell_result(subject, cell, "crash", f"hypothesis could not search this cell: {error}",
                           finding="search-error")
    budget_details = {"compile_budget_discarded": discarded} if discarded else {}
    if examples == 0 and discarded:
        return skipped(subject, cell, f"the subject's compile budget ({context.compile_budget}) was used before "
                       f"this cell ran an example; {discarded} discarded", details=budget_details)
    # Inputs outside the contract were drawn: each was refused, or computed right.
    # (Degenerate draws, such as a transpose of 1x1, are inside it.)
    unexplained, accepted, unjudged = (counts[EXAMPLE_REJECTED_UNEXPLAINED], counts[EXAMPLE_ACCEPTED],
                                       counts[EXAMPLE_UNJUDGED])
    refused = rejected + unexplained
    parts = [f"{examples} examples"]
    if refused:
        parts.append(f"{refused} outside the contract refused" + (
            f" ({unexplained} without a message, or from inside triton/torch)" if unexplained else ""))
    if accepted:
        parts.append(f"{accepted} outside the contract accepted and right: the claim could be wider")
    if unjudged:
        parts.append(f"{unjudged} outside the contract accepted, but the oracle cannot judge them")
    if not (refused or accepted or unjudged):
        parts.append("all honoured")
    if discarded:
        parts.append(f"{discarded} discarded (compile budget {context.compile_budget} used)")
    outcome_name = "accepted" if accepted else "rejected" if refused else "honoured"
    return cell_result(subject, cell, outcome_name, ", ".join(parts), details=budget_details,
                       examples=examples, rejected_examples=refused)
