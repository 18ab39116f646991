"""The six stochastic cells, each a designed experiment that appends its tests (and plot points)."""

from __future__ import annotations

import math
from typing import Callable

import torch

from triton_conformance.conformance.judge import clean_rejection
from triton_conformance.conformance.kinds.stochastic.experiment import (
    DesignFailure,
    Experiment,
    agree_probability,
    at,
    bernoulli_test,
    flat,
    probabilities,
    require_valid,
)
from triton_conformance.conformance.kinds.stochastic.plan import (
    FLAT_LAGS,
    POSITION_PERIOD,
    ROW_LAGS,
    ROW_WIDTH,
    VALUE_BINS,
    VALUES_ELEMENTS,
    VALUES_LEVELS,
    Plan,
    admits,
    levels,
    middle_level,
)
from triton_conformance.oracles.statistics import StatResult, grouped_counts_test

__all__ = ["DESIGNS", "STATISTICAL_FINDING", "lag_pairs"]


def _rate(exp: Experiment, plan: Plan, tests: list[StatResult], series: list[dict]) -> None:
    for q in levels(exp.contract):
        k, n, draws = exp.collect(q, plan.rate_trials[q], positive=1.0)
        parts = [at(probabilities(d.events), d.events.observable) for d in draws]
        probs = parts[0] if isinstance(parts[0], float) else torch.cat(parts)
        what = "event rate" if q is None else f"event rate at {exp.model.probability_name}={q:g}"
        tests.append(bernoulli_test(k, n, probs, what))
        expected = probs if isinstance(probs, float) else float(probs.mean())
        series.append({"x": 0.5 if q is None else q, "y": k / n - expected,
                       "outcome": "wrong" if tests[-1].rejects(plan.alpha_check) else "ok"})


def _values(exp: Experiment, plan: Plan, tests: list, series: list) -> None:
    levels = [q for q in VALUES_LEVELS if admits(exp.contract, q)] if exp.model.probability_name else [None]
    for q in levels:
        draw = exp.launch(exp.inputs(exp.dims(VALUES_ELEMENTS)), exp.params(q, exp.fresh_seed()))
        require_valid(draw)


def _edges(exp: Experiment, plan: Plan, tests: list, series: list) -> None:
    name = exp.model.probability_name
    dims = exp.dims(4096)
    for q in (0.0, 1.0):
        params = exp.params(q, exp.fresh_seed())
        inputs = exp.inputs(dims)
        if not admits(exp.contract, q):
            try:
                exp.call(inputs, params)
            except Exception as exc:  # noqa: BLE001 - any exception is judged
                if not clean_rejection(exc):
                    raise DesignFailure("unclean-rejection", f"{name}={q:g} is outside the contract and raised "
                                   f"{type(exc).__name__}: {exc}, expected a clean ValueError/TypeError") from None
                continue
            raise DesignFailure("accepted-out-of-contract", f"{name}={q:g} is outside the contract "
                           f"[{exp.contract.scalars[name].low:g}, {exp.contract.scalars[name].high:g}] "
                           "but the launcher returned a result instead of raising")
        draw = exp.launch(inputs, params)
        require_valid(draw)
        k, n = draw.events.counts()
        if k != (0 if q == 0 else n):
            raise DesignFailure("edge", f"{name}={q:g}: {k} of {n} observable elements showed the event, expected "
                           f"{'none' if q == 0 else 'all'}")


def _reproducibility(exp: Experiment, plan: Plan, tests: list, series: list) -> None:
    q = middle_level(exp.contract)
    seed = exp.fresh_seed()
    dims = exp.dims(20_000)
    inputs = exp.inputs(dims)
    first = exp.launch(inputs, exp.params(q, seed)).out
    exp.launch(exp.inputs(dims), exp.params(q, exp.fresh_seed()))  # other work in between
    again = exp.launch({n: t.clone() for n, t in inputs.items()}, exp.params(q, seed)).out
    if not torch.equal(first.view(-1).view(torch.uint8), again.view(-1).view(torch.uint8)):
        differ = int((first != again).sum())
        raise DesignFailure("irreproducible", f"the same seed={seed} and inputs gave different outputs in {differ} of "
                       f"{first.numel()} elements")


def _agreement(a, b, description: str, shift: int = 0) -> StatResult:
    """Test that two event masks agree as independent masks do (exact binomial for a constant p)."""
    ea, eb = a.events, b.events
    oa, ob = ea.observable.reshape(-1), eb.observable.reshape(-1)
    xa, xb = ea.event.reshape(-1), eb.event.reshape(-1)
    pa, pb = flat(probabilities(ea)), flat(probabilities(eb))
    if shift:  # a's element i + shift against b's element i: b's stream is a's, moved along
        oa, ob, xa, xb = oa[shift:], ob[:-shift], xa[shift:], xb[:-shift]
        pa, pb = at(pa, slice(shift, None)), at(pb, slice(None, -shift))
    both = oa & ob
    agree = int(((xa == xb) & both).sum())
    return bernoulli_test(agree, int(both.sum()), at(agree_probability(pa, pb), both), description)


def _seeds(exp: Experiment, plan: Plan, tests: list, series: list) -> None:
    q = middle_level(exp.contract)
    seed = exp.fresh_seed()
    nearby = seed + 1 if seed + 1 <= exp.seed_range()[1] else seed - 1
    dims = exp.dims(math.ceil(plan.agreement_pairs * 1.05))
    inputs = exp.inputs(dims, positive=1.0)
    base = exp.launch(inputs, exp.params(q, seed))
    near = exp.launch(inputs, exp.params(q, nearby))
    far = exp.launch(inputs, exp.params(q, exp.fresh_seed()))
    for d in (base, near, far):
        require_valid(d)
    tests.append(_agreement(base, near, f"agreement of the masks of seeds {seed} and {nearby}"))
    tests.append(_agreement(base, far, f"agreement of the masks of seeds {seed} and {far.params[exp.seed_key]}"))
    tests.append(_agreement(base, near, f"agreement of seed {seed}'s mask with seed {nearby}'s shifted by one", 1))


def lag_pairs(flat_event, flat_obs, lag: int, flat_prob=None):
    """Disjoint pairs (i, i + lag), each run of 2*lag elements pairing its halves:
    (agreements, pairs), and with ``flat_prob`` also P(agree): one float, or each observed pair's."""
    whole = flat_event.numel() // (2 * lag) * (2 * lag)
    events = flat_event[:whole].reshape(-1, 2, lag)
    observed = flat_obs[:whole].reshape(-1, 2, lag)
    both = observed[:, 0] & observed[:, 1]
    agree = (events[:, 0] == events[:, 1]) & both
    if flat_prob is None:
        return int(agree.sum()), int(both.sum())
    if isinstance(flat_prob, float):
        return int(agree.sum()), int(both.sum()), agree_probability(flat_prob, flat_prob)
    probs = flat_prob[:whole].reshape(-1, 2, lag)
    return int(agree.sum()), int(both.sum()), agree_probability(probs[:, 0], probs[:, 1])[both]


def _independence(exp: Experiment, plan: Plan, tests: list, series: list) -> None:
    q = middle_level(exp.contract)
    elements = max(2 * plan.agreement_pairs, (2 * ROW_LAGS[-1] + 2) * ROW_WIDTH)
    dims = exp.dims(elements)
    # Mixed signs where f keeps negatives visible, so the value bins also test for a
    # mask that depends on the sign; only positives where f hides them (ReLU).
    positive = 0.5 if exp.negatives_observable() else 1.0
    draw = exp.launch(exp.inputs(dims, positive=positive, duplicated=True), exp.params(q, exp.fresh_seed()))
    require_valid(draw)
    ev, obs = draw.events.event, draw.events.observable
    width = ev.shape[-1] if ev.dim() > 1 else ev.numel()
    flat_e, flat_o = ev.reshape(-1), obs.reshape(-1)
    flat_p = flat(probabilities(draw.events))
    lags = [(f"elements {lag} apart", lag) for lag in FLAT_LAGS if 2 * lag < flat_e.numel()]
    rows = flat_e.numel() // width if ev.dim() > 1 else 1
    lags += [(f"rows {k} apart", k * width) for k in ROW_LAGS if 2 * k < rows]
    for what, lag in lags:
        agree, pairs, expected = lag_pairs(flat_e, flat_o, lag, flat_p)
        tests.append(bernoulli_test(agree, pairs, expected, f"agreement of events {what}"))
        mean = expected if isinstance(expected, float) else float(expected.mean()) if pairs else 0.0
        series.append({"x": lag, "y": agree / max(pairs, 1) - mean,
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
    g = group[observable]
    counts = torch.bincount(g, weights=event[observable].to(torch.float64), minlength=groups)
    if isinstance(probs, float):
        trials = torch.bincount(g, minlength=groups).to(torch.float64)
        means, variances = trials * probs, trials * probs * (1 - probs)
    else:
        p = probs[observable]
        means = torch.bincount(g, weights=p, minlength=groups)
        variances = torch.bincount(g, weights=p * (1 - p), minlength=groups)
    return grouped_counts_test(counts.round(), means, variances, description)


def _duplicates(x, event, observable, probs) -> StatResult:
    """Elements holding equal input values must agree no more often than independent ones."""
    order = torch.argsort(x, stable=True)
    xs, es, os_, ps = x[order], event[order], observable[order], at(probs, order)
    same = (xs[1:] == xs[:-1]) & os_[1:] & os_[:-1]
    idx = torch.nonzero(same).reshape(-1)
    idx = idx[torch.cat([torch.tensor([True]), idx[1:] != idx[:-1] + 1])] if idx.numel() else idx  # disjoint pairs
    agree = int((es[idx] == es[idx + 1]).sum())
    return bernoulli_test(agree, int(idx.numel()), agree_probability(at(ps, idx), at(ps, idx + 1)),
                          "agreement of events at elements holding equal values")


DESIGNS: dict[str, Callable] = {"rate": _rate, "values": _values, "edges": _edges,
                               "reproducibility": _reproducibility, "seeds": _seeds, "independence": _independence}
STATISTICAL_FINDING = {"rate": "rate-mismatch", "seeds": "seed-dependence", "independence": "not-independent"}
