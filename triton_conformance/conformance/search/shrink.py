"""After a search fails: the smallest failing spec, the error against size, and a search for a second bug.

Hypothesis shrinks first, within the search (:mod:`.engine`).  Then:

- :func:`minimize_dims` finishes with a binary search per dim, so a bug that
  starts at 1025 is reported at 1025, not at the block boundary 2049 Hypothesis
  drew from a list;
- for a wrong answer, :func:`error_by_size` plots the error against the size
  of the largest dim, so a bug that starts somewhere shows as a step there;
- :func:`second_search` searches once more, with half the budgets, leaving the
  first finding's bug (and its degenerate size) out: a cheap failure, such as a
  crash on an empty input, must not hide another bug at ordinary sizes.

Every candidate runs through the cell's example runner and allowance: a
candidate a budget refuses, or one that leaves the cell's class or crosses the
contract's edge, does not count as failing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.discards import ExampleDiscarded
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.conformance.search.engine import Draw, ExampleRunner, FindingClass, Violation, run_one, search
from triton_conformance.model.relations import broken_relations, derived_dims, relate
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.spec import Spec

__all__ = ["Shrunk", "minimize_dims", "shrink", "error_by_size", "second_search", "SHRINK_DIMS_BUDGET"]

SHRINK_DIMS_BUDGET = 60  # kernel runs the per-dim binary search may spend


@dataclass(frozen=True)
class Shrunk:
    """A failure as reported: its smallest spec, its finding, and the details to show (the error plot)."""

    spec: Spec
    finding: Finding
    details: dict


def minimize_dims(subject: Any, spec: Spec, finding: Finding, fails: Callable[[Spec], Finding | None],
                  *, budget: int = SHRINK_DIMS_BUDGET) -> tuple[Spec, Finding]:
    """Shrink each dim of a failing spec as far as it still fails (``fails(candidate)``: its finding, or None)."""
    attempts = 0
    changed = True
    relations = subject.contract.relations
    # Related dims shrink through their sources, the derived ones rebuilt: unless the failure breaks a
    # relation on purpose (out of range), when every dim moves alone.
    related = relations if not broken_relations(relations, spec.dims) else ()
    while changed and attempts < budget:
        changed = False
        for sym in sorted(spec.dims, key=lambda s: -spec.dims[s]):
            if sym in derived_dims(related):
                continue
            lo, hi = subject.contract.dims[sym].min, spec.dims[sym] - 1  # search [lo, hi] for a failure
            while lo <= hi and attempts < budget:
                mid = lo if lo == hi else (lo + hi) // 2
                candidate = replace(spec, dims=relate(related, {**spec.dims, sym: mid}))
                attempts += 1
                found = fails(candidate)
                if found is not None:
                    spec, finding, changed = candidate, found, True
                    hi = mid - 1
                else:
                    lo = mid + 1
    return spec, finding


def _verdict(context: CellContext, runner: ExampleRunner, spec: Spec) -> Finding | str | None:
    """``runner``'s verdict on ``spec`` as one of the cell's examples (the search's one step), or None if the
    allowance refuses it."""
    try:
        return run_one(context, runner, spec)
    except ExampleDiscarded:
        return None  # a candidate the budgets cannot pay for does not count as failing


def error_by_size(context: CellContext, runner: ExampleRunner, spec: Spec, *, points: int = 8) -> tuple[str, list[dict]]:
    """Max abs error against the size of the counterexample's largest dim, for a plot.

    Sizes run from the contract's minimum to twice the failing size.  A non-numeric failure plots as NaN;
    a size the allowance refuses is left out (the plot loses a point, not the machine its memory).
    """
    contract = context.subject.contract
    related = contract.relations if not broken_relations(contract.relations, spec.dims) else ()
    sym = max((s for s in spec.dims if s not in derived_dims(related)), key=lambda s: spec.dims[s])  # a source
    d = contract.dims[sym]
    top = min(d.max, max(2 * spec.dims[sym], d.min + 1))
    sizes = sorted({d.min, spec.dims[sym] - 1, spec.dims[sym], top} |
                   {int(d.min + (top - d.min) * i / (points - 1)) for i in range(points)})
    series = []
    for n in (n for n in sizes if d.min <= n <= d.max):
        verdict = _verdict(context, runner, replace(spec, dims=relate(related, {**spec.dims, sym: n})))
        if verdict is None:
            continue
        if isinstance(verdict, Finding):
            err = verdict.details.get("max_abs_err")
            series.append({"x": n, "y": float(err) if err is not None else float("nan"), "outcome": verdict.outcome})
        else:
            series.append({"x": n, "y": 0.0, "outcome": verdict})
    return sym, series


def shrink(context: CellContext, runner: ExampleRunner, violation: Violation, draw: Draw, *, minimize: bool,
           plot: bool = True, excluding: FindingClass | None = None) -> Shrunk:
    """The smallest spec that fails like ``violation`` does, with its finding (and the error plot).

    Candidates must stay on the same side of the contract and in the cell's class
    (``draw.keeps_class``), and, with ``excluding``, must not be the first finding's bug again.
    """
    contract = context.subject.contract
    side = expectation(contract, violation.spec).kind

    def fails(candidate: Spec) -> Finding | None:
        if expectation(contract, candidate).kind != side or not draw.keeps(candidate, violation.spec):
            return None
        if excluding is not None and excluding.excludes(candidate):
            return None
        verdict = _verdict(context, runner, candidate)
        if not isinstance(verdict, Finding):
            return None
        if excluding is not None and excluding.same_bug(verdict, candidate):
            return None  # shrank back into the first finding's bug
        return verdict

    spec, finding = violation.spec, violation.finding
    if minimize:
        spec, finding = minimize_dims(context.subject, spec, finding, fails)
    details = dict(finding.details)
    if plot and side == "honour" and excluding is None:
        sym, details["series"] = error_by_size(context, runner, spec)
        details["series_labels"] = {"x": f"{sym} (other dims as in the counterexample)", "y": "max abs error"}
    return Shrunk(spec, finding, details)


def second_search(context: CellContext, runner: ExampleRunner, draw: Draw, first: Shrunk, *, minimize: bool
                  ) -> tuple[int, Shrunk | None]:
    """Search ``draw`` once more, leaving the first finding's bug out, with half the budgets: the examples
    it ran, and the second bug it found, shrunk (or None).  Only a cell that failed runs it."""
    excluded = FindingClass.of(first.finding, first.spec)
    policy = context.policy
    found = search(context, runner, draw, excluding=excluded,
                   max_examples=max(2, (draw.max_examples or policy.examples) // 2),
                   shrink_calls=max(1, policy.shrink_calls // 2))
    if found.failure is None:
        return found.examples, None
    return found.examples, shrink(context, runner, found.failure, draw, minimize=minimize, excluding=excluded)
