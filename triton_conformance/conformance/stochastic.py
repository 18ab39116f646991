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

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from triton_conformance.conformance.contract import Contract
from triton_conformance.oracles.statistics import (
    StatResult,
    agreement_expected,
    binomial_sample_size,
    binomial_test,
    bonferroni,
    count_normal_test,
    grouped_counts_test,
)

__all__ = ["STOCHASTIC_CELLS", "Plan", "plan_for", "stochastic_cells", "run_stochastic_cell", "replay_stochastic",
           "check_stochastic_output", "example_alpha"]

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
# The largest examples-per-cell of any profile: per-example rate tests are
# counted as if every ordinary cell ran this many, so the split is safe for all.
MAX_EXAMPLES_PER_CELL = 150
_CHECKS_PER_CELL = {"seeds": 3, "independence": len(FLAT_LAGS) + len(ROW_LAGS) + 5}


def stochastic_cells(contract: Contract) -> list[str]:
    """The stochastic cells of ``contract``; ``edges`` needs a probability argument to set to 0 and 1."""
    if contract.model is None:
        return []
    return [f"stochastic:{c}" for c in STOCHASTIC_CELLS if c != "edges" or contract.model.probability_name]


# %% The plan: how many checks, at what level, with how many samples --------


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


def _levels(contract: Contract) -> tuple[float | None, ...]:
    """The tested values of the model's probability argument; (None,) when its probabilities come from the data."""
    model = contract.model
    name = model.probability_name
    if name is None:
        return (None,)
    s = contract.scalars[name]
    return tuple(q for q in model.probabilities[name] if s.low <= q <= s.high)


def _middle_level(contract: Contract) -> float | None:
    """The level where agreement tests have the most power: 0.5 if admitted."""
    return 0.5 if _admits(contract, 0.5) else _levels(contract)[-1]


_PLANS: dict[int, tuple[Contract, Plan]] = {}


def plan_for(contract: Contract) -> Plan:
    """The per-check level and sample sizes for ``contract``'s stochastic checks.

    Counted checks: one rate test per tested level, the seed and independence
    tests, and one rate test per example of every ordinary cell.
    """
    cached = _PLANS.get(id(contract))
    if cached is not None and cached[0] is contract:
        return cached[1]
    plan = _plan(contract)
    _PLANS[id(contract)] = (contract, plan)
    return plan


def _plan(contract: Contract) -> Plan:
    from triton_conformance.conformance.cells import cells_for

    model = contract.model
    levels = _levels(contract)
    ordinary_cells = sum(1 for c in cells_for(contract) if not c.startswith("stochastic:"))
    checks = len(levels) + sum(_CHECKS_PER_CELL.values()) + ordinary_cells * MAX_EXAMPLES_PER_CELL
    alpha = bonferroni(model.alpha, checks)
    trials = {}
    for q in levels:  # data-driven probabilities: size for the largest variance, p = 0.5
        level = 0.5 if q is None else q
        delta = min(RATE_DEVIATION, max(level, 1 - level))
        trials[q] = binomial_sample_size(level, delta, alpha, POWER)
    pairs = binomial_sample_size(agreement_expected(0.5), AGREEMENT_DEVIATION, alpha, POWER)
    return Plan(model.alpha, checks, alpha, POWER, trials, pairs)


def example_alpha(contract: Contract) -> float:
    return plan_for(contract).alpha_check


# %% Running the subject on designed inputs ----------------------------------


@dataclass
class _Draw:
    inputs: dict[str, Any]
    out: Any
    events: Any  # model.Events
    params: dict[str, float]


class _Experiment:
    """Launches one subject on designed inputs and classifies what comes back."""

    def __init__(self, subject, backend, seed: int):
        import torch

        from triton_conformance.strategies._internal.tensors import torch_dtype

        self.subject, self.contract, self.model = subject, subject.contract, subject.contract.model
        self.backend = backend
        self.last: dict[str, Any] | None = None  # the latest launch, for the counterexample
        self.elements = 0  # elements launched, for the cost figures
        self.generator = torch.Generator().manual_seed(seed)
        claimed = self.contract.float_dtypes()
        testable = [d for d in claimed if d not in backend.untestable]
        self.dtype = torch_dtype("float32" if "float32" in testable else (testable or claimed)[0])

    def fresh_seed(self) -> int:
        s = self.contract.scalars[self.model.seed]
        import torch

        return int(torch.randint(int(s.low), int(s.high) + 1, (1,), generator=self.generator))

    def dims(self, elements: int) -> dict[str, int]:
        """Dims giving about ``elements`` elements in rows of ROW_WIDTH, within the contract's ranges."""
        c = self.contract
        dims = {s: max(d.min, min(1, d.max)) for s, d in c.dims.items()}
        shape = c.inputs[c.tensor_names[0]].shape
        last, first = shape[-1], shape[0]
        dims[last] = max(c.dims[last].min, min(c.dims[last].max, ROW_WIDTH if len(shape) > 1 else elements))
        if first != last:
            rest = math.prod(v for s, v in dims.items() if s != first)
            dims[first] = max(c.dims[first].min, min(c.dims[first].max, math.ceil(elements / max(rest, 1))))
        return dims

    def values(self, shape, *, positive: float = POSITIVE_FRACTION, duplicated: bool = False):
        """Magnitudes in [0.5, 2), positive with probability ``positive``; ``duplicated``: each value twice."""
        import torch

        n = math.prod(shape)
        half = (n + 1) // 2 if duplicated else n
        mags = 0.5 + 1.5 * torch.rand(half, generator=self.generator, dtype=torch.float64)
        signs = torch.where(torch.rand(half, generator=self.generator) < positive, 1.0, -1.0).to(torch.float64)
        v = (mags * signs).to(self.dtype)  # round first, so duplicates stay equal in the input dtype
        if duplicated:
            v = torch.cat([v, v])[:n][torch.randperm(n, generator=self.generator)]
        return v.reshape(shape)

    def negatives_observable(self) -> bool:
        """Whether ``f`` of negative inputs is nonzero, so events there can be seen (not for ReLU)."""
        import torch

        c = self.contract
        probe = {n: -torch.linspace(0.5, 2.0, 16, dtype=torch.float64).reshape(*([1] * (len(c.inputs[n].shape) - 1)),
                                                                                 16)
                 for n in c.tensor_names}
        ref = c.oracle(**probe, **self.params(0.5, 0))
        ref = ref[0] if isinstance(ref, (tuple, list)) else ref
        return bool((ref != 0).all())

    def params(self, probability: float, seed: int) -> dict[str, float]:
        params = {}
        for name, s in self.contract.scalars.items():
            params[name] = int(s.low) if s.kind == "int" else (s.low + s.high) / 2
        if self.model.probability_name is not None:
            params[self.model.probability_name] = probability
        params[self.model.seed] = seed
        if self.model.offset:
            params[self.model.offset] = 0
        return params

    def inputs(self, dims, **value_kw) -> dict[str, Any]:
        c = self.contract
        return {n: self.values(tuple(dims[s] for s in c.inputs[n].shape), **value_kw).to(self.backend.device)
                for n in c.tensor_names}

    def launch(self, inputs, params) -> _Draw:
        import torch

        from triton_conformance.oracles.tolerance import default_bound

        self.last = {"shapes": {n: list(t.shape) for n, t in inputs.items()}, "params": dict(params),
                     "dtype": str(self.dtype).replace("torch.", "")}
        self.elements += sum(t.numel() for t in inputs.values())
        out = self.subject.launcher(**inputs, **params)
        out = out[0] if isinstance(out, (tuple, list)) else out
        if self.backend.device != "cpu":
            torch.cuda.synchronize()
        as64 = {n: t.detach().cpu().to(torch.float64) for n, t in inputs.items()}
        ref = self.contract.oracle(**as64, **params)
        ref = (ref[0] if isinstance(ref, (tuple, list)) else ref).to(torch.float64)
        out = out.detach().cpu()
        if tuple(out.shape) != tuple(ref.shape):
            raise _Failure("bad-shape", f"output shape {tuple(out.shape)}, oracle's {tuple(ref.shape)}")
        finite = ref[torch.isfinite(ref)].abs()
        scale = self.model.value_scale(float(finite.max()), params) if finite.numel() else 1.0
        bound = default_bound(out_dtype=str(out.dtype).replace("torch.", ""),
                              accumulate=self.contract.accumulate, scale=scale)
        return _Draw(inputs, out, self.model.classify(out, ref, params, bound), params)

    def collect(self, probability: float, trials: int, **value_kw) -> tuple[int, int, list[_Draw]]:
        """Launch with fresh seeds until ``trials`` observable elements: (events, trials, draws)."""
        events = seen = 0
        draws = []
        while seen < trials:
            need = math.ceil((trials - seen) / value_kw.get("positive", POSITIVE_FRACTION) * 1.02) + 64
            draw = self.launch(self.inputs(self.dims(need), **value_kw), self.params(probability, self.fresh_seed()))
            _require_valid(draw)
            k, n = draw.events.counts()
            if n == 0:
                raise _Failure("invalid-value", "no element's event was observable; the model cannot be tested")
            events, seen = events + k, seen + n
            draws.append(draw)
        return events, seen, draws


class _Failure(Exception):
    def __init__(self, kind: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.kind, self.message, self.details = kind, message, details or {}


def _require_valid(draw: _Draw) -> None:
    bad = draw.events.invalid
    if bool(bad.any()):
        import torch

        first = tuple(int(i) for i in torch.nonzero(bad)[0])
        x = {n: float(t.detach().cpu()[first]) for n, t in draw.inputs.items() if tuple(t.shape) == tuple(bad.shape)}
        raise _Failure("invalid-value", f"{int(bad.sum())} of {bad.numel()} elements are values the model does not "
                       f"allow ({draw.events.allowed}); first at {first}: got {float(draw.out[first])!r} for inputs "
                       f"{x} with {draw.params}", {"first_index": first, "invalid": int(bad.sum())})


# %% The six cells -------------------------------------------------------------


def _probabilities(events):
    """P(event) of every element, as a float64 tensor shaped like the output."""
    import torch

    p = events.probability
    if isinstance(p, torch.Tensor):
        return p.to(torch.float64).expand(events.event.shape)
    return torch.full(events.event.shape, float(p), dtype=torch.float64)


def _bernoulli_test(k: int, probs, description: str) -> StatResult:
    """Exact binomial when every trial has one probability, else the Poisson-binomial normal approximation."""
    n = probs.numel()
    if n and float(probs.max() - probs.min()) < 1e-12:
        return binomial_test(k, n, float(probs.reshape(-1)[0]), description)
    return count_normal_test(k, n, float(probs.sum()), float((probs * (1 - probs)).sum()), description)


def _rate(exp: _Experiment, plan: Plan, tests: list[StatResult], series: list[dict]) -> None:
    import torch

    for q in _levels(exp.contract):
        k, n, draws = exp.collect(q, plan.rate_trials[q], positive=1.0)
        probs = torch.cat([_probabilities(d.events)[d.events.observable] for d in draws])
        what = "event rate" if q is None else f"event rate at {exp.model.probability_name}={q:g}"
        tests.append(_bernoulli_test(k, probs, what))
        x = 0.5 if q is None else q
        series.append({"x": x, "y": k / n - float(probs.mean()),
                       "outcome": "wrong" if tests[-1].rejects(plan.alpha_check) else "ok"})


def _values(exp: _Experiment, plan: Plan, tests: list, series: list) -> None:
    levels = [q for q in VALUES_LEVELS if _admits(exp.contract, q)] if exp.model.probability_name else [None]
    for q in levels:
        draw = exp.launch(exp.inputs(exp.dims(VALUES_ELEMENTS)), exp.params(q, exp.fresh_seed()))
        _require_valid(draw)


def _admits(contract: Contract, q: float | None) -> bool:
    name = contract.model.probability_name
    if name is None:
        return q is None
    s = contract.scalars[name]
    return q is not None and s.low <= q <= s.high


def _edges(exp: _Experiment, plan: Plan, tests: list, series: list) -> None:
    from triton_conformance.conformance.checks import _clean_rejection

    name = exp.model.probability_name
    dims = exp.dims(4096)
    for q in (0.0, 1.0):
        params = exp.params(q, exp.fresh_seed())
        inputs = exp.inputs(dims)
        if not _admits(exp.contract, q):
            try:
                exp.subject.launcher(**inputs, **params)
            except Exception as exc:  # noqa: BLE001 - any exception is judged
                if not _clean_rejection(exc):
                    raise _Failure("unclean-rejection", f"{name}={q:g} is outside the contract and raised "
                                   f"{type(exc).__name__}: {exc}, expected a clean ValueError/TypeError") from None
                continue
            raise _Failure("accepted-out-of-contract", f"{name}={q:g} is outside the contract "
                           f"[{exp.contract.scalars[name].low:g}, {exp.contract.scalars[name].high:g}] "
                           "but the launcher returned a result instead of raising")
        draw = exp.launch(inputs, params)
        _require_valid(draw)
        k, n = draw.events.counts()
        if k != (0 if q == 0 else n):
            raise _Failure("edge", f"{name}={q:g}: {k} of {n} observable elements showed the event, expected "
                           f"{'none' if q == 0 else 'all'}")


def _reproducibility(exp: _Experiment, plan: Plan, tests: list, series: list) -> None:
    import torch

    q = _middle_level(exp.contract)
    seed = exp.fresh_seed()
    dims = exp.dims(20_000)
    inputs = exp.inputs(dims)
    first = exp.launch(inputs, exp.params(q, seed)).out
    exp.launch(exp.inputs(dims), exp.params(q, exp.fresh_seed()))  # other work in between
    again = exp.launch({n: t.clone() for n, t in inputs.items()}, exp.params(q, seed)).out
    if not torch.equal(first.view(-1).view(torch.uint8), again.view(-1).view(torch.uint8)):
        differ = int((first != again).sum())
        raise _Failure("irreproducible", f"the same seed={seed} and inputs gave different outputs in {differ} of "
                       f"{first.numel()} elements")


def _agree_probability(pa, pb):
    """P(two independent events agree) for per-pair probabilities: p p' + (1 - p)(1 - p')."""
    return pa * pb + (1 - pa) * (1 - pb)


def _agreement(a, b, description: str, shift: int = 0) -> StatResult:
    """Test that two event masks agree as independent masks do (exact binomial for a constant p)."""
    ea, eb = a.events, b.events
    oa, ob = ea.observable.reshape(-1), eb.observable.reshape(-1)
    xa, xb = ea.event.reshape(-1), eb.event.reshape(-1)
    pa, pb = _probabilities(ea).reshape(-1), _probabilities(eb).reshape(-1)
    if shift:  # a's element i + shift against b's element i: b's stream is a's, moved along
        oa, ob, xa, xb, pa, pb = oa[shift:], ob[:-shift], xa[shift:], xb[:-shift], pa[shift:], pb[:-shift]
    both = oa & ob
    agree = int(((xa == xb) & both).sum())
    return _bernoulli_test(agree, _agree_probability(pa, pb)[both], description)


def _seeds(exp: _Experiment, plan: Plan, tests: list, series: list) -> None:
    q = _middle_level(exp.contract)
    seed = exp.fresh_seed()
    seed_range = exp.contract.scalars[exp.model.seed]
    nearby = seed + 1 if seed + 1 <= seed_range.high else seed - 1
    dims = exp.dims(math.ceil(plan.agreement_pairs * 1.05))
    inputs = exp.inputs(dims, positive=1.0)
    base = exp.launch(inputs, exp.params(q, seed))
    near = exp.launch(inputs, exp.params(q, nearby))
    far = exp.launch(inputs, exp.params(q, exp.fresh_seed()))
    for d in (base, near, far):
        _require_valid(d)
    tests.append(_agreement(base, near, f"agreement of the masks of seeds {seed} and {nearby}"))
    tests.append(_agreement(base, far, f"agreement of the masks of seeds {seed} and {far.params[exp.model.seed]}"))
    tests.append(_agreement(base, near, f"agreement of seed {seed}'s mask with seed {nearby}'s shifted by one", 1))


def _lag_pairs(flat_event, flat_obs, lag: int, flat_prob=None):
    """Disjoint pairs (i, i + lag), each run of 2*lag elements pairing its halves:
    (agreements, pairs), and with ``flat_prob`` also each observed pair's P(agree)."""
    whole = flat_event.numel() // (2 * lag) * (2 * lag)
    events = flat_event[:whole].reshape(-1, 2, lag)
    observed = flat_obs[:whole].reshape(-1, 2, lag)
    both = observed[:, 0] & observed[:, 1]
    agree = (events[:, 0] == events[:, 1]) & both
    if flat_prob is None:
        return int(agree.sum()), int(both.sum())
    probs = flat_prob[:whole].reshape(-1, 2, lag)
    return int(agree.sum()), int(both.sum()), _agree_probability(probs[:, 0], probs[:, 1])[both]


def _independence(exp: _Experiment, plan: Plan, tests: list, series: list) -> None:
    import torch

    q = _middle_level(exp.contract)
    elements = max(2 * plan.agreement_pairs, (2 * ROW_LAGS[-1] + 2) * ROW_WIDTH)
    dims = exp.dims(elements)
    # Mixed signs where f keeps negatives visible, so the value bins also test for a
    # mask that depends on the sign; only positives where f hides them (ReLU).
    positive = 0.5 if exp.negatives_observable() else 1.0
    draw = exp.launch(exp.inputs(dims, positive=positive, duplicated=True), exp.params(q, exp.fresh_seed()))
    _require_valid(draw)
    ev, obs = draw.events.event, draw.events.observable
    width = ev.shape[-1] if ev.dim() > 1 else ev.numel()
    flat_e, flat_o = ev.reshape(-1), obs.reshape(-1)
    flat_p = _probabilities(draw.events).reshape(-1)
    lags = [(f"elements {lag} apart", lag) for lag in FLAT_LAGS if 2 * lag < flat_e.numel()]
    rows = flat_e.numel() // width if ev.dim() > 1 else 1
    lags += [(f"rows {k} apart", k * width) for k in ROW_LAGS if 2 * k < rows]
    for what, lag in lags:
        agree, pairs, expected = _lag_pairs(flat_e, flat_o, lag, flat_p)
        tests.append(_bernoulli_test(agree, expected, f"agreement of events {what}"))
        series.append({"x": lag, "y": agree / max(pairs, 1) - float(expected.mean() if pairs else 0),
                       "outcome": "wrong" if tests[-1].rejects(plan.alpha_check) else "ok"})
    position = torch.arange(flat_e.numel()) % POSITION_PERIOD
    tests.append(_homogeneity(position, flat_e, flat_o, flat_p, POSITION_PERIOD,
                              f"event rate by position modulo {POSITION_PERIOD}"))
    if rows > 1:
        tests.append(_homogeneity(torch.arange(flat_e.numel()) // width, flat_e, flat_o, flat_p, rows,
                                  "event rate by row"))
        tests.append(_homogeneity(torch.arange(flat_e.numel()) % width, flat_e, flat_o, flat_p, width,
                                  "event rate by column"))
    x = next(t for n, t in draw.inputs.items() if tuple(t.shape) == tuple(ev.shape)).detach().cpu().reshape(-1)
    x = x.to(torch.float64)
    observed_x = x[flat_o]
    edges = torch.quantile(observed_x, torch.linspace(0, 1, VALUE_BINS + 1, dtype=torch.float64)[1:-1])
    tests.append(_homogeneity(torch.bucketize(x, edges), flat_e, flat_o, flat_p, VALUE_BINS,
                              "event rate by the input's value (16 quantile bins)"))
    tests.append(_duplicates(x, flat_e, flat_o, flat_p))


def _homogeneity(group, event, observable, probs, groups: int, description: str) -> StatResult:
    """Chi-square test that the event count of every group matches its expectation."""
    import torch

    g, p = group[observable], probs[observable]
    counts = torch.bincount(g, weights=event[observable].to(torch.float64), minlength=groups)
    means = torch.bincount(g, weights=p, minlength=groups)
    variances = torch.bincount(g, weights=p * (1 - p), minlength=groups)
    return grouped_counts_test(counts.round(), means, variances, description)


def _duplicates(x, event, observable, probs) -> StatResult:
    """Elements holding equal input values must agree no more often than independent ones."""
    import torch

    order = torch.argsort(x, stable=True)
    xs, es, os_, ps = x[order], event[order], observable[order], probs[order]
    same = (xs[1:] == xs[:-1]) & os_[1:] & os_[:-1]
    idx = torch.nonzero(same).reshape(-1)
    idx = idx[torch.cat([torch.tensor([True]), idx[1:] != idx[:-1] + 1])] if idx.numel() else idx  # disjoint pairs
    agree = int((es[idx] == es[idx + 1]).sum())
    return _bernoulli_test(agree, _agree_probability(ps[idx], ps[idx + 1]),
                           "agreement of events at elements holding equal values")


_CELLS: dict[str, Callable] = {"rate": _rate, "values": _values, "edges": _edges,
                               "reproducibility": _reproducibility, "seeds": _seeds, "independence": _independence}
_STATISTICAL_FINDING = {"rate": "rate-mismatch", "seeds": "seed-dependence", "independence": "not-independent"}


def run_stochastic_cell(subject, cell: str, *, backend=None, seed: int | None = None):
    """Run one ``stochastic:*`` cell and return its CellResult."""
    from triton_conformance.conformance.checks import Backend
    from triton_conformance.conformance.outcomes import CellResult

    backend = backend or Backend()
    name = cell.partition(":")[2]
    base = dict(subject=subject.name, family=subject.family, cell=cell, expected_failure=subject.xfail)
    if name not in _CELLS:
        raise ValueError(f"run_stochastic_cell: cell={cell!r}, expected one of {stochastic_cells(subject.contract)}")
    seed = 0 if seed is None else int(seed)
    plan = plan_for(subject.contract)
    tests: list[StatResult] = []
    series: list[dict] = []
    start = time.perf_counter()
    experiment = _Experiment(subject, backend, seed)
    try:
        _CELLS[name](experiment, plan, tests, series)
        failure = None
    except _Failure as f:
        failure = f
    except Exception as exc:  # noqa: BLE001 - a launcher error inside the contract is a crash
        failure = _Failure("exception", f"{type(exc).__name__} on an input inside the contract: {exc}")
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
    counterexample = {"seed": seed, "last_launch": experiment.last}
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
        return CellResult(outcome="wrong", finding=_STATISTICAL_FINDING.get(name, "statistical"), message=message,
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
    from triton_conformance.conformance.subject import get_subject

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
    from triton_conformance.conformance.outcomes import Finding

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
        test = _bernoulli_test(k, _probabilities(events)[events.observable], "event rate in this example")
        if test.rejects(alpha):
            return Finding("wrong", "rate-mismatch", f"{test.describe()} < alpha {alpha:.3g}",
                           {"p_value": test.p_value, "statistic": test.statistic, "expected": test.expected, "n": n})
    return None
