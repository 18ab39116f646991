"""Oracles for quantizing kernels: the fp8 values and scales a kernel must produce, bit for bit.

A quantizer's outputs are exact functions of its input once the rounding rule and the
amax-to-scale formula are fixed, so its oracle computes them with the same fp32 steps the
kernel is declared to take (amax, ``max(amax, eps) / largest``, ``x / scale``) and the
declared cast: round to nearest even, then saturated to the largest finite value (as
``cvt.rn.satfinite`` does on NVIDIA) or not (past it e5m2 makes an infinity, e4m3fn a NaN,
as torch's cast does).  Declare such a subject with ``Tolerance(rtol=0, atol=0)``.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from triton_conformance.model.scales import Scale

__all__ = ["dequantized", "fp8_cast", "group_quantized", "static_quantized"]


def fp8_cast(y: torch.Tensor, dtype: str, *, saturate: bool) -> torch.Tensor:
    """fp32 ``y`` cast to fp8 ``dtype`` (a name) by round to nearest even, saturating or not; as float64."""
    fp8 = getattr(torch, dtype)
    if saturate:
        largest = float(torch.finfo(fp8).max)
        y = y.clamp(-largest, largest)  # NaN stays NaN; infinities saturate too
    return y.to(fp8).to(torch.float64)


def group_quantized(x: torch.Tensor, *, group: int, dtype: str = "float8_e4m3fn", eps: float = 1e-10,
                    saturate: bool = True, scale_by: str = "divide",
                    quantize_by: str = "divide") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token-group quantization of a 2-D ``x`` along its last dim, in groups of ``group`` (the last
    one partial where ``group`` does not divide it): ``(q, scales)``, ``scales[m, g] = max(amax, eps) /
    largest`` in fp32 and ``q = cast(x / scale)``.

    ``scale_by`` and ``quantize_by`` say how each fp32 quotient is formed, as kernels differ there:
    ``"divide"`` (IEEE division) or ``"reciprocal"`` (times the fp32 reciprocal of the divisor, rounded
    once: vLLM's ``amax * (1.0 / fp8_max)``, SGLang's ``y * (1.0 / y_s)``)."""
    for name, value in (("scale_by", scale_by), ("quantize_by", quantize_by)):
        if value not in QUOTIENTS:
            raise ValueError(f"group_quantized: {name}={value!r}, expected one of {QUOTIENTS}")
    x32 = x.to(torch.float32)
    rows, width = x32.shape
    groups = -(-width // group)
    padded = torch.zeros((rows, groups * group), dtype=torch.float32, device=x.device)
    padded[:, :width] = x32
    amax = padded.abs().view(rows, groups, group).amax(dim=-1)
    largest = float(torch.finfo(getattr(torch, dtype)).max)
    scales = _quotient(torch.maximum(amax, torch.tensor(eps, dtype=torch.float32)), largest, scale_by)
    q = fp8_cast(_quotient(x32, scales.repeat_interleave(group, dim=1)[:, :width], quantize_by), dtype,
                 saturate=saturate)
    return q, scales.to(torch.float64)


QUOTIENTS = ("divide", "reciprocal")


def _quotient(a: torch.Tensor, b, how: str) -> torch.Tensor:
    """fp32 ``a / b``: IEEE division (``"divide"``), or ``a`` times ``b``'s fp32 reciprocal
    (``"reciprocal"``), each product rounded once to fp32 (exact in float64: 24-bit by 24-bit)."""
    if how == "divide":
        return _ieee_divide(a, b)
    b32 = b.to(torch.float32) if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=torch.float32)
    inverse = _ieee_divide(torch.ones_like(b32), b32)
    return (a.to(torch.float64) * inverse.to(torch.float64)).to(torch.float32)


def _ieee_divide(a: torch.Tensor, b) -> torch.Tensor:
    """``a / b`` for fp32 ``a`` and ``b``, correctly rounded to fp32 (IEEE division) whatever torch's own
    fp32 division does on this device: the float64 quotient rounded to fp32 is the correctly rounded one
    (a double rounding through 53 bits is innocuous for a quotient of 24-bit values)."""
    b = b.to(torch.float64) if isinstance(b, torch.Tensor) else float(torch.tensor(b, dtype=torch.float32))
    return (a.to(torch.float64) / b).to(torch.float32)


def static_quantized(x: torch.Tensor, scale: float, *, dtype: str, saturate: bool) -> torch.Tensor:
    """Quantization by a given scale: ``cast(x / scale)`` in fp32."""
    return fp8_cast(_ieee_divide(x.to(torch.float32), scale), dtype, saturate=saturate)


def dequantized(declared: Mapping[str, Any], inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``inputs`` (float64 copies) with every input that a declared :class:`~..model.scales.Scale` scales
    replaced by its dequantized values: times (or divided by) its scale, broadcast over each block."""
    out = dict(inputs)
    for name, spec in declared.items():
        if not isinstance(spec, Scale) or name not in inputs or spec.of not in inputs:
            continue
        owner, scale = inputs[spec.of], inputs[name].to(torch.float64)
        for dim, block in enumerate(spec.block):
            size = owner.shape[dim]
            scale = scale.expand(*scale.shape[:dim], size, *scale.shape[dim + 1:]) if block is None else \
                scale.repeat_interleave(block, dim=dim).narrow(dim, 0, size)
        out[spec.of] = owner * scale if spec.applies == "multiply" else owner / scale
    return out
