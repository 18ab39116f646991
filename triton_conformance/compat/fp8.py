"""fp8 casts under the interpreter: round to nearest even, saturating as the GPU does.

triton 3.9's interpreter converts floats to ``tl.float8e4nv`` / ``tl.float8e5``
by truncating the significand and adding the first dropped bit, inside the
masked mantissa field: a value just below a power of two loses its carry into
the exponent (-127.99 becomes -64, not -128), ties round away from zero
(-336 becomes -352, not -320), and values past the largest finite wrap into
NaN or garbage.  Decoding e4m3fn's NaN (0x7F) gives 480.

On NVIDIA (sm_89 and later) triton lowers both casts from fp32 and fp16 to
``cvt.rn.satfinite.{e4m3,e5m2}x2``: round to nearest even, a finite value
past the largest finite (448, 57344) and an infinity saturate to it with
their sign, NaN stays NaN.  This shim computes exactly that for fp16, fp32
and fp64 sources (and bf16 through the bf16 shim's fp32), honours
``fp_downcast_rounding="rtz"`` (toward zero, then saturated), and decodes
fp8 to fp16, fp32 and fp64 exactly, NaN and e5m2's infinities included.
The encoders are plain numpy, so the oracles quantize with the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["FP8_FORMATS", "Fp8Format", "apply", "decode", "encode"]


@dataclass(frozen=True, slots=True)
class Fp8Format:
    """An 8-bit float format: its mantissa bits, exponent bias, largest finite value, and whether its
    all-ones exponent holds infinities (e5m2) or is an ordinary binade with one NaN (e4m3fn)."""

    name: str
    mantissa_bits: int
    bias: int
    largest: float
    has_inf: bool

    @property
    def min_exponent(self) -> int:
        return 1 - self.bias


FP8_FORMATS = {
    "float8_e4m3fn": Fp8Format("float8_e4m3fn", 3, 7, 448.0, has_inf=False),
    "float8_e5m2": Fp8Format("float8_e5m2", 2, 15, 57344.0, has_inf=True),
}


def round_values(values: np.ndarray, fmt: Fp8Format, *, saturate: bool = True,
                 toward_zero: bool = False) -> np.ndarray:
    """``values`` rounded to ``fmt``'s grid, as float64: to nearest even (or toward zero); past the largest
    finite value, saturated to it (``saturate``) or infinite (NaN for a format without infinities)."""
    v = np.asarray(values, dtype=np.float64)
    a = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.floor(np.log2(np.where(a > 0, a, 1.0)))
        quantum = np.exp2(np.maximum(exponent, fmt.min_exponent) - fmt.mantissa_bits)
        steps = a / quantum  # exact: a power-of-two scaling
        r = (np.trunc(steps) if toward_zero else np.round(steps)) * quantum  # np.round: halves to even
    r = np.where(np.isfinite(a), r, a)
    past = r > fmt.largest
    if saturate or toward_zero:
        r = np.where(past, fmt.largest, r)  # infinities too: satfinite keeps only NaN
    else:
        r = np.where(past, np.inf if fmt.has_inf else np.nan, r)
    return np.where(np.isnan(v), np.nan, np.copysign(r, v))


def encode(values: np.ndarray, fmt: Fp8Format, *, saturate: bool = True, toward_zero: bool = False) -> np.ndarray:
    """Float values -> ``fmt``'s bit patterns (uint8), rounded as :func:`round_values` says."""
    r = round_values(values, fmt, saturate=saturate, toward_zero=toward_zero)
    sign = np.where(np.signbit(r), 0x80, 0).astype(np.uint8)
    a = np.abs(r)
    finite = np.isfinite(a) & (a > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.floor(np.log2(np.where(finite, a, 1.0)))
        normal = exponent >= fmt.min_exponent
        field = np.where(normal, exponent + fmt.bias, 0)
        mantissa = np.where(normal, (a / np.exp2(exponent) - 1.0), a / np.exp2(fmt.min_exponent)) \
            * 2 ** fmt.mantissa_bits
    bits = np.where(finite, field * 2 ** fmt.mantissa_bits + np.round(mantissa), 0)
    ones = (2 ** (7 - fmt.mantissa_bits) - 1) << fmt.mantissa_bits  # the all-ones exponent field
    bits = np.where(np.isinf(a), ones, bits)
    bits = np.where(np.isnan(a), 0x7F, bits)
    return (bits.astype(np.uint8) | sign).reshape(np.shape(values))


def decode(bits: np.ndarray, fmt: Fp8Format) -> np.ndarray:
    """``fmt`` bit patterns (uint8) -> their float32 values (exact)."""
    b = np.asarray(bits).astype(np.uint8).astype(np.int32)
    m = fmt.mantissa_bits
    field = (b >> m) & ((1 << (7 - m)) - 1)
    mantissa = b & ((1 << m) - 1)
    magnitude = np.where(field > 0, (1.0 + mantissa / 2.0 ** m) * np.exp2(field - fmt.bias),
                         mantissa / 2.0 ** m * np.exp2(fmt.min_exponent))
    top = field == (1 << (7 - m)) - 1
    if fmt.has_inf:
        magnitude = np.where(top, np.where(mantissa == 0, np.inf, np.nan), magnitude)
    else:
        magnitude = np.where(top & (mantissa == (1 << m) - 1), np.nan, magnitude)
    return np.where(b & 0x80, -magnitude, magnitude).astype(np.float32)


def apply(patch: Patch, target: TargetDevice) -> None:
    import triton.language as tl
    from triton._C.libtriton import ir as _ir
    from triton.runtime import interpreter as interp

    TensorHandle = interp.TensorHandle
    B = interp.InterpreterBuilder
    formats = {tl.float8e4nv: FP8_FORMATS["float8_e4m3fn"], tl.float8e5: FP8_FORMATS["float8_e5m2"]}
    plain = (tl.float16, tl.float32, tl.float64)
    orig = B.create_fp_to_fp

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if d in formats and s in plain:
            toward_zero = rounding_mode == _ir.ROUNDING_MODE.RTZ
            return TensorHandle(encode(src.data, formats[d], toward_zero=toward_zero), d)
        if s in formats and d in plain:
            return TensorHandle(decode(src.data, formats[s]).astype(interp._get_np_dtype(d)), d)
        if s in formats and d == tl.bfloat16:  # exact in fp32, then the bf16 cast (the bf16 shim's, if applied)
            return self.create_fp_to_fp(TensorHandle(decode(src.data, formats[s]), tl.float32), dst_type,
                                        _ir.ROUNDING_MODE.RTNE)
        return orig(self, src, dst_type, rounding_mode)

    patch.set(B, "create_fp_to_fp", create_fp_to_fp)
