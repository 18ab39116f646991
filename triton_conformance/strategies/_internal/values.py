"""Tensor contents for each value class, made from a seed.

Values are drawn from a seeded torch generator rather than by hypothesis, so a
spec stays small and shrinks well, and neighbouring elements are distinct: a
kernel that reads the wrong element gets a different number.
"""

from __future__ import annotations

import math

import torch

import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.strategies._internal.fp8_values import FP8_DRAWS, fill_fp8

__all__ = ["VALUE_FILLS", "VALUE_DRAWS", "fill_scales", "fill_values", "fill_indices", "exp_overflow_threshold", "representable_range"]

# The value classes filled here: every row of ``vocabulary.VALUES``, each by the draw it names (VALUE_DRAWS).
VALUE_FILLS = vocabulary.VALUES.names()
# Share of an index input's elements set to a special value (an ignore index).
SPECIAL_FRACTION = 0.25


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


def representable_range(value_range: tuple[float, float], dtype: torch.dtype) -> tuple[float, float]:
    """``value_range`` shrunk so that rounding a value inside it to ``dtype`` stays inside it."""
    lo, hi = value_range
    if dtype.is_floating_point:
        big = float(torch.finfo(dtype).max)
        lo, hi = max(lo, -big), min(hi, big)
        u = float(torch.finfo(dtype).eps)  # round to nearest moves a value by at most |v| * eps / 2
        lo, hi = lo + abs(lo) * u, hi - abs(hi) * u
    return lo, hi


def _in_range(x: torch.Tensor, value_range: tuple[float, float], on: dict) -> torch.Tensor:
    """Ordinary N(0, 1) values moved inside ``value_range``: kept where it holds [-3, 3]; else
    centred as near 0 as the range allows, with a spread of at most 1, and clamped."""
    lo, hi = value_range
    if lo <= -3 and hi >= 3:
        return x.clamp(lo, hi)
    spread = min(1.0, (hi - lo) / 6)
    centre = min(max(0.0, lo + 3 * spread), hi - 3 * spread)
    return (centre + spread * x).clamp(lo, hi)


def _extreme(x: torch.Tensor, shape: tuple[int, ...], value_range: tuple[float, float], on: dict) -> torch.Tensor:
    """Values out to the ends of ``value_range``: each row (last dim) is all at the low end, all at
    the high end, or mixed (half its elements at either end, the others ordinary)."""
    lo, hi = value_range
    mid = (lo + hi) / 2 if not lo < 0 < hi else 0.0  # a symmetric-ish range keeps 0 as its centre
    rows = shape[:-1] + (1,) if shape else ()
    mode = torch.randint(0, 3, rows, **on)  # 0: low end, 1: high end, 2: mixed
    reach = 0.5 + 0.5 * torch.rand(shape, dtype=torch.float64, **on)  # (0.5 .. 1) of the way to an end
    low = mid + (lo - mid) * reach
    high = mid + (hi - mid) * reach
    pick_high = torch.where(mode == 2, torch.rand(shape, dtype=torch.float64, **on) < 0.5, mode == 1)
    ends = torch.where(pick_high, high, low)
    ordinary = (mode == 2) & (torch.rand(shape, dtype=torch.float64, **on) < 0.5)
    return torch.where(ordinary, _in_range(x, value_range, on), ends).clamp(lo, hi)


def fill_indices(shape: tuple[int, ...], bound: int, special: tuple[int, ...], seed: int,
                 device: str | torch.device = "cpu") -> torch.Tensor:
    """Int64 indices in ``[0, bound)``, with a ``special`` value (an ignore index) at about a
    quarter of the positions when any is given (all of them when ``bound`` is 0)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    on = {"generator": gen, "device": device}
    if bound > 0:
        x = torch.randint(0, bound, shape, **on)
    else:
        x = torch.zeros(shape, dtype=torch.int64, device=device)
    if special:
        which = torch.randint(0, len(special), shape, **on)
        values = torch.tensor(special, dtype=torch.int64, device=device)[which]
        hit = torch.rand(shape, dtype=torch.float64, **on) < SPECIAL_FRACTION
        x = torch.where(hit | (bound <= 0), values, x)
    return x


def fill_scales(shape: tuple[int, ...], dtype: torch.dtype, seed: int,
                device: str | torch.device = "cpu") -> torch.Tensor:
    """Positive scales: powers of two from 2^-4 to 2^4, times (1 + U[0, 1)) unless ``dtype`` holds only
    powers of two (e8m0)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    on = {"generator": gen, "device": device}
    x = torch.exp2(torch.randint(-4, 5, shape, **on).to(torch.float64))
    if dtype == torch.float32:
        x = x * (1 + torch.rand(shape, dtype=torch.float64, **on))
    return x.to(dtype).to(torch.float64)


def _huge(x, shape, dtype, value_range, gen, on):
    # Magnitudes around exp's overflow point; some rows all-negative so exp underflows.
    limit = exp_overflow_threshold(dtype)
    sign = torch.where(torch.rand(shape[:-1] + (1,) if shape else (), **on) < 0.5, -1.0, 1.0)
    return sign.to(torch.float64) * limit * (0.75 + 0.25 * x.abs().clamp(max=3.0))


def _subnormal(x, shape, dtype, value_range, gen, on):
    tiny = torch.finfo(dtype).tiny  # smallest normal
    sub = torch.rand(shape, dtype=torch.float64, **on) * tiny * torch.sign(x)
    use = torch.rand(shape, dtype=torch.float64, **on) < 0.5
    return torch.where(use, sub, x)


def _fp8(draw: str):
    def fill(x, shape, dtype, value_range, gen, on):
        return fill_fp8(x, shape, draw, on)
    return fill


# What each value row's ``draw`` names: float64 contents from ordinary N(0, 1) values ``x`` (already inside a
# declared range), the shape, the dtype, the (representable) range or None, and the seeded generator.
VALUE_DRAWS = {
    "normal": lambda x, shape, dtype, value_range, gen, on: x,
    "exp-overflow": _huge,
    "infinities": lambda x, shape, dtype, value_range, gen, on: _sprinkle(
        _sprinkle(x, gen, 0.05, math.inf), gen, 0.05, -math.inf),
    "nans": lambda x, shape, dtype, value_range, gen, on: _sprinkle(x, gen, 0.1, math.nan),
    "subnormal": _subnormal,
    "small-integers": lambda x, shape, dtype, value_range, gen, on: torch.randint(-2, 3, shape, **on).to(
        torch.float64),
    "range-ends": lambda x, shape, dtype, value_range, gen, on: (
        x if value_range is None else _extreme(x, shape, value_range, on)),
    **{draw: _fp8(draw) for draw in FP8_DRAWS},
}


def fill_values(shape: tuple[int, ...], dtype: torch.dtype, value_class: str, seed: int,
                device: str | torch.device = "cpu", value_range: tuple[float, float] | None = None) -> torch.Tensor:
    """Float64 contents of ``shape`` for ``value_class``, already representable in ``dtype``.

    - ``device``: where the seeded generator runs; the same seed draws other
      numbers on another device (a CPU draw of a large tensor costs more than
      the kernel on a GPU), so reproducers name their device.
    - ``value_range``: the input's declared ``(low, high)``: ordinary values are
      drawn inside it, finite values of the other classes are clamped into it, and
      ``"extreme"`` reaches out to its ends (without a range, ``"extreme"`` is ordinary).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    on = {"generator": gen, "device": device}
    if dtype == torch.bool:
        return (torch.rand(shape, dtype=torch.float64, **on) < 0.5).to(torch.float64)
    if not dtype.is_floating_point:
        hi = min(100, torch.iinfo(dtype).max)
        lo = max(-100, torch.iinfo(dtype).min)
        if value_range is not None:
            lo, hi = max(lo, math.ceil(value_range[0])), min(hi, math.floor(value_range[1]))
            if lo > hi:  # the range lies past +-100: its first 201 integers
                lo = max(math.ceil(value_range[0]), torch.iinfo(dtype).min)
                hi = min(math.floor(value_range[1]), lo + 200, torch.iinfo(dtype).max)
        return torch.randint(lo, hi + 1, shape, **on).to(torch.float64)
    row = vocabulary.VALUES[value_class] if value_class in vocabulary.VALUES else None
    if row is None or row.draw not in VALUE_DRAWS:
        raise ValueError(f"fill_values: value_class={value_class!r}, expected one of {VALUE_FILLS} (a row of "
                         f"vocabulary.VALUES whose draw is one of {tuple(VALUE_DRAWS)})")
    x = torch.randn(shape, dtype=torch.float64, **on)
    if value_range is not None:
        value_range = representable_range(value_range, dtype)
        x = _in_range(x, value_range, on)
    x = VALUE_DRAWS[row.draw](x, shape, dtype, value_range, gen, on)
    if value_range is not None and row.claim == "claimed":  # a claimed class's finite values stay in the range
        x = torch.where(torch.isfinite(x), x.clamp(*value_range), x)
    return x.to(dtype).to(torch.float64)
