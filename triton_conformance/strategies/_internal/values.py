"""Tensor contents for each value class, made from a seed.

Values are drawn from a seeded torch generator rather than by hypothesis, so a
spec stays small and shrinks well, and neighbouring elements are distinct: a
kernel that reads the wrong element gets a different number.
"""

from __future__ import annotations

import math

import torch

__all__ = ["VALUE_FILLS", "fill_values", "exp_overflow_threshold"]

VALUE_FILLS = ("ordinary", "huge", "inf", "nan", "denormal", "ties")


def exp_overflow_threshold(dtype: torch.dtype) -> float:
    """The x at which exp(x) overflows ``dtype`` (88.7 for fp32, 11.1 for fp16)."""
    if not dtype.is_floating_point:
        return 8.0
    return math.log(torch.finfo(dtype).max)


def _sprinkle(x: torch.Tensor, gen: torch.Generator, fraction: float, value: float) -> torch.Tensor:
    hit = torch.rand(x.shape, generator=gen, dtype=torch.float64, device=x.device) < fraction
    if x.numel() and not hit.any():
        hit.view(-1)[torch.randint(0, x.numel(), (1,), generator=gen, device=x.device)] = True
    return torch.where(hit, torch.full_like(x, value), x)


def fill_values(shape: tuple[int, ...], dtype: torch.dtype, value_class: str, seed: int,
                device: str | torch.device = "cpu") -> torch.Tensor:
    """Float64 contents of ``shape`` for ``value_class``, already representable in ``dtype``.

    - ``device``: where the seeded generator runs; the same seed draws other
      numbers on another device (a CPU draw of a large tensor costs more than
      the kernel on a GPU), so reproducers name their device.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    on = {"generator": gen, "device": device}
    if dtype == torch.bool:
        return (torch.rand(shape, dtype=torch.float64, **on) < 0.5).to(torch.float64)
    if not dtype.is_floating_point:
        hi = min(100, torch.iinfo(dtype).max)
        lo = max(-100, torch.iinfo(dtype).min)
        return torch.randint(lo, hi + 1, shape, **on).to(torch.float64)
    x = torch.randn(shape, dtype=torch.float64, **on)
    if value_class == "huge":
        # Magnitudes around exp's overflow point; some rows all-negative so exp underflows.
        limit = exp_overflow_threshold(dtype)
        sign = torch.where(torch.rand(shape[:-1] + (1,) if shape else (), **on) < 0.5, -1.0, 1.0)
        x = sign.to(torch.float64) * limit * (0.75 + 0.25 * x.abs().clamp(max=3.0))
    elif value_class == "inf":
        x = _sprinkle(_sprinkle(x, gen, 0.05, math.inf), gen, 0.05, -math.inf)
    elif value_class == "nan":
        x = _sprinkle(x, gen, 0.1, math.nan)
    elif value_class == "denormal":
        tiny = torch.finfo(dtype).tiny  # smallest normal
        sub = torch.rand(shape, dtype=torch.float64, **on) * tiny * torch.sign(x)
        use = torch.rand(shape, dtype=torch.float64, **on) < 0.5
        x = torch.where(use, sub, x)
    elif value_class == "ties":
        x = torch.randint(-2, 3, shape, **on).to(torch.float64)
    elif value_class != "ordinary":
        raise ValueError(f"fill_values: value_class={value_class!r}, expected one of {VALUE_FILLS}")
    return x.to(dtype).to(torch.float64)
