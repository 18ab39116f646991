"""Ordinary cells of a stochastic subject: each example's output against the model."""

from __future__ import annotations

import torch

from triton_conformance.conformance.kinds.stochastic.experiment import at, bernoulli_test, probabilities
from triton_conformance.model.outcomes import Finding

__all__ = ["check_stochastic_output"]


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
