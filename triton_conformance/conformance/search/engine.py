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

Safety:

- **Memory cap.**  An example's bytes are estimated from its spec
  (:func:`example_bytes`: each input's storage span as laid out, and a factor
  for its copies, the outputs and the oracle's float64 copies); one over the
  cap (:func:`memory_cap`, default a quarter of the machine's memory,
  ``RunConfig.memory_cap`` overrides) is discarded before it is built, like
  the compile budget's discards, and a cell whose every draw is over it is
  skipped saying so.
- **A second finding.**  One failure per cell, but a cheap one (a crash on an
  empty input) must not hide another bug at ordinary sizes: after the first
  failure is shrunk, :func:`search` runs once more, with a smaller budget,
  excluding the first finding's class (:func:`finding_class`: its outcome,
  its kind and whether some dim is 0); the second is reported in the
  result's details (``second_finding``) and message.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import HypothesisException, Unsatisfiable

from triton_conformance.conformance.battery.forward import (
    EXAMPLE_ACCEPTED,
    EXAMPLE_REJECTED,
    EXAMPLE_REJECTED_UNEXPLAINED,
    EXAMPLE_UNJUDGED,
)
from triton_conformance.conformance.search.compiles import BudgetExhausted
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.results import cell_result, failed, reproducer, skipped
from triton_conformance.conformance.search.allowance import MEMORY_FRACTION, example_bytes, finding_class, gib, memory_cap
from triton_conformance.conformance.search.specializations import in_compiled_class, run_counted
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding, TensorView
from triton_conformance.model.spec import Spec, strides_for

__all__ = ["Violation", "SearchOutcome", "profile_settings", "search", "shrink", "assemble", "minimize_dims",
           "counterexample", "MAX_DISCARDS", "example_bytes", "memory_cap", "finding_class", "second_search",
           "MEMORY_FRACTION", "specializations"]

DISCARDED = "discarded"
OVER_MEMORY = "over-memory"  # examples discarded as over the per-cell memory cap
# Examples discarded on CUDA because the cell may start no new class and none compiled would hold them.
NO_COMPILED_CLASS = "no-compiled-class"
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
        derandomize=False,  # a derandomized profile pins the seed instead (see search)
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
    counts: Counter = field(default_factory=Counter)  # "honoured" / "rejected" / "failed" -> examples run
    discards: Counter = field(default_factory=Counter)  # a budget's ``discard`` name -> examples not run
    steered: int = 0  # examples moved into a compiled class (CUDA, once the cell may start no new class)
    reused: int = 0  # examples that compiled nothing new

    @property
    def discarded(self) -> int:
        return self.discards[DISCARDED]

    @property
    def over_memory(self) -> int:
        return self.discards[OVER_MEMORY]

    @property
    def examples(self) -> int:
        return sum(self.counts.values())


def search(context: Any, strategy: Any, *, determinism: bool = False, excluding: tuple | None = None,
           max_examples: int | None = None, shrink_calls: int | None = None,
           keeps_class: Callable[[Spec, Spec], bool] | None = None) -> SearchOutcome:
    """Search ``strategy``'s specs for one that breaks ``context.subject``'s contract.

    ``excluding``: a :func:`finding_class` that does not count as a failure (the
    second search); with an ``"empty"`` class, specs with a 0 dim are not even run.
    ``max_examples`` / ``shrink_calls``: instead of the profile's.
    ``keeps_class(candidate, drawn)``: whether an example moved into a compiled class
    (on CUDA, once the cell's share of the compile budget is spent) is still in the cell's class.
    """
    subject, cell, observer = context.subject, context.cell, context.observer
    outcome = SearchOutcome()
    counts, discards = outcome.counts, outcome.discards
    # repr(spec) -> its violation, for Hypothesis's replays; the shrinker only tries
    # smaller specs, so the one added last is the best so far.
    failures: dict[str, Violation] = {}
    shrink_calls = context.config.profile.shrink_calls if shrink_calls is None else shrink_calls
    after_failure = [0]  # kernel runs since the first failure: the shrinker's spend
    cap = memory_cap(context.config)
    steering = context.compiles is not None and context.compiles.budget is not None

    def probe(spec: Spec) -> None:
        key = repr(spec)
        if key in failures:
            raise failures[key]  # a replay of a known failure: no need to run the kernel again
        if failures and after_failure[0] >= shrink_calls:
            raise _StopSearch  # the shrink budget is spent: the latest failure is the smallest so far
        if sum(n for k, n in discards.items() if k != OVER_MEMORY) >= MAX_DISCARDS + 3 * outcome.examples:
            raise _StopSearch  # a budget (compiles, the interpreter's cost) is spent on what this cell keeps asking for
        if excluding is not None and excluding[2] == "empty" and any(n == 0 for n in spec.dims.values()):
            reject()  # the first finding was at an empty size: look elsewhere
        if example_bytes(subject.contract, spec) > cap:
            discards[OVER_MEMORY] += 1
            reject()  # not run: it would need more memory than a cell may take
        if steering:
            steered = in_compiled_class(context, spec, keeps_class, excluding, cap)
            if steered is None:
                discards[NO_COMPILED_CLASS] += 1
                reject()  # the cell may compile no new class, and no compiled one holds this example
            outcome.steered += steered is not spec
            spec = steered
        observer.example_started(subject, cell, spec)
        if failures:
            after_failure[0] += 1
        started = time.perf_counter()
        classes_before = context.compiles.classes if steering else 0
        try:
            verdict = run_counted(context, spec, determinism=determinism)
            if steering and context.compiles.classes == classes_before:
                outcome.reused += 1
        except BudgetExhausted as exc:
            discards[exc.discard] += 1
            observer.example_finished(subject, cell, spec, exc.discard, time.perf_counter() - started)
            reject()  # not a failure: the example needs what a budget cannot pay for (a kernel, a cost)
        observer.example_finished(subject, cell, spec, verdict, time.perf_counter() - started)
        if isinstance(verdict, Finding) and excluding is not None and finding_class(verdict, spec) == excluding:
            counts["failed-as-first"] += 1  # the first finding's bug again
            return
        if isinstance(verdict, Finding):
            counts["failed"] += 1
            failures[key] = Violation(verdict, spec)
            raise failures[key]
        counts[verdict] += 1

    digest = f"{subject.name}::{cell}" + ("::second" if excluding is not None else "")
    probe._hypothesis_internal_add_digest = digest.encode()  # distinct database keys
    hypothesis_settings = profile_settings(context.config)
    if max_examples is not None:
        hypothesis_settings = settings(hypothesis_settings, max_examples=max_examples)
    test = hypothesis_settings(given(strategy)(probe))
    if context.config.profile.derandomize:
        # Pinned by the cell's name, not by Hypothesis's derandomize digest, which hashes this
        # module's source: the same draws on every machine and across changes of the engine's code.
        test = hypothesis_seed(zlib.crc32(f"{subject.name}::{cell}".encode()))(test)
    elif context.seed is not None:
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
    cap = memory_cap(context.config)
    for n in (n for n in sizes if d.min <= n <= d.max):
        if example_bytes(subject.contract, replace(spec, dims={**spec.dims, sym: n})) > cap:
            continue  # the plot loses a point rather than the machine its memory
        try:
            verdict = run_counted(context, replace(spec, dims={**spec.dims, sym: n}), determinism=determinism)
        except BudgetExhausted:
            continue  # the plot loses a point rather than the subject its compile budget
        if isinstance(verdict, Finding):
            err = verdict.details.get("max_abs_err")
            series.append({"x": n, "y": float(err) if err is not None else float("nan"), "outcome": verdict.outcome})
        else:
            series.append({"x": n, "y": 0.0, "outcome": verdict})
    return sym, series


def shrink(context: Any, violation: Violation, *, keeps_class: Callable[[Spec, Spec], bool], minimize: bool,
           determinism: bool, excluding: tuple | None = None) -> tuple[Spec, Finding, dict]:
    """The smallest spec that fails like ``violation`` does, its finding and details (with the error plot).

    ``keeps_class(candidate, original)``: whether a candidate still belongs to the
    cell's class; candidates that leave it, or cross the contract's edge, do not count.
    """
    contract = context.subject.contract
    kind = expectation(contract, violation.spec).kind
    cap = memory_cap(context.config)

    def fails(candidate: Spec) -> Finding | None:
        if expectation(contract, candidate).kind != kind or not keeps_class(candidate, violation.spec):
            return None  # stay on the same side of the contract, and in the cell's class
        if example_bytes(contract, candidate) > cap:
            return None
        if excluding is not None and excluding[2] == "empty" and any(n == 0 for n in candidate.dims.values()):
            return None
        try:
            verdict = run_counted(context, candidate, determinism=determinism)
        except BudgetExhausted:
            return None  # a candidate the budget cannot compile does not count as failing
        if isinstance(verdict, Finding) and excluding is not None and finding_class(verdict, candidate) == excluding:
            return None  # shrank back into the first finding's bug
        return verdict if isinstance(verdict, Finding) else None

    spec, finding = violation.spec, violation.finding
    if minimize:
        spec, finding = minimize_dims(context.subject, spec, finding, fails)
    details = dict(finding.details)
    if kind == "honour" and excluding is None:
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


def second_search(context: Any, strategy: Any, first: tuple[Spec, Finding, dict], *,
                  keeps_class: Callable[[Spec, Spec], bool], minimize: bool, determinism: bool
                  ) -> tuple[SearchOutcome, tuple[Spec, Finding, dict] | None]:
    """Search once more, excluding the first finding's class, with half the profile's budgets.

    Only a cell that failed runs it, so a passing cell costs nothing more.
    """
    spec, finding, _ = first
    excluded = finding_class(finding, spec)
    profile = context.config.profile
    found = search(context, strategy, determinism=determinism, excluding=excluded, keeps_class=keeps_class,
                   max_examples=max(2, context.config.examples // 2), shrink_calls=max(1, profile.shrink_calls // 2))
    if found.failure is None:
        return found, None
    return found, shrink(context, found.failure, keeps_class=keeps_class, minimize=minimize,
                         determinism=determinism, excluding=excluded)


def assemble(context: Any, outcome: SearchOutcome, shrunk: tuple[Spec, Finding, dict] | None,
             second: tuple[Spec, Finding, dict] | None = None, second_examples: int = 0) -> CellResult:
    """The cell's result from its search (and the shrunk failure, if there was one; and the
    second search's, in ``details["second_finding"]`` and the message)."""
    result = _assembled(context, outcome, shrunk, second, second_examples)
    share = getattr(context, "compiles", None)
    if share is None:
        return result
    # On CUDA: what the cell's share of the compile budget bought, and how far the search reused it.
    return replace(result, details={**result.details, "specializations": specializations(
        share, examples=outcome.examples, reused=outcome.reused, steered=outcome.steered)})


def specializations(share: Any, *, examples: int, reused: int, steered: int) -> dict[str, int]:
    """A cell's ``details["specializations"]`` on CUDA: examples run, classes its share bought, examples that
    compiled nothing new, examples moved into a compiled class, and compiles past the subject's budget
    (a cell's one class, where it could run nothing otherwise)."""
    return {"examples": examples, "classes_compiled": share.classes, "examples_reused": reused,
            "examples_steered": steered, "compiled_past_budget": share.past_budget}


def _assembled(context: Any, outcome: SearchOutcome, shrunk: tuple[Spec, Finding, dict] | None,
               second: tuple[Spec, Finding, dict] | None, second_examples: int) -> CellResult:
    subject, cell = context.subject, context.cell
    counts, discarded, examples = outcome.counts, outcome.discarded, outcome.examples
    rejected = counts[EXAMPLE_REJECTED]
    if shrunk is not None:
        spec, finding, details = shrunk
        message = finding.message
        if second is not None:
            spec2, finding2, details2 = second
            details = {**details, "second_finding": {
                "outcome": finding2.outcome, "kind": finding2.kind, "message": finding2.message,
                "details": details2, "counterexample": counterexample(subject, spec2).to_dict(),
                "reproducer": reproducer(subject, cell, spec2, finding2, context.backend)}}
            message += (f" | and a second bug, outside this one's class ({finding2.outcome}/{finding2.kind} at "
                        f"{spec2.dims}): {finding2.message}")
        if outcome.over_memory:
            details = {**details, "over_memory_discarded": outcome.over_memory}
        return failed(subject, cell, finding, message=message, details=details,
                      counterexample=counterexample(subject, spec),
                      reproducer=reproducer(subject, cell, spec, finding, context.backend),
                      examples=examples + second_examples, rejected_examples=rejected)
    over = outcome.over_memory
    cap = memory_cap(context.config)
    if examples == 0 and over:
        return skipped(subject, cell, f"every draw would need more than the per-cell memory cap ({gib(cap)}); "
                       f"{over} discarded unrun", details={"over_memory_discarded": over})
    error = outcome.error
    others = {k: n for k, n in outcome.discards.items() if k not in (DISCARDED, OVER_MEMORY) and n}
    if isinstance(error, Unsatisfiable) and (discarded or over or others):
        error = None  # every example needed a kernel past the budget (or too much memory): nothing was wrong
    if error is not None:
        return cell_result(subject, cell, "crash", f"hypothesis could not search this cell: {error}",
                           finding="search-error")
    budget_details = {"compile_budget_discarded": discarded} if discarded else {}
    if over:
        budget_details["over_memory_discarded"] = over
    # Discards for budgets other than the compile budget and the memory cap (the interpreter's cost, ...):
    # each subclass of BudgetExhausted names its own count.
    for k, n in others.items():
        budget_details[f"{k}_discarded"] = n
    if examples == 0 and discarded:
        return skipped(subject, cell, f"the subject's compile budget ({context.compile_budget}) was used before "
                       f"this cell ran an example; {discarded} discarded", details=budget_details)
    if examples == 0 and others:
        return skipped(subject, cell, "every draw was over a budget: " + ", ".join(
            f"{n} discarded ({k})" for k, n in others.items()), details=budget_details)
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
    if over:
        parts.append(f"{over} discarded unrun (over the memory cap, {gib(cap)})")
    parts += [f"{n} discarded ({k})" for k, n in others.items()]
    outcome_name = "accepted" if accepted else "rejected" if refused else "honoured"
    return cell_result(subject, cell, outcome_name, ", ".join(parts), details=budget_details,
                       examples=examples, rejected_examples=refused)
