"""The statistical plan of a stochastic subject: which cells, how many checks, at what level, how large a sample."""

from __future__ import annotations

from dataclasses import dataclass, field

from triton_conformance.model.contract import Contract
from triton_conformance.oracles.planning import agreement_expected, binomial_sample_size, bonferroni

__all__ = ["STOCHASTIC_CELLS", "Plan", "plan_for", "stochastic_cells", "levels", "middle_level", "admits"]

STOCHASTIC_CELLS = ("rate", "values", "edges", "reproducibility", "seeds", "independence")

POWER = 0.99
RATE_DEVIATION = 0.01  # a drop rate off by this much, at any tested p
AGREEMENT_DEVIATION = 0.02  # masks agreeing this much more (or less) often than independent ones
FLAT_LAGS = tuple(1 << k for k in range(14))  # 1 .. 8192: a mask repeating every block of up to 8192
ROW_LAGS = tuple(range(1, 65))  # a mask repeating every k rows, k <= 64
POSITION_PERIOD = 1024  # rate by position modulo 1024 covers every power-of-two block up to 1024
VALUE_BINS = 16
ROW_WIDTH = 1000  # not a power of two, so rows and blocks do not line up
POSITIVE_FRACTION = 0.75
VALUES_LEVELS = (0.1, 0.5, 0.9)
VALUES_ELEMENTS = 20_000
# At least the examples-per-cell of any profile: per-example rate tests are
# counted as if every ordinary cell ran this many, so the split is safe for all.
MAX_EXAMPLES_PER_CELL = 150
_CHECKS_PER_CELL = {"seeds": 3, "independence": len(FLAT_LAGS) + len(ROW_LAGS) + 5}


def stochastic_cells(contract: Contract) -> list[str]:
    """The stochastic cells of ``contract``; ``edges`` needs a probability argument to set to 0 and 1."""
    if contract.model is None:
        return []
    return [f"stochastic:{c}" for c in STOCHASTIC_CELLS if c != "edges" or contract.model.probability_name]


@dataclass(frozen=True)
class Plan:
    """A run's statistical plan for one subject."""

    alpha_run: float
    checks: int
    alpha_check: float
    power: float
    rate_trials: dict[float, int] = field(default_factory=dict)  # level -> observable elements
    agreement_pairs: int = 0

    def describe(self) -> str:
        return (f"alpha={self.alpha_run:g} per run over {self.checks} checks (Bonferroni: {self.alpha_check:.3g} "
                f"each); power {self.power:g} against a rate off by {RATE_DEVIATION} or an agreement off by "
                f"{AGREEMENT_DEVIATION}")


def levels(contract: Contract) -> tuple[float | None, ...]:
    """The tested values of the model's probability argument; (None,) when its probabilities come from the data."""
    model = contract.model
    name = model.probability_name
    if name is None:
        return (None,)
    s = contract.scalars[name]
    return tuple(q for q in model.probabilities[name] if s.low <= q <= s.high)


def middle_level(contract: Contract) -> float | None:
    """The level where agreement tests have the most power: 0.5 if admitted."""
    return 0.5 if admits(contract, 0.5) else levels(contract)[-1]


def admits(contract: Contract, q: float | None) -> bool:
    name = contract.model.probability_name
    if name is None:
        return q is None
    s = contract.scalars[name]
    return q is not None and s.low <= q <= s.high


_PLANS: dict[int, tuple[Contract, Plan]] = {}


def plan_for(contract: Contract, ordinary_cells: int) -> Plan:
    """The per-check level and sample sizes for ``contract``'s stochastic checks.

    Counted checks: one rate test per tested level, the seed and independence
    tests, and one rate test per example of each of the ``ordinary_cells``.
    """
    cached = _PLANS.get(id(contract))
    if cached is not None and cached[0] is contract and cached[1] == ordinary_cells:
        return cached[2]
    plan = _plan(contract, ordinary_cells)
    _PLANS[id(contract)] = (contract, ordinary_cells, plan)
    return plan


_PLANS: dict[int, tuple[Contract, int, Plan]] = {}


def _plan(contract: Contract, ordinary_cells: int) -> Plan:
    model = contract.model
    tested = levels(contract)
    checks = len(tested) + sum(_CHECKS_PER_CELL.values()) + ordinary_cells * MAX_EXAMPLES_PER_CELL
    alpha = bonferroni(model.alpha, checks)
    trials = {}
    for q in tested:  # data-driven probabilities: size for the largest variance, p = 0.5
        level = 0.5 if q is None else q
        delta = min(RATE_DEVIATION, max(level, 1 - level))
        trials[q] = binomial_sample_size(level, delta, alpha, POWER)
    pairs = binomial_sample_size(agreement_expected(0.5), AGREEMENT_DEVIATION, alpha, POWER)
    return Plan(model.alpha, checks, alpha, POWER, trials, pairs)
