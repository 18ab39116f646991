"""The one search loop: Hypothesis draws a kind's specs, the kind's example runner judges each one.

Every cell kind that searches (the searched kinds, the gradient cells, the
autotune cells) runs its examples through :func:`search`, with:

- an **example runner** (:class:`ExampleRunner`): one forward example, one
  backward example, one tuned launch: whatever the kind checks;
- a **draw** (:class:`Draw`): the strategy, which shrunk candidates stay in the
  cell's class, and a name that tells a cell's draws apart;
- the cell's :class:`~.allowance.Allowance`, which every discard goes through.

Every example of a search raises the same :class:`Violation` from the same
place when it fails, so Hypothesis treats all failures as one bug and shrinks
to the smallest spec that fails in any way.  The cut-offs count kernel runs,
never seconds, so a derandomized profile reports the same failure on any
machine: a search ends once its budgets keep discarding
(:meth:`~.allowance.Allowance.spent`), or once the shrinker has spent its
``shrink_calls`` after the first failure.  Draws outside the contract are run
only by a runner that judges them (the forward battery: refuse, or compute
right); a gradient or a tuning probe is judged inside the contract only.

On CUDA a draw whose specialization class is not compiled, in a cell that may
start no new class, is moved into a compiled one (:mod:`.specializations`).

With ``--conformance-batch N`` (:attr:`~.policy.SearchPolicy.batch`) a search
starts one example a test case, then draws N distinct specs a test case, each
judged on its own: Hypothesis's cost per case is shared, but which examples
run changes (docs/performance.md), so the default is 1.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import given, reject
from hypothesis import strategies as st
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import HypothesisException

from triton_conformance.conformance import gpu_turns
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.discards import NO_COMPILED_CLASS, ExampleDiscarded
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.conformance.search.specializations import counted, in_compiled_class
from triton_conformance.model.outcomes import Counterexample, Finding
from triton_conformance.model.spec import Spec

__all__ = ["ExampleRunner", "Draw", "FindingClass", "Violation", "SearchOutcome", "search", "run_one",
           "OUTSIDE_CONTRACT"]

# Draws a runner that judges inside the contract only did not run (SearchOutcome.not_run's key).
OUTSIDE_CONTRACT = "outside the contract"


class ExampleRunner(Protocol):
    """Runs one example of a cell (a forward call, a backward pass, a tuned launch) and judges it.

    - ``inside_only``: draws outside the contract are not run (the runner has nothing to judge there);
    - ``__call__(spec)``: the verdict, a Finding or a word (``"honoured"``, ``"rejected"``, ...); raises
      :class:`~triton_conformance.conformance.discards.ExampleDiscarded` for an example the cell's allowance cannot pay for;
    - ``counterexample(spec)``: the failing example as a report shows it.
    """

    inside_only: bool

    def __call__(self, spec: Spec) -> Finding | str: ...

    def counterexample(self, spec: Spec) -> Counterexample: ...


@dataclass(frozen=True)
class Draw:
    """One strategy of a cell: what it draws, and which shrunk candidates stay in the cell's class.

    - ``keeps_class(candidate, original)``: whether a candidate (shrunk, or moved into a compiled
      class) still belongs to the cell's class (default: any does);
    - ``name``: tells a cell's draws apart (their seeds and database entries);
    - ``max_examples``: examples of this draw, instead of the profile's.
    """

    strategy: Any
    keeps_class: Callable[[Spec, Spec], bool] | None = None
    name: str = ""
    max_examples: int | None = None

    def keeps(self, candidate: Spec, original: Spec) -> bool:
        return self.keeps_class is None or self.keeps_class(candidate, original)


@dataclass(frozen=True)
class FindingClass:
    """What makes a later finding of a cell the same bug as its first: the outcome, the kind, and whether
    the first was at an empty size.  ``degenerate``: the first counterexample's dims at size 0 or 1,
    which a search for a second finding leaves out (a cheap failure at a degenerate size must not hide a
    bug at ordinary sizes)."""

    outcome: str
    kind: str
    empty: bool
    degenerate: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, finding: Finding, spec: Spec) -> "FindingClass":
        empty = any(n == 0 for n in spec.dims.values())
        ones = tuple((s, 1) for s, n in sorted(spec.dims.items()) if n == 1)
        return cls(finding.outcome, finding.kind, empty, () if empty else ones)

    def same_bug(self, finding: Finding, spec: Spec) -> bool:
        return (finding.outcome, finding.kind, any(n == 0 for n in spec.dims.values())) == (
            self.outcome, self.kind, self.empty)

    def excludes(self, spec: Spec) -> bool:
        """Whether a search for another finding leaves ``spec`` out: at the first's degenerate size."""
        if self.empty:
            return any(n == 0 for n in spec.dims.values())
        return bool(self.degenerate) and all(spec.dims.get(s) == n for s, n in self.degenerate)


class Violation(Exception):
    """One example broke the contract."""

    def __init__(self, finding: Finding, spec: Spec):
        super().__init__(f"{finding.outcome}/{finding.kind}: {finding.message}")
        self.finding = finding
        self.spec = spec


class _NotRun(Exception):
    """A draw of a batch that is not run (outside the contract, over a cap, judged before): the batch goes on."""


class _Alone(BaseException):
    """A batched search's first examples, one a test case, are all run: the batches draw the rest."""


class _StopSearch(BaseException):
    """Ends a search early, past Hypothesis (which would keep drawing): a budget is spent.

    A BaseException, so Hypothesis does not take it for a failure to shrink.
    """


@dataclass
class SearchOutcome:
    """What one search found: the smallest failure (or why it could not search), and what it ran."""

    failure: Violation | None = None
    error: Exception | None = None
    counts: Counter = field(default_factory=Counter)  # verdict ("honoured", "rejected", "failed") -> examples
    not_run: Counter = field(default_factory=Counter)  # why a draw was not run (outside the contract) -> draws
    steered: int = 0  # examples moved into a compiled class (CUDA, once the cell may start no new class)
    reused: int = 0  # examples that compiled nothing new
    asked: int = 0  # examples the search was allowed

    @property
    def examples(self) -> int:
        return sum(self.counts.values())

    def add(self, other: "SearchOutcome") -> None:
        """Count ``other``'s examples in with these (a cell of several draws)."""
        self.counts.update(other.counts)
        self.not_run.update(other.not_run)
        self.steered += other.steered
        self.reused += other.reused
        self.asked += other.asked


def run_one(context: CellContext, runner: ExampleRunner, spec: Spec, *, admitted: bool = False) -> Finding | str:
    """One example of a cell, the one way every example runs: the search's draws, the shrinker's candidates
    and the error plot's sizes alike.

    A spec over the memory cap is discarded unrun (``admitted``: the caller has just checked it); the observer is told the example started (so a kernel
    that kills the process is recorded with this spec) and how it ended; it runs as one example of the
    cell's compile share (:func:`~.specializations.counted`); a discard is counted once, by the allowance,
    and raised (:class:`~triton_conformance.conformance.discards.ExampleDiscarded`); an example run to a verdict is counted as run.
    """
    subject, cell, observer, allowance = context.subject, context.cell, context.observer, context.allowance
    if not admitted:
        allowance.admit(subject.contract, spec)
    gpu_turns.at_example()  # where another process's timing waits for this one (gpu_turns)
    observer.example_started(subject, cell, spec)
    started = time.perf_counter()
    try:
        verdict = counted(context, spec, runner)
    except ExampleDiscarded as exc:
        allowance.discarded(exc)
        observer.example_finished(subject, cell, spec, exc.reason, time.perf_counter() - started)
        raise  # not a failure: the example needs what a budget cannot pay for (a kernel, a cost)
    allowance.ran += 1
    observer.example_finished(subject, cell, spec, verdict, time.perf_counter() - started)
    return verdict


def search(context: CellContext, runner: ExampleRunner, draw: Draw, *, excluding: FindingClass | None = None,
           max_examples: int | None = None, shrink_calls: int | None = None) -> SearchOutcome:
    """Search ``draw``'s specs for one that ``runner`` finds breaks ``context.subject``'s contract.

    - ``excluding``: a first finding's class: findings of that bug do not count, and its degenerate
      sizes are not drawn (the search for a second finding);
    - ``max_examples`` / ``shrink_calls``: instead of the draw's or the profile's.
    """
    subject, cell, allowance = context.subject, context.cell, context.allowance
    contract = subject.contract
    policy = context.policy
    outcome = SearchOutcome(asked=max_examples or draw.max_examples or policy.examples)
    # spec -> its violation, for Hypothesis's replays; the shrinker only tries
    # smaller specs, so the one added last is the best so far.
    failures: dict[Spec, Violation] = {}
    shrink_calls = allowance.shrink_calls if shrink_calls is None else shrink_calls
    after_failure = [0]  # kernel runs since the first failure: the shrinker's spend
    batch = policy.batch
    judged: set[Spec] = set()  # with batches: draws already run to a verdict, not run again

    def skip() -> None:
        if batch > 1:
            raise _NotRun  # the batch draws its next example
        reject()

    def admits(spec: Spec) -> bool:
        return allowance.fits(contract, spec) and not (excluding is not None and excluding.excludes(spec))

    def probe(spec: Spec) -> None:
        if failures and spec in failures:  # (a spec's hash sorts its fields: none is needed before a failure)
            raise failures[spec]  # a replay of a known failure: no need to run the kernel again
        if failures and after_failure[0] >= shrink_calls:
            raise _StopSearch  # the shrink budget is spent: the latest failure is the smallest so far
        if allowance.spent():
            raise _StopSearch  # a budget (compiles, the interpreter's cost) keeps refusing what this cell draws
        if excluding is not None and excluding.excludes(spec):
            skip()  # the first finding's degenerate size: look elsewhere
        if runner.inside_only and expectation(contract, spec).kind != "honour":
            outcome.not_run[OUTSIDE_CONTRACT] += 1
            skip()
        try:
            allowance.admit(contract, spec)
        except ExampleDiscarded:
            skip()  # not run: it would need more memory than an example may take
        admitted = spec
        if allowance.steering:
            steered = in_compiled_class(context, spec, draw.keeps_class, admits)
            if steered is None:
                allowance.discard(NO_COMPILED_CLASS)
                skip()  # the cell may compile no new class, and no compiled one holds this example
            outcome.steered += steered is not spec
            spec = steered
        if failures:
            after_failure[0] += 1
        classes_before = allowance.compiles.classes if allowance.steering else 0
        try:
            verdict = run_one(context, runner, spec, admitted=spec is admitted)  # a steered one is checked again
        except ExampleDiscarded:
            skip()  # counted by the step; the search draws another
        if allowance.steering and allowance.compiles.classes == classes_before:
            outcome.reused += 1
        if isinstance(verdict, Finding) and excluding is not None and excluding.same_bug(verdict, spec):
            outcome.counts["failed-as-first"] += 1  # the first finding's bug again
            return
        if isinstance(verdict, Finding):
            outcome.counts["failed"] += 1
            failures[spec] = Violation(verdict, spec)
            raise failures[spec]
        outcome.counts[verdict] += 1

    def probe_batch(batch_specs: list[Spec]) -> None:
        """One test case of ``batch`` distinct draws, each judged on its own; the first failure raises, so
        Hypothesis shrinks the case towards it (draws judged before are not run again)."""
        ran = 0
        for spec in batch_specs:
            if spec in judged and spec not in failures:
                continue
            try:
                probe(spec)
            except _NotRun:
                continue
            judged.add(spec)
            ran += 1
            if not failures and outcome.examples >= outcome.asked:
                raise _StopSearch  # the cell's examples are all run
        if not ran:
            reject()  # nothing in this case ran: Hypothesis counts it invalid (and gives up on a cell of only these)

    salt = draw.name + ("::second" if excluding is not None else "")
    if batch > 1:
        # First, one a test case, the examples Hypothesis draws to start a search: the simplest draw, then
        # as many new prefixes extended with the simplest choices as it makes (a tenth of its examples):
        # the boundaries a class starts at, which no batch of distinct draws holds.  Then batches of
        # distinct draws (Hypothesis's mutator copies one draw over another, which a batch would only
        # skip); their database entries are not single examples.
        alone = 1 + min(outcome.asked // 10, 50)

        def probe_alone(spec: Spec) -> None:
            probe_batch([spec])
            if not failures and outcome.examples >= alone:
                raise _Alone

        batches = st.lists(draw.strategy, min_size=batch, max_size=batch, unique=True)
        tests = [policy.settings(subject.name, cell, salt, max_examples=outcome.asked)(given(draw.strategy)(
                     probe_alone)),
                 policy.settings(subject.name, cell, salt + "::batch", max_examples=outcome.asked)(
                     given(batches)(probe_batch))]
    else:
        tests = [policy.settings(subject.name, cell, salt, max_examples=outcome.asked)(given(draw.strategy)(probe))]
    seed = policy.seed_for(subject.name, cell, draw.name)
    try:
        for test in tests:
            try:
                (test if seed is None else hypothesis_seed(seed)(test))()
            except _Alone:
                continue
    except Violation as exc:
        outcome.failure = exc
    except _StopSearch:
        outcome.failure = next(reversed(failures.values()), None)
    except HypothesisException as exc:
        # A failure Hypothesis could not replay (a nondeterministic one) is still the failure it was.
        outcome.failure = next(reversed(failures.values()), None)
        if outcome.failure is None:
            outcome.error = exc
    return outcome
