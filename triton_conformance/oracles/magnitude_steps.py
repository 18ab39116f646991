"""The magnitude rules' step functions (floor, round, a division with a rounding mode, fmod): a rounding of
the argument within its allowance of a step moves the result by a whole step."""

from __future__ import annotations

from typing import Any

import torch

from triton_conformance.oracles.tolerance import SAFETY_FACTOR

__all__ = ["step_height"]


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_floating_point


# Step functions: a rounding of their argument within its allowance of a step moves the result by a whole
# step (fp16's trunc(a / b) is 21 where float64's is 20 when a / b = 20.99 rounds to 21).
_STEPS = {"floor", "ceil", "round", "trunc", "div", "floor_divide", "remainder", "fmod"}


def step_height(name: str, vflat: list, mflat: list, vkwargs: dict, unit: float, library_ulps: float) -> Any:
    """A step's height, as a magnitude (``height / (C * unit)``: an allowance of one step), where the
    argument (``a / b`` for a division) lies within the allowance of its roundings, ``C * unit * (m - |arg|)``,
    of a step; None for an op that is not a step function."""
    if name not in _STEPS or (name == "div" and vkwargs.get("rounding_mode") is None):
        return None
    a, ma = vflat[0], (mflat[0].to(torch.float64) if _is_float(mflat[0]) else 0.0)
    height: Any = 1.0
    kind = "round" if name == "round" else "trunc" if name in ("trunc", "fmod") or vkwargs.get(
        "rounding_mode") == "trunc" else "ceil" if name == "ceil" else "floor"
    if name in ("div", "floor_divide", "remainder", "fmod"):
        b = torch.as_tensor(vflat[1], dtype=torch.float64, device=a.device)
        mb = mflat[1].to(torch.float64) if _is_float(mflat[1]) else 0.0
        q = a / b
        mq = (ma + q.abs() * mb) / b.abs() + library_ulps * q.abs()
        if name in ("remainder", "fmod"):
            height = b.abs()
    else:
        scale = 10.0 ** int(vkwargs.get("decimals", 0) or 0)
        q, mq, height = a * scale, ma * scale, 1.0 / scale
    distance = ((q - q.floor()) - 0.5).abs() if kind == "round" else torch.minimum(q - q.floor(), q.ceil() - q)
    # The roundings behind the argument beyond its own size: an input, read exactly, moves no step.
    near = (distance < SAFETY_FACTOR * unit * (mq - q.abs()).clamp_min(0)) & torch.isfinite(q)
    return torch.where(near, height / (SAFETY_FACTOR * unit) * torch.ones_like(q), torch.zeros_like(q))
