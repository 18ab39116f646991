"""How precise a kernel's output was: its worst error in ulps, the share of its bound it used, and the
precision verdict of an output that failed the bound of its claimed accumulation.

A failing output is judged once more at the input dtype's unit roundoff (intermediates in the input dtype,
the same magnitudes): within that bound, the kernel computes in its input dtype where it claims more; past
it, the kernel is worse than any computation in its own dtype, and wrong.  ``details["precision"]`` is
:meth:`Verdict.to_dict`; ``docs/tolerance.md`` says what each key means.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from triton_conformance.oracles.tolerance import UNIT_ROUNDOFF

__all__ = ["ACHIEVED", "Errors", "Verdict", "errors_of", "more_precise", "verdict"]

# The values of ``details["precision"]["achieved"]``.
ACHIEVED = ("input-dtype", "worse")


@dataclass(frozen=True)
class Errors:
    """One judged output's worst error: in ulps of its own dtype (``ulps``) and as the largest
    ``|err| / bound`` of its elements (``used``: above 1 where it fails)."""

    ulps: float
    used: float


def _ulp(e_abs: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype``'s values at each ``e_abs`` (``|e|``; that of the smallest normal below it)."""
    info = _finfo(dtype)
    _, exponent = torch.frexp(e_abs.clamp_min(info.tiny))
    return torch.ldexp(torch.full_like(e_abs, info.eps), exponent - 1)


@functools.lru_cache(maxsize=None)
def _finfo(dtype: torch.dtype) -> torch.finfo:
    return torch.finfo(dtype)


def errors_of(err: torch.Tensor, expected: torch.Tensor, limit, dtype: torch.dtype, *,
              expected_abs: torch.Tensor | None = None) -> Errors | None:
    """``err`` (0 where a value is not finite) against the oracle ``expected`` and the bound's elementwise
    ``limit``, for an output of ``dtype``; None for an integer output (no ulps) or an empty one.
    ``expected_abs``: ``|expected|``, where the caller has it."""
    if not dtype.is_floating_point or err.numel() == 0:
        return None
    if float(err.max()) == 0.0:  # an exact output: no element has an error to scale
        return Errors(ulps=0.0, used=0.0)
    ulps = float((err / _ulp(expected.abs() if expected_abs is None else expected_abs, dtype)).max())
    limit = torch.as_tensor(limit, dtype=torch.float64, device=err.device)
    used = float(torch.where(err > 0, err / limit, torch.zeros_like(err)).max())  # err / 0 is inf: exact bound
    return Errors(ulps=ulps, used=used)


@dataclass(frozen=True)
class Verdict:
    """Which precision a failing output achieved.

    ``achieved``: ``"input-dtype"`` (within the bound for intermediates in the input dtype) or ``"worse"``;
    ``claimed``: the accumulation dtype the bound claims; ``input``: the input dtype;
    ``ratio_claimed`` / ``ratio_input``: the worst ``|err| / bound`` under each (``ratio_input`` is
    ``ratio_claimed`` where the claim is no more precise than the input dtype).
    """

    achieved: str
    claimed: str
    input: str
    ratio_claimed: float
    ratio_input: float

    def to_dict(self) -> dict:
        return {"achieved": self.achieved, "claimed": self.claimed, "input": self.input,
                "ratio_claimed": _finite(self.ratio_claimed), "ratio_input": _finite(self.ratio_input)}

    def describe(self) -> str:
        if self.achieved == "input-dtype":
            return (f"within the bound for {self.input} intermediates ({self.ratio_input:.2g} of it), "
                    f"{self.ratio_claimed:.3g}x past the bound for the {self.claimed} accumulation it claims; "
                    "declare `accumulate=` if that is by design")
        return (f"worse than {self.input} intermediates ({self.ratio_input:.3g}x past their bound, "
                f"{self.ratio_claimed:.3g}x past the {self.claimed} one it claims): wrong")


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"  # JSON has no infinity


def verdict(claimed: str, input_dtype: str, ratio_claimed: float, ratio_input: float | None) -> Verdict:
    """The verdict from the two ratios; ``ratio_input`` None where the claim is no more precise than the
    input dtype (nothing to fall back to: the kernel is worse than its claim, which is the input's)."""
    if ratio_input is None:
        return Verdict("worse", claimed, input_dtype, ratio_claimed, ratio_claimed)
    return Verdict("input-dtype" if ratio_input <= 1.0 else "worse", claimed, input_dtype, ratio_claimed,
                   ratio_input)


def more_precise(claimed: str, input_dtype: str) -> bool:
    """Whether ``claimed`` keeps more precision than ``input_dtype`` (so judging at the latter says more)."""
    return UNIT_ROUNDOFF.get(claimed, 0.0) < UNIT_ROUNDOFF.get(input_dtype, 0.0)
