"""Which aten ops an oracle reaches that the magnitude pass has no rule or decomposition for.

The pass itself stops at the first such op (:class:`.magnitude.Unavailable` names it).  A survey runs
it to the end instead, recording every op without a rule and letting it pass its own ``|value|`` on
as its magnitude, forward and backward, so that a coverage list can name all of them at once
(``python bench/opdb_calibration.py --coverage``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from triton_conformance.oracles import magnitude

__all__ = ["Coverage", "survey"]


@dataclass(frozen=True)
class Coverage:
    """The ops an oracle's forward and its backward reach without a rule (by aten name), and why the
    pass failed otherwise (an oracle or rule that raised under tracking), if it did."""

    forward: tuple[str, ...]
    backward: tuple[str, ...]
    failure: str | None = None

    @property
    def complete(self) -> bool:
        return not (self.forward or self.backward or self.failure)


def _missing_in(run: Callable[[], Any]) -> tuple[set, str | None]:
    magnitude._SURVEY.append(set())
    try:
        got = run()
    finally:
        missing = magnitude._SURVEY.pop()
    return missing, (got.reason if isinstance(got, magnitude.Unavailable) else None)


def survey(oracle: Callable[..., Any], inputs: Mapping[str, Any], scalars: Mapping[str, Any] | None = None,
           grads: Sequence[str] = (), grad_output: Any = None) -> Coverage:
    """The ops without a rule that ``oracle`` on ``inputs`` (float64 tensors) reaches, forward, and, when
    ``grads`` names inputs (``grad_output`` as :func:`.magnitude.gradient_magnitudes` takes it), in its
    backward beyond those of the forward."""
    if not isinstance(inputs, Mapping):
        raise TypeError(f"inputs={type(inputs).__name__}, expected a mapping of input names to tensors")
    scalars = dict(scalars or {})
    forward, failure = _missing_in(lambda: magnitude.output_magnitudes(oracle, inputs, scalars))
    backward: set = set()
    if grads:
        if grad_output is None:
            raise ValueError("grad_output=None with grads named: expected the output gradients to backpropagate")
        both, failed = _missing_in(lambda: magnitude.gradient_magnitudes(oracle, inputs, scalars, grads,
                                                                          grad_output))
        backward = both - forward
        failure = failure or failed
    return Coverage(tuple(sorted(forward)), tuple(sorted(backward)), failure)
