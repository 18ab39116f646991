"""Run one contract cell: search it with Hypothesis, shrink the first failure.

Every example of a cell raises the same :class:`Violation` from the same
place when it fails, so Hypothesis treats all failures as one bug and shrinks
to the smallest spec that fails in any way.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from typing import Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import HypothesisException, Unsatisfiable

from triton_conformance.conformance.cells import expectation, skip_reason
from triton_conformance.conformance.checks import EXAMPLE_REJECTED, run_example
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.compiles import BudgetExhausted, counting_compiles
from triton_conformance.conformance.observe import NO_OBSERVER, Observer
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding, TensorView
from triton_conformance.conformance.replay import reproducer
from triton_conformance.model.subject import Subject
from triton_conformance.model.spec import Spec, strides_for
from triton_conformance.strategies._internal.specs import BEYOND_BLOCK, specs

__all__ = ["Violation", "run_cell", "profile_settings", "LARGE_INDEX_CELL", "FIXED_SIZE_CELLS", "fixed_size_cells"]

DISCARDED = "discarded"
LARGE_INDEX_CELL = "shape:large-index"  # its own runner: see conformance/large_index.py
FIXED_SIZE_CELLS = ("performance", LARGE_INDEX_CELL)

# Once a cell has discarded this many examples (plus three per example it ran) for
# want of compile budget, its search ends: each discard builds inputs and starts a
# launch (about 2 ms on an H200), and a cell whose kernels the budget never paid for
# would otherwise spend Hypothesis's whole allowance of invalid examples.
MAX_DISCARDS = 100
# Seconds Hypothesis may spend shrinking a failure before the rest of its
# candidates are waved through; our own per-dim search (minimize_dims) follows.
# A slow kernel under the interpreter otherwise shrinks for Hypothesis's own
# five-minute limit (flash attention: 300 s for one cell).
SHRINK_SECONDS = 20.0


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


def in_shape_class(cell: str, candidate: Spec, original: Spec) -> bool:
    """Whether a shrunk candidate still belongs to a shape cell's class."""
    if cell == "shape:tiny":
        return all(n <= 3 for n in candidate.dims.values())
    if cell == "shape:non-pow2":  # every dim it moved is still 2^k +- 1 or the like
        return all(n == original.dims[s] or (n > 1 and n & (n - 1)) for s, n in candidate.dims.items())
    if cell == "shape:beyond-block":
        widest = max(original.dims, key=lambda s: original.dims[s])
        return candidate.dims[widest] >= min(BEYOND_BLOCK, original.dims[widest])
    return True


def minimize_dims(subject: Subject, spec: Spec, finding: Finding, fails: Callable[[Spec], Finding | None],
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


def error_by_size(subject: Subject, spec: Spec, backend: Backend, *, determinism: bool = False,
                  points: int = 8) -> tuple[str, list[dict]]:
    """Max abs error against the size of the counterexample's largest dim, for a plot.

    Sizes run from the contract's minimum to twice the failing size, so a bug
    that starts at 1025 shows as a step there.  A non-numeric failure plots as NaN.
    """
    sym = max(spec.dims, key=lambda s: spec.dims[s])
    d = subject.contract.dims[sym]
    top = min(d.max, max(2 * spec.dims[sym], d.min + 1))
    sizes = sorted({d.min, spec.dims[sym] - 1, spec.dims[sym], top} |
                   {int(d.min + (top - d.min) * i / (points - 1)) for i in range(points)})
    series = []
    for n in (n for n in sizes if d.min <= n <= d.max):
        try:
            verdict = run_example(subject, replace(spec, dims={**spec.dims, sym: n}), backend,
                                  determinism=determinism)
        except BudgetExhausted:
            continue  # the plot loses a point rather than the subject its compile budget
        if isinstance(verdict, Finding):
            err = verdict.details.get("max_abs_err")
            series.append({"x": n, "y": float(err) if err is not None else float("nan"), "outcome": verdict.outcome})
        else:
            series.append({"x": n, "y": 0.0, "outcome": verdict})
    return sym, series


def counterexample(subject: Subject, spec: Spec) -> Counterexample:
    """The spec, with each input's real shape, strides and storage offset."""
    tensors = {}
    for name, decl in subject.contract.inputs.items():
        shape = tuple(spec.dims[s] for s in decl.shape)
        strides, offset, _ = strides_for(shape, spec.layout(name))
        tensors[name] = TensorView(shape=shape, strides=strides, storage_offset=offset, dtype=spec.dtypes[name])
    return Counterexample(spec.to_dict(), tensors)


def run_cell(
    subject: Subject,
    cell: str,
    *,
    backend: Backend | None = None,
    config: RunConfig | None = None,
    seed: int | None = None,
    observer: Observer = NO_OBSERVER,
) -> CellResult:
    """Search ``cell`` of ``subject`` and return its verdict.

    - ``backend``: where kernels run (default: the interpreter).
    - ``config``: the run's :class:`RunConfig` (profile, compile budget, examples).
    - ``seed``: a Hypothesis seed, for profiles that are not derandomized.
    - ``observer``: told of each example and of the cell's end (a flight recorder, a benchmark).
    """
    backend = backend or Backend()
    config = config or RunConfig()
    contract = subject.contract
    base = dict(subject=subject.name, family=subject.family, cell=cell, expected_failure=subject.xfail)
    start = time.perf_counter()
    budget = config.compile_budget
    on_cuda = backend.compiles
    if _is_fixed_size(cell):  # not searched: paid from the compiles the search leaves for them
        return _run_fixed_size_cell(subject, cell, backend, budget, base, seed)
    reason = skip_reason(contract, cell, untestable_dtypes=backend.untestable)
    if reason is not None:
        return CellResult(outcome="skipped", message=reason, **base)
    if budget is not None:
        budget = max(1, budget - len(fixed_size_cells(contract, backend)))
    testable = tuple(d for d in ("float16", "bfloat16", "float32", "float64") if d not in backend.untestable)
    p = config.profile
    strategy = specs(contract, cell=cell, dtypes=testable, max_elements=p.max_elements, max_outer=p.max_outer,
                     palette=on_cuda and budget is not None)
    counts: Counter[str] = Counter()

    # repr(spec) -> its violation, for Hypothesis's replays; the shrinker only tries
    # smaller specs, so the one added last is the best so far.
    failures: dict[str, Violation] = {}
    first_failure: list[float] = []

    def probe(spec: Spec) -> None:
        key = repr(spec)
        if key in failures:
            raise failures[key]  # a replay of a known failure: no need to run the kernel again
        if first_failure and time.perf_counter() - first_failure[0] > SHRINK_SECONDS:
            raise _StopSearch  # the shrink budget is spent: the latest failure is the smallest so far
        if counts[DISCARDED] >= MAX_DISCARDS + 3 * sum(n for k, n in counts.items() if k != DISCARDED):
            raise _StopSearch  # the compile budget is spent on kernels this cell keeps asking for
        observer.example_started(subject, cell, spec)
        try:
            verdict = run_example(subject, spec, backend, determinism=(cell == "determinism"))
        except BudgetExhausted:
            counts[DISCARDED] += 1
            reject()  # not a failure: the example needs a kernel the budget cannot pay for
        if isinstance(verdict, Finding):
            counts["failed"] += 1
            failures[key] = Violation(verdict, spec)
            if not first_failure:
                first_failure.append(time.perf_counter())
            raise failures[key]
        counts[verdict] += 1

    probe._hypothesis_internal_add_digest = f"{subject.name}::{cell}".encode()  # distinct database keys
    test = profile_settings(config)(given(strategy)(probe))
    if seed is not None and not p.derandomize:
        test = hypothesis_seed(seed)(test)
    with counting_compiles(enabled=on_cuda, subject=subject.name, budget=budget) as compiles:
        failure = _search(test, failures)
    n_compiles = compiles.count if compiles is not None else None
    discarded = counts.pop(DISCARDED, 0)
    budget_note = f", {discarded} discarded (compile budget {budget} used)" if discarded else ""
    if isinstance(failure, Violation):
        v = failure
        kind = expectation(contract, v.spec).kind

        def fails(candidate: Spec) -> Finding | None:
            if expectation(contract, candidate).kind != kind or not in_shape_class(cell, candidate, v.spec):
                return None  # stay on the same side of the contract, and in the cell's shape class
            try:
                verdict = run_example(subject, candidate, backend, determinism=(cell == "determinism"))
            except BudgetExhausted:
                return None  # a candidate the budget cannot compile does not count as failing
            return verdict if isinstance(verdict, Finding) else None

        spec, f = v.spec, v.finding
        with counting_compiles(enabled=on_cuda, subject=subject.name, budget=budget) as more:
            if cell not in ("shape:empty", "shape:beyond-range"):
                spec, f = minimize_dims(subject, spec, f, fails)
            details = dict(f.details)
            if kind == "honour":
                sym, details["series"] = error_by_size(subject, spec, backend,
                                                       determinism=(cell == "determinism"))
                details["series_labels"] = {"x": f"{sym} (other dims as in the counterexample)",
                                            "y": "max abs error"}
        if n_compiles is not None and more is not None:
            n_compiles += more.count
        return CellResult(
            outcome=f.outcome, finding=f.kind, message=f.message, details=details,
            counterexample=counterexample(subject, spec), reproducer=reproducer(subject, cell, spec, f, backend),
            examples=sum(counts.values()), rejected_examples=counts[EXAMPLE_REJECTED],
            duration_s=time.perf_counter() - start, compiles=n_compiles, **base,
        )
    if isinstance(failure, Unsatisfiable) and discarded:
        failure = None  # every example needed a kernel past the budget: nothing was wrong, little was run
    if failure is not None:
        return CellResult(outcome="crash", finding="search-error", message=f"hypothesis could not search "
                          f"this cell: {failure}", duration_s=time.perf_counter() - start, **base)
    # "rejected": the cell probed inputs outside the contract and every one was
    # refused cleanly (degenerate draws, such as a transpose of 1x1, are inside it).
    examples = sum(counts.values())
    rejected = counts[EXAMPLE_REJECTED]
    if examples == 0 and discarded:
        return CellResult(outcome="skipped", message=f"the subject's compile budget ({budget}) was used before "
                          f"this cell ran an example; {discarded} discarded", details={"compile_budget_discarded":
                          discarded}, duration_s=time.perf_counter() - start, compiles=n_compiles, **base)
    return CellResult(
        outcome="rejected" if rejected else "honoured",
        message=f"{examples} examples" + (f", {rejected} outside the contract, all rejected cleanly"
                                          if rejected else ", all honoured") + budget_note,
        details={"compile_budget_discarded": discarded} if discarded else {},
        examples=examples, rejected_examples=rejected,
        duration_s=time.perf_counter() - start, compiles=n_compiles, **base,
    )


def _is_fixed_size(cell: str) -> bool:
    return cell in FIXED_SIZE_CELLS or cell.startswith("stochastic:")


def fixed_size_cells(contract, backend: Backend) -> list[str]:
    """The cells of ``contract`` that are not searched on ``backend`` (performance, large-index,
    the stochastic designs): each runs at sizes of its own and needs kernels of its own."""
    from triton_conformance.conformance.cells import cells_for

    return [c for c in cells_for(contract) if _is_fixed_size(c) and (
        backend.name == "cuda" if c == "performance" else
        skip_reason(contract, c, untestable_dtypes=backend.untestable) is None)]


def _run_fixed_size_cell(subject: Subject, cell: str, backend: Backend, budget: int | None,
                         base: dict, seed: int | None) -> CellResult:
    """A cell that is not searched, its compiles counted against the subject's whole budget.

    The searched cells leave one compile per such cell unspent, so each finds
    room for a kernel of its own however greedy the search was.
    """
    if cell != "performance":  # the performance cell says itself why it is skipped
        reason = skip_reason(subject.contract, cell, untestable_dtypes=backend.untestable)
        if reason is not None:
            return CellResult(outcome="skipped", message=reason, **base)
    start = time.perf_counter()
    with counting_compiles(enabled=backend.name == "cuda", subject=subject.name, budget=budget) as compiles:
        try:
            if cell == "performance":  # timed, not searched: see performance_cell.py
                from triton_conformance.conformance.performance_cell import run_performance_cell

                result = run_performance_cell(subject, backend=backend)
            elif cell == LARGE_INDEX_CELL:
                from triton_conformance.conformance.large_index import run_large_index_cell

                result = run_large_index_cell(subject, backend=backend)
            else:  # designed experiments: see conformance/stochastic/
                from triton_conformance.conformance.stochastic import run_stochastic_cell

                result = run_stochastic_cell(subject, cell, backend=backend, seed=seed)
        except BudgetExhausted as exc:
            result = CellResult(outcome="skipped", message=f"the compile budget was used before this cell: {exc}",
                                duration_s=time.perf_counter() - start, **base)
    return replace(result, compiles=compiles.count if compiles is not None else None)


def _search(test: Callable[[], None], failures: dict[str, Violation]) -> Exception | None:
    """Run the hypothesis test: None if it passed, else the Violation or search error.

    - ``failures``: the probe's violations in the order found; the last is the
      answer when the search is stopped early.
    """
    try:
        test()
    except (Violation, HypothesisException) as exc:
        return exc
    except _StopSearch:
        return next(reversed(failures.values()), None)
    return None
