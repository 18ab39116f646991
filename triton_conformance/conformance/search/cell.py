"""A searched cell from start to result: search each draw, shrink the failure, look for a second, assemble.

:func:`search_cell` is what every searching kind calls with its example runner
and its draws; :func:`assemble` says what the search ran, what it discarded
and why, and what it found, in the one shape every kind's result takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis.errors import Unsatisfiable

from triton_conformance.conformance.expectation import (
    EXAMPLE_ACCEPTED,
    EXAMPLE_REJECTED,
    EXAMPLE_REJECTED_UNEXPLAINED,
    EXAMPLE_UNJUDGED,
)
from triton_conformance.conformance import memory_bound
from triton_conformance.conformance.results import cell_result, failed, reproducer, skipped
from triton_conformance.conformance.search.allowance import gib
from triton_conformance.conformance.discards import CUT, DEVICE_MEMORY, OVER_MEMORY, REASONS
from triton_conformance.conformance.search.interpreter_cost import cut_result
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.conformance.search.engine import Draw, ExampleRunner, SearchOutcome, search
from triton_conformance.conformance.search.shrink import Shrunk, second_search, shrink
from triton_conformance.model.outcomes import CellResult

__all__ = ["search_cell", "assemble", "specializations"]


def search_cell(context: CellContext, runner: ExampleRunner, draws: Sequence[Draw], *, minimize: bool = True,
                plot: bool = True) -> CellResult:
    """Search ``draws`` in turn with ``runner``; the first failure is shrunk (per dim too, with
    ``minimize``; with the error plotted against size, with ``plot``), a second bug is looked for,
    and the cell's result assembled."""
    total = SearchOutcome()
    for draw in draws:
        found = search(context, runner, draw)
        total.add(found)
        if found.error is not None and total.error is None:
            total.error = found.error
        if found.failure is not None:
            total.failure = found.failure
            first = shrink(context, runner, found.failure, draw, minimize=minimize, plot=plot)
            more, second = second_search(context, runner, draw, first, minimize=minimize)
            return assemble(context, runner, total, first, second, more)
    return assemble(context, runner, total, None)


def specializations(share: Any, *, examples: int, reused: int, steered: int) -> dict[str, int]:
    """A cell's ``details["specializations"]`` on CUDA: examples run, classes its share bought, examples that
    compiled nothing new, examples moved into a compiled class, and compiles past the subject's budget
    (a cell's one class, where it could run nothing otherwise)."""
    return {"examples": examples, "classes_compiled": share.classes, "examples_reused": reused,
            "examples_steered": steered, "compiled_past_budget": share.past_budget}


def assemble(context: CellContext, runner: ExampleRunner, outcome: SearchOutcome, first: Shrunk | None,
             second: Shrunk | None = None, second_examples: int = 0) -> CellResult:
    """The cell's result from its search, its shrunk failure (if any) and a second bug (if any)."""
    result = _assembled(context, runner, outcome, first, second, second_examples)
    share = context.allowance.compiles
    if share is None:
        return result
    # On CUDA: what the cell's share of the compile budget bought, and how far the search reused it.
    return replace(result, details={**result.details, "specializations": specializations(
        share, examples=outcome.examples, reused=outcome.reused, steered=outcome.steered)})


def _discard_words(context: CellContext) -> list[str]:
    allowance = context.allowance
    words = []
    for name, n in allowance.discards.items():
        if not n:
            continue
        if name == OVER_MEMORY:
            words.append(f"{n} discarded {REASONS[name].says} ({gib(allowance.memory_cap)})")
        elif name == "compile-budget":
            words.append(f"{n} discarded {REASONS[name].says} ({allowance.compile_budget})")
        elif name == CUT and allowance.meter is not None:
            words.append(f"{n} discarded {REASONS[name].says} (the first {allowance.meter.first_cut})")
        elif name == DEVICE_MEMORY and memory_bound.current() is not None:
            words.append(f"{n} discarded {REASONS[name].says} (inside the worker's memory bound: "
                         f"{memory_bound.current().describe()})")
        else:
            words.append(f"{n} discarded {REASONS[name].says}")
    return words


def _assembled(context: CellContext, runner: ExampleRunner, outcome: SearchOutcome, first: Shrunk | None,
               second: Shrunk | None, second_examples: int) -> CellResult:
    subject, cell, allowance = context.subject, context.cell, context.allowance
    counts, examples = outcome.counts, outcome.examples
    rejected = counts[EXAMPLE_REJECTED]
    budget_details = allowance.details()
    if first is not None:
        details, message = dict(first.details), first.finding.message
        if second is not None:
            details["second_finding"] = {
                "outcome": second.finding.outcome, "kind": second.finding.kind, "message": second.finding.message,
                "details": second.details, "counterexample": runner.counterexample(second.spec).to_dict(),
                "reproducer": reproducer(subject, cell, context.backend, second.spec, second.finding)}
            message += (f" | and a second bug, outside this one's class ({second.finding.outcome}/"
                        f"{second.finding.kind} at {second.spec.dims}): {second.finding.message}")
        return failed(subject, cell, first.finding, message=message, details={**details, **budget_details},
                      counterexample=runner.counterexample(first.spec),
                      reproducer=reproducer(subject, cell, context.backend, first.spec, first.finding),
                      examples=examples + second_examples, rejected_examples=rejected)
    discards = {n: k for n, k in allowance.discards.items() if k}
    error = outcome.error
    if isinstance(error, Unsatisfiable) and (discards or outcome.not_run):
        error = None  # every draw was discarded or not run: nothing was wrong, and the result says why
    if error is not None:
        return cell_result(subject, cell, "crash", f"hypothesis could not search this cell: {error}",
                           finding="search-error")
    if examples == 0 and discards.get(CUT) and allowance.meter is not None:
        return cut_result(subject, cell, allowance.meter, budget_details)  # a hang is never a silent skip
    if examples == 0 and discards:
        if set(discards) == {OVER_MEMORY}:
            reason = (f"every draw would need more than the per-example memory cap ({gib(allowance.memory_cap)}); "
                      f"{discards[OVER_MEMORY]} discarded unrun")
        else:
            reason = "every draw was discarded before this cell ran an example: " + ", ".join(_discard_words(context))
        return skipped(subject, cell, reason, details=budget_details,
                       code="discard:" + ("+".join(sorted(discards))))
    if examples == 0 and outcome.not_run:
        return skipped(subject, cell, "no example inside the contract could run: " + ", ".join(
            f"{n} draws {why}" for why, n in outcome.not_run.items()), details={"not_run": dict(outcome.not_run)},
            code="search:none-could-run")
    # Inputs outside the contract were drawn: each was refused, or computed right.
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
    parts += _discard_words(context)
    details = dict(budget_details)
    asked = outcome.asked
    if examples < asked and not discards:
        # Fewer examples than asked for, and no budget stopped it: Hypothesis ran out of distinct draws.
        why = ", ".join(f"{n} draws {reason} not run" for reason, n in outcome.not_run.items())
        parts.append(f"Hypothesis ended the search after {examples} of {asked} examples" + (f" ({why})" if why else ""))
    if outcome.not_run:
        details["not_run"] = dict(outcome.not_run)
    name = "accepted" if accepted else "rejected" if refused else "honoured"
    return cell_result(subject, cell, name, ", ".join(parts), details=details, examples=examples,
                       rejected_examples=refused)
