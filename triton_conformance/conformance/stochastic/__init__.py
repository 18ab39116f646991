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

import time
from typing import Any

from triton_conformance.conformance.stochastic.designs import DESIGNS, STATISTICAL_FINDING
from triton_conformance.conformance.stochastic.experiment import (
    DesignFailure,
    Experiment,
    at,
    bernoulli_test,
    probabilities,
)
from triton_conformance.conformance.stochastic.plan import (
    STOCHASTIC_CELLS,
    Plan,
    example_alpha,
    plan_for,
    stochastic_cells,
)
from triton_conformance.oracles.statistics import StatResult

__all__ = ["STOCHASTIC_CELLS", "Plan", "plan_for", "stochastic_cells", "run_stochastic_cell", "replay_stochastic",
           "check_stochastic_output", "example_alpha"]


def run_stochastic_cell(subject, cell: str, *, backend=None, seed: int | None = None):
    """Run one ``stochastic:*`` cell and return its CellResult."""
    from triton_conformance.conformance.backend import Backend
    from triton_conformance.model.outcomes import CellResult, Counterexample

    backend = backend or Backend()
    name = cell.partition(":")[2]
    base = dict(subject=subject.name, family=subject.family, cell=cell, expected_failure=subject.xfail)
    if name not in DESIGNS:
        raise ValueError(f"run_stochastic_cell: cell={cell!r}, expected one of {stochastic_cells(subject.contract)}")
    seed = 0 if seed is None else int(seed)
    plan = plan_for(subject.contract)
    tests: list[StatResult] = []
    series: list[dict] = []
    start = time.perf_counter()
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
    repro = (f"from triton_conformance.conformance.stochastic import replay_stochastic\n"
             f"replay_stochastic({subject.module!r}, {subject.name!r}, {cell!r}, seed={seed}, "
             f"device={'cpu' if backend.name == 'interpreter' else 'cuda'!r})\n")
    if backend.name == "interpreter":
        repro = 'import os\nos.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported\n' + repro
    elapsed = time.perf_counter() - start
    counterexample = Counterexample({"seed": seed, "last_launch": experiment.last})
    if failure is not None:
        outcome = "crash" if failure.kind in ("exception", "unclean-rejection") else "wrong"
        details.update(failure.details)
        return CellResult(outcome=outcome, finding=failure.kind, message=f"{failure.message} (seed={seed})",
                          details=details, counterexample=counterexample, reproducer=repro, examples=len(tests),
                          duration_s=elapsed, **base)
    if rejected:
        worst = min(rejected, key=lambda t: t.p_value)
        message = (f"{worst.describe()} < alpha {plan.alpha_check:.3g}; {len(rejected)} of {len(tests)} tests "
                   f"rejected the model (seed={seed})")
        return CellResult(outcome="wrong", finding=STATISTICAL_FINDING.get(name, "statistical"), message=message,
                          details=details, counterexample=counterexample, reproducer=repro, examples=len(tests),
                          duration_s=elapsed, **base)
    smallest = min((t.p_value for t in tests), default=None)
    message = f"{len(tests)} statistical tests passed at alpha {plan.alpha_check:.3g}" if tests else "all checks passed"
    if smallest is not None:
        message += f" (smallest p-value {smallest:.3g})"
    return CellResult(outcome="honoured", message=message, details=details, examples=len(tests),
                      duration_s=elapsed, **base)


def replay_stochastic(module: str, name: str, cell: str, *, seed: int, device: str = "cpu"):
    """Re-run a stochastic cell with the seed of a failure; raise AssertionError if it fails again."""
    import importlib

    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.model.subject import get_subject

    importlib.import_module(module)
    result = run_stochastic_cell(get_subject(name), cell, seed=seed,
                                 backend=current_backend("cuda" if device.startswith("cuda") else "interpreter"))
    for t in result.details.get("tests", []):
        print(f"{'REJECT' if t['rejected'] else 'ok    '} {t['description']}: observed {t['statistic']:.6g}, "
              f"expected {t['expected']:.6g}, n={t['n']}, p-value={t['p_value']:.3g}")
    print(f"{name}[{cell}]: {result.outcome} {result.message}")
    if not result.passed:
        raise AssertionError(f"{name}: {result.outcome} ({result.finding}): {result.message}")
    return result


# %% Ordinary cells: each example's output against the model ------------------


def check_stochastic_output(subject, out, ref, scalars: dict, bound):
    """A Finding if ``out`` breaks the model on one example of an ordinary cell, else None."""
    from triton_conformance.model.outcomes import Finding

    model = subject.contract.model
    events = model.classify(out.detach().cpu(), ref.detach().cpu(), scalars, bound)
    bad = events.invalid
    if bool(bad.any()):
        import torch

        first = tuple(int(i) for i in torch.nonzero(bad)[0]) if bad.dim() else ()
        return Finding("wrong", "invalid-value", f"{int(bad.sum())} of {bad.numel()} elements are values the model "
                       f"does not allow ({events.allowed}); first at {first}: got {float(out.detach().cpu()[first])!r}",
                       {"first_index": first, "invalid": int(bad.sum())})
    k, n = events.counts()
    if n:
        alpha = example_alpha(subject.contract)
        test = bernoulli_test(k, n, at(probabilities(events), events.observable), "event rate in this example")
        if test.rejects(alpha):
            return Finding("wrong", "rate-mismatch", f"{test.describe()} < alpha {alpha:.3g}",
                           {"p_value": test.p_value, "statistic": test.statistic, "expected": test.expected, "n": n})
    return None
