"""Value classes for fp8: what a quantizer's input holds to test its rounding, saturation and scales.

Drawn into float64 before the input's own dtype rounds them (fp32, fp16, bf16: these values are
exact in fp32 and fp16 but for the smallest subnormals of e5m2).
"""

from __future__ import annotations

import torch

__all__ = ["FP8_DRAWS", "fill_fp8"]

# The draws this module makes, which rows of ``vocabulary.VALUES`` name (zero-blocks, fp8-overflow, ...).
FP8_DRAWS = ("zero-rows", "fp8-overflow", "fp8-subnormal", "fp8-midpoints")
E4M3_LARGEST, E5M2_LARGEST = 448.0, 57344.0
# Every TIE_PERIOD-th element along the last dim is +-448 in "fp8-ties": a group of any multiple of it
# then has amax 448 and a scale of exactly 1 (amax / 448), so the midpoints stay midpoints after scaling.
TIE_PERIOD = 16


def _rows(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[:-1] + (1,) if shape else ()


def fill_fp8(x: torch.Tensor, shape: tuple[int, ...], draw: str, on: dict) -> torch.Tensor:
    """Float64 contents for an fp8 value class whose row's draw is ``draw`` (one of :data:`FP8_DRAWS`), from
    ordinary ``x`` and the seeded generator ``on``."""
    sign = torch.where(torch.rand(shape, dtype=torch.float64, **on) < 0.5, -1.0, 1.0)
    if draw == "zero-rows":  # about a third of the rows, at least one, all zero
        zero = torch.rand(_rows(shape), dtype=torch.float64, **on) < 1 / 3
        if zero.numel() and not zero.any():
            zero.view(-1)[0] = True
        return torch.where(zero, torch.zeros_like(x), x)
    if draw == "fp8-overflow":  # both formats' largest values, each from half to four times over
        largest = torch.where(torch.rand(shape, dtype=torch.float64, **on) < 0.5, E4M3_LARGEST, E5M2_LARGEST)
        return sign * largest * torch.exp2(torch.rand(shape, dtype=torch.float64, **on) * 3 - 1)
    if draw == "fp8-subnormal":  # below e4m3's (2^-6) or e5m2's (2^-14) smallest normal
        normal = torch.where(torch.rand(shape, dtype=torch.float64, **on) < 0.5, 2.0**-6, 2.0**-14)
        return sign * normal * torch.rand(shape, dtype=torch.float64, **on)
    # fp8-midpoints: halfway between two neighbouring e4m3fn values below 448 (k + 1/2 of 8 steps per binade)
    exponent = torch.randint(-6, 8, shape, **on).to(torch.float64)  # binades 2^-6 .. 2^7 (up to 256)
    step = torch.randint(0, 8, shape, **on).to(torch.float64)
    ties = sign * torch.exp2(exponent) * (1 + (step + 0.5) / 8)
    if shape:
        at = torch.arange(shape[-1], device=x.device) % TIE_PERIOD == 0
        ties = torch.where(at, sign * E4M3_LARGEST, ties)
    return ties
