"""What the judge computes only where an output fails, at most once an example: the magnitudes (at each
unit they are asked for) and the oracle's steps rounded to the input dtype."""

from __future__ import annotations

from typing import Any

import torch

from triton_conformance.oracles import magnitude
from triton_conformance.oracles.tolerance import SAFETY_FACTOR, Bound

__all__ = ["at_unit", "nth", "once", "traced_once", "unit_of"]


def unit_of(bound: Bound) -> float:
    """The unit roundoff ``bound`` allows per unit of the terms' magnitude (``per_term = C * unit``): the
    unit the magnitude pass counts in, so the roundings it counts at a fixed precision (a cast to bf16,
    a scalar's to fp32) weigh what they weigh.  fp32's where the bound takes no magnitudes."""
    return bound.per_term / SAFETY_FACTOR if bound.per_term > 0 else magnitude.FP32_UNIT


def at_unit(magnitudes: Any, i: int, unit: float):
    """Output ``i``'s magnitudes counted in ``unit``, or in the unit asked for (the precision verdict asks
    at the input dtype's: a step function's allowance depends on it)."""
    return lambda at=unit: magnitudes(i, at)


def once(compute: Any):
    """``compute()``, called on the first call only."""
    done: list = []
    return lambda: done[0] if done else done.append(compute()) or done[0]


def nth(got: Any, i: int, then: Any = lambda r: r) -> Any:
    """``then`` of output ``i`` of ``got`` (None past its end), or ``got`` where it is Unavailable."""
    if isinstance(got, magnitude.Unavailable):
        return got
    return then(got[i].to(torch.float64)) if i < len(got) and isinstance(got[i], torch.Tensor) else None


def traced_once(trace: Any):
    """``(i, unit) -> trace(unit)[i]``, calling ``trace`` at most once a unit (:class:`magnitude.Unavailable`
    where it gave one, or too few)."""
    done: dict = {}

    def of(i: int, unit: float = magnitude.FP32_UNIT):
        if unit not in done:
            done[unit] = trace(unit)
        mags = done[unit]
        if isinstance(mags, magnitude.Unavailable):
            return mags
        if i >= len(mags):
            return magnitude.Unavailable(f"the oracle gave {len(mags)} output(s) under magnitude tracking")
        if mags[i] is None:
            return magnitude.Unavailable("the traced gradient is None")
        return mags[i]

    return of
