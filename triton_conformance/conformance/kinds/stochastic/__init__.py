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

from triton_conformance.conformance.results import cell_result, failed, reproducer_script
from triton_conformance.conformance.kinds.stochastic.designs import DESIGNS, STATISTICAL_FINDING
from triton_conformance.conformance.kinds.stochastic.experiment import DesignFailure, Experiment
from triton_conformance.conformance.kinds.stochastic.plan import STOCHASTIC_CELLS, Plan, plan_for, stochastic_cells
from triton_conformance.model.outcomes import Counterexample, Finding
from triton_conformance.oracles.statistics import StatResult

__all__ = ["STOCHASTIC_CELLS", "Plan", "plan_for", "stochastic_cells", "run_stochastic_cell"]


def run_stochastic_cell(subject, cell: str, *, backend, plan: Plan, seed: int | None = None):
    """Run one ``stochastic:*`` cell under ``plan`` and return its CellResult."""
    name = cell.partition(":")[2]
    if name not in DESIGNS:
        raise ValueError(f"run_stochastic_cell: cell={cell!r}, expected one of {stochastic_cells(subject.contract)}")
    seed = 0 if seed is None else int(seed)
    tests: list[StatResult] = []
    series: list[dict] = []
    experiment = Experiment(subject, backend, seed)
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
    counterexample = Counterexample({"seed": seed, "last_launch": experiment.last})
    body = (f"from triton_conformance.conformance.replay import replay_stochastic\n"
            f"replay_stochastic({subject.module!r}, {subject.name!r}, {cell!r}, seed={seed}, "
            f"device={backend.device!r})\n")
    if failure is not None:
        outcome = "crash" if failure.kind in ("exception", "unclean-rejection") else "wrong"
        finding = Finding(outcome, failure.kind, f"{failure.message} (seed={seed})", {**details, **failure.details})
    elif rejected:
        worst = min(rejected, key=lambda t: t.p_value)
        finding = Finding("wrong", STATISTICAL_FINDING.get(name, "statistical"),
                          f"{worst.describe()} < alpha {plan.alpha_check:.3g}; {len(rejected)} of {len(tests)} "
                          f"tests rejected the model (seed={seed})", details)
    else:
        smallest = min((t.p_value for t in tests), default=None)
        message = (f"{len(tests)} statistical tests passed at alpha {plan.alpha_check:.3g}" if tests
                   else "all checks passed")
        if smallest is not None:
            message += f" (smallest p-value {smallest:.3g})"
        return cell_result(subject, cell, "honoured", message, details=details, examples=len(tests))
    return failed(subject, cell, finding, counterexample=counterexample, examples=len(tests),
                  reproducer=reproducer_script(subject, cell, finding, backend, body))
