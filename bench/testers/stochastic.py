"""How a hand-written test checks a dropout kernel: a loose rate check and the kept values.

This is what tutorials and most kernel repos do for dropout (there is no
float64 answer to compare with): call it once at ``p = 0.5``, check that

- the dropped fraction, over elements whose kept value would be nonzero, is
  within 0.05 of ``p`` (only when at least :data:`MIN_OBSERVABLE` such
  elements exist, so that the check itself is not flaky: at 1000 elements and
  ``p = 0.5`` the band is 3.2 standard deviations);
- every kept element equals ``f(x) / (1 - p)`` within the tester's tolerance,
  and elements with ``f(x) = 0`` are 0.

It understands models whose ``kind`` is ``"dropout"``
(:class:`triton_conformance.model.stochastic.Dropout`); any other stochastic
model is skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from bench.testers.common import make_inputs, reference, scalar_values

__all__ = ["MIN_OBSERVABLE", "RATE_BAND", "P", "dropout_check", "stochastic_skip"]

P = 0.5
RATE_BAND = 0.05
MIN_OBSERVABLE = 1000


def stochastic_skip(contract) -> str | None:
    """None when :func:`dropout_check` can test this stochastic contract, else why not."""
    model = contract.model
    if getattr(model, "kind", None) != "dropout":
        return f"stochastic model {type(model).__name__} is not a dropout model; no hand-written check for it"
    name = getattr(model, "probability_name", None)
    if name not in contract.scalars:
        return f"dropout model names probability {name!r}, which is not a declared scalar"
    return None


def dropout_check(subject, dims: dict[str, int], dtype: str, device: str, gen: torch.Generator,
                  close: Callable[[torch.Tensor, torch.Tensor], None]) -> Callable[[], None]:
    """A check (raises AssertionError) of one call at ``p = P`` with a fresh seed from ``gen``."""
    contract = subject.contract
    model = contract.model
    p_name = model.probability_name

    def check() -> None:
        inputs = make_inputs(contract, dims, dtype, device, gen)
        scalars: dict[str, Any] = scalar_values(contract, gen)
        scalars[p_name] = P
        out = subject(**inputs, **scalars)
        ref = reference(contract, inputs, {k: v for k, v in scalars.items()})[0].to(torch.float64)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(ref.shape):
            raise AssertionError(f"output {type(out).__name__} {tuple(getattr(out, 'shape', ()))}, "
                                 f"expected shape {tuple(ref.shape)}")
        got = out.detach().to("cpu", torch.float64)
        ref = ref.to("cpu")
        kept_value = ref / (1.0 - P)
        observable = (ref != 0) & (kept_value.to(out.dtype) != 0)
        dropped = (got == 0) & observable
        n = int(observable.sum())
        if n >= MIN_OBSERVABLE:
            rate = int(dropped.sum()) / n
            if abs(rate - P) > RATE_BAND:
                raise AssertionError(f"dropped fraction {rate:.4f} over {n} elements, expected {P} +- {RATE_BAND}")
        kept = observable & ~dropped
        close(out.detach().cpu()[kept], kept_value[kept].to(out.dtype))
        if bool((got[~observable] != 0).any()):
            raise AssertionError("nonzero output where f(x) is 0")

    return check
