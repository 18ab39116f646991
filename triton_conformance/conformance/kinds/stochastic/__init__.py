"""Contract cells of stochastic subjects: designed statistical experiments against the model.

A stochastic subject gets the ordinary cells (layouts, dtypes, shapes,
memory), where each example's output is checked against its model (every
value allowed, and a rate test), and these six cells:

- ``stochastic:rate``: the event rate matches the model at every tested
  probability (exact binomial test per level);
- ``stochastic:values``: every element is a value the model allows;
- ``stochastic:edges``: p = 0 is ``f`` itself; p = 1 gives all events, or is
  rejected cleanly when the contract excludes it;
- ``stochastic:reproducibility``: the same seed and inputs give the same bits;
- ``stochastic:seeds``: other seeds give other masks, agreeing as independent ones do;
- ``stochastic:independence``: no repeats at any power-of-two or row lag, no
  rate that depends on the position in a block, the row or the input's value,
  and no mask keyed on the value.

The statistics are planned per run (:func:`plan_for`): the run's
false-positive rate ``alpha`` (declared by the model) is split by Bonferroni
over every statistical check the run can make, and each sample is sized so
its check has the stated power against the stated deviation.  Inputs are
positive in three quarters of the elements, so a drop is visible there
whatever ``f`` is (ReLU hides it on the rest).
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.kinds.base import CellContext, CellKind, cells_for
from triton_conformance.conformance.kinds.stochastic.checks import StochasticModelRule
from triton_conformance.conformance.kinds.stochastic.designs import DESIGNS, STATISTICAL_FINDING
from triton_conformance.conformance.kinds.stochastic.experiment import DesignFailure, Experiment
from triton_conformance.conformance.kinds.stochastic.plan import STOCHASTIC_CELLS, Plan, plan_for, stochastic_cells
from triton_conformance.conformance.results import cell_result, failed, reproducer
from triton_conformance.conformance.rules import register_rule
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding
from triton_conformance.model.subject import Subject
from triton_conformance.oracles.statistics import StatResult

__all__ = ["STOCHASTIC_CELLS", "Plan", "plan_for", "stochastic_cells", "stochastic_plan", "run_design",
           "StochasticCells"]


def stochastic_plan(subject: Subject) -> Plan:
    """The statistical plan of a stochastic subject, its checks counted over every cell it has."""
    ordinary = sum(1 for c in cells_for(subject) if not c.startswith("stochastic:"))
    return plan_for(subject.contract, ordinary)


def run_design(subject: Subject, cell: str, *, backend: Any, plan: Plan, seed: int, judge: Any = None
               ) -> tuple[Finding | None, dict[str, Any], int, Counterexample]:
    """Run one ``stochastic:*`` cell's design under ``plan`` with ``seed``: the finding (None: the model held),
    the details (every test), the tests run, and the example as a counterexample shows it."""
    name = cell.partition(":")[2]
    if name not in DESIGNS:
        raise ValueError(f"run_design: cell={cell!r}, expected one of {stochastic_cells(subject.contract)}")
    tests: list[StatResult] = []
    series: list[dict] = []
    experiment = Experiment(subject, backend, seed, judge)
    try:
        DESIGNS[name](experiment, plan, tests, series)
        failure = None
    except DesignFailure as f:
        failure = f
    except Exception as exc:  # noqa: BLE001 - a launcher error inside the contract is a crash
        failure = DesignFailure("exception", f"{type(exc).__name__} on an input inside the contract: {exc}")
    details: dict[str, Any] = {
        "seed": seed, "plan": plan.describe(), "alpha_check": plan.alpha_check, "elements": experiment.elements,
        "tests": [dict(test=t.test, description=t.description, statistic=t.statistic, expected=t.expected,
                       p_value=t.p_value, n=t.n, rejected=t.rejects(plan.alpha_check)) for t in tests],
    }
    if series:
        details["series"] = series
        details["series_labels"] = {"x": "probability" if name == "rate" else "lag (elements)",
                                    "y": "observed - expected"}
    rejected = [t for t in tests if t.rejects(plan.alpha_check)]
    example = Counterexample({"seed": seed, "last_launch": experiment.last})
    if failure is not None:
        outcome = "crash" if failure.kind in ("exception", "unclean-rejection") else "wrong"
        return (Finding(outcome, failure.kind, f"{failure.message} (seed={seed})", {**details, **failure.details}),
                details, len(tests), example)
    if rejected:
        worst = min(rejected, key=lambda t: t.p_value)
        return (Finding("wrong", STATISTICAL_FINDING.get(name, "statistical"),
                        f"{worst.describe()} < alpha {plan.alpha_check:.3g}; {len(rejected)} of {len(tests)} "
                        f"tests rejected the model (seed={seed})", details), details, len(tests), example)
    return None, details, len(tests), example


class StochasticCells(CellKind):
    """Designed statistical experiments against a stochastic subject's model."""

    interpreter_cost = False  # designed sizes: not held to the interpreter's cost allowance
    spec_examples = False  # its example is no spec: nothing for example_tensors to build
    dimension = Dimension("stochastic", "a designed experiment against the declared model", (
        CellClass("rate", "the event rate matches the model at every tested probability"),
        CellClass("values", "every element is a value the model allows"),
        CellClass("edges", "p = 0 gives f itself; p = 1 gives all events, or is refused when excluded"),
        CellClass("reproducibility", "the same seed and inputs give the same bits"),
        CellClass("seeds", "other seeds give other masks, agreeing as independent ones do"),
        CellClass("independence", "no repeats at any block or row lag, no rate keyed on position or value"),
    ))

    def values(self, subject: Subject) -> tuple[str, ...]:
        return tuple(cell.partition(":")[2] for cell in stochastic_cells(subject.contract))

    def judge_options(self, subject: Subject) -> dict[str, Any]:
        # Each example of the ordinary cells tests the rate too, at its Bonferroni share of the run's level.
        return {"example_alpha": stochastic_plan(subject).alpha_check} if subject.contract.model is not None else {}

    def _seed(self, context: CellContext) -> int:
        seed = context.policy.seed_for(context.subject.name, context.cell)
        return 0 if seed is None else seed

    def replay(self, context: CellContext, value: str, example: Any) -> Finding | str:
        found, details, _, _ = run_design(context.subject, context.cell, backend=context.backend,
                                          plan=stochastic_plan(context.subject), seed=int(example),
                                          judge=context.judge)
        for t in details["tests"]:
            print(f"{'REJECT' if t['rejected'] else 'ok    '} {t['description']}: observed {t['statistic']:.6g}, "
                  f"expected {t['expected']:.6g}, n={t['n']}, p-value={t['p_value']:.3g}")
        return "honoured" if found is None else found

    def run(self, context: CellContext, value: str) -> CellResult:
        subject, cell, seed = context.subject, context.cell, self._seed(context)
        found, details, tests, example = run_design(subject, cell, backend=context.backend,
                                                    plan=stochastic_plan(subject), seed=seed, judge=context.judge)
        if found is None:
            smallest = min((t["p_value"] for t in details["tests"]), default=None)
            message = (f"{tests} statistical tests passed at alpha {details['alpha_check']:.3g}" if tests
                       else "all checks passed")
            if smallest is not None:
                message += f" (smallest p-value {smallest:.3g})"
            return cell_result(subject, cell, "honoured", message, details=details, examples=tests)
        return failed(subject, cell, found, counterexample=example, examples=tests,
                      reproducer=reproducer(subject, cell, context.backend, seed, found))


register_rule(StochasticModelRule)
