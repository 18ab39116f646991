"""Ordinary cells of a stochastic subject: each example's output against the model, as a judging rule."""

from __future__ import annotations

import torch

from triton_conformance.conformance.kinds.stochastic.experiment import at, bernoulli_test, probabilities
from triton_conformance.conformance.rules import JudgingRule, OutputCheck
from triton_conformance.model.outcomes import Finding

__all__ = ["check_stochastic_output", "StochasticModelRule"]


def check_stochastic_output(subject, out, ref, scalars: dict, bound, alpha: float | None):
    """A Finding if ``out`` breaks the model on one example of an ordinary cell, else None.

    ``alpha``: the level of this example's rate test (None: values only, no rate test).
    """
    model = subject.contract.model
    events = model.classify(out.detach().cpu(), ref.detach().cpu(), scalars, bound)
    bad = events.invalid
    if bool(bad.any()):
        first = tuple(int(i) for i in torch.nonzero(bad)[0]) if bad.dim() else ()
        return Finding("wrong", "invalid-value", f"{int(bad.sum())} of {bad.numel()} elements are values the model "
                       f"does not allow ({events.allowed}); first at {first}: got {float(out.detach().cpu()[first])!r}",
                       {"first_index": first, "invalid": int(bad.sum())})
    k, n = events.counts()
    if n and alpha is not None:
        test = bernoulli_test(k, n, at(probabilities(events), events.observable), "event rate in this example")
        if test.rejects(alpha):
            return Finding("wrong", "rate-mismatch", f"{test.describe()} < alpha {alpha:.3g}",
                           {"p_value": test.p_value, "statistic": test.statistic, "expected": test.expected, "n": n})
    return None


class StochasticModelRule(JudgingRule):
    """A stochastic subject's output: only values its model allows, at the model's event rate (a test at the
    level the judge's ``example_alpha`` option gives, if any)."""

    name = "stochastic-model"

    def applies(self, subject) -> bool:
        return subject.contract.model is not None

    def check(self, output: OutputCheck) -> Finding | None:
        return check_stochastic_output(output.judge.subject, output.out, output.ref, output.scalars, output.bound,
                                       output.judge.options.get("example_alpha"))
