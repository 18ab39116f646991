"""The tolerance policy: how far a kernel may stray from the float64 oracle.

An element passes when ``|y - ref| <= atol + rtol * |ref|`` with

- ``rtol = R * u_out + C * u_acc * sqrt(K)``
- ``atol = C * u_acc * sqrt(K) * scale + tiny_out``

where ``u_out`` is the unit roundoff of the output dtype (the final rounding),
``u_acc`` that of the accumulation dtype the subject declares (fp32 unless it
says otherwise: ``accumulate="float16"``, ``"input"`` for the example's input dtype,
or a mapping such as ``{"float16": "float16", "float32": "float32"}``), ``K`` the size of the reduced dim (1 when none is named),
``scale`` the magnitude rounding errors grow with: the subject's
``error_scale`` if it declares one (``|A| @ |x|`` for a GEMV, the classic
componentwise bound), else the largest finite ``|ref|`` (so cancellation in a
sum is not blamed on the kernel), ``tiny_out`` the smallest normal number of the output dtype
(flush-to-zero is allowed), at least 2^5 of fp32's below float64 (:data:`UNDERFLOW_FLOOR`: fp32
math may flush a result that close to zero), ``C = 8`` and ``R = 4``.

``R`` is smaller than ``C`` because the two terms are different kinds of error.  The accumulation's
roundings are many and add up as a random walk: ``sqrt(K)`` (and the magnitudes' own depths) is their
probabilistic size, and ``C`` its safety factor.  The output's own rounding is one deterministic
rounding, at most ``u_out * |ref|``; ``R = 4`` allows two of them (a sum rounded, then divided in the
output dtype) with a factor 2 to spare, and no more: a kernel that rounds its output through a
narrower dtype (an fp16 residual stored through bf16, 4 fp16 ulps) fails (``docs/tolerance.md``).

The inputs handed to the oracle are the kernel's own inputs, already rounded
to their dtype, so input rounding is not part of the budget.

**Cancellation.**  Where the terms of a result cancel, the rule above is too
tight: a sum's error is ``u * sum|x|``, not ``u * |sum x|``.  An element that
fails it is judged again under :meth:`Bound.conditioned`: the larger of the
rule above and ``C * u_acc * m``, ``m`` the magnitude of the terms behind the
element, from a running error analysis of the oracle itself
(:mod:`.magnitude`; each sum and product carries its own depth there, so no
``sqrt(K)``).  ``docs/tolerance.md`` has the design and its calibration.

**tf32.**  On CUDA, ``tl.dot`` on fp32 inputs defaults to tf32: each input is
rounded to a 10-bit mantissa (``u_tf32 = 2^-11``) before the products are
accumulated in fp32.  A subject whose contract declares
``dot_precision="tf32"`` gets, on CUDA and for fp32 inputs only,

- ``rtol += C * 2 * u_tf32`` and ``atol += C * 2 * u_tf32 * scale``

(each product carries the rounding of both its factors; summed over K with
independent signs, it stays near ``2 * u_tf32`` times the output's scale).
The interpreter has no tf32, and ``dot_precision="ieee"`` or None adds nothing.

**fp8.**  ``float8_e4m3fn`` and ``float8_e5m2`` have ``u = 2^-4`` and ``2^-3``.  An fp8 GEMM's inputs
are the kernel's own fp8 values (dequantized by the oracle), so their rounding is not in the budget;
its products are accumulated in fp32 (``u_acc = 2^-24``), except on CUDA under
``dot_precision="fp8-fast-accumulate"``, where Hopper's tensor-core accumulator keeps about 14 bits
and truncates (``u_fast = 2^-13``, :data:`FP8_FAST_ACCUMULATION_UNIT_ROUNDOFF`).  Truncation errors all
lean one way and do not cancel, so the probabilistic ``C * u * sqrt(K)`` does not hold (the H200 showed
errors growing like K); the accumulation term is then the larger of it and Higham's worst case for a
recursive sum, ``gamma_K = K * u_fast`` (no safety factor: it is the worst case).  A quantizer's outputs are
exact functions of its input (:mod:`.quantization`): declare ``Tolerance(rtol=0, atol=0)``.

A subject may override ``rtol``/``atol``, or add the FlashAttention rule:
``|y - ref| <= atol + rtol * |ref| + k * max|ref_lowp - ref| + floor``, where
``ref_lowp`` is the oracle evaluated in the input dtype: the kernel may be off
by k times the worst error torch makes in the input dtype (kernels that round
intermediates, such as attention probabilities, before a dot need it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping

__all__ = ["FP8_FAST_ACCUMULATION_UNIT_ROUNDOFF", "HAS_INFINITY", "LARGEST_FINITE", "ROUNDING_FACTOR", "SAFETY_FACTOR",
           "TF32_UNIT_ROUNDOFF", "UNIT_ROUNDOFF", "Bound", "accumulation_dtype", "default_bound"]

UNIT_ROUNDOFF = {
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
    "float32": 2.0**-24,
    "float64": 2.0**-53,
    # 8-bit floats: 3 and 2 mantissa bits.
    "float8_e4m3fn": 2.0**-4,
    "float8_e5m2": 2.0**-3,
}
SMALLEST_NORMAL = {
    "float16": 2.0**-14,
    "bfloat16": 2.0**-126,
    "float32": 2.0**-126,
    "float64": 2.0**-1022,
    "float8_e4m3fn": 2.0**-6,
    "float8_e5m2": 2.0**-14,
}
# Largest finite values; e4m3fn has no infinity (its one NaN takes the top code), e5m2 has both.
LARGEST_FINITE = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
HAS_INFINITY = {"float8_e4m3fn": False, "float8_e5m2": True}
# A correct computation in fp32 (where kernels take exp, sigmoid, erf of fp16, bf16 and fp32 values) may
# return zero for a result within 2^5 smallest normals of it: exp saturates past |x| = 88.7, where
# |x| e^-|x| is about 22 of them (torch's bf16 silu(-89) is -0.0 on the CPU, -7.4e-38 in float64; nightly
# seeds 1379666229 and 3331058717 of the calibration).  So no output below float64 gets a smaller floor.
UNDERFLOW_FLOOR = 2.0**5 * SMALLEST_NORMAL["float32"]
SAFETY_FACTOR = 8.0
# The output's final rounding is deterministic (at most u_out * |ref|): two roundings, twice over.
ROUNDING_FACTOR = 4.0
# tf32 keeps 10 of fp32's 23 mantissa bits: round to nearest gives 2^-11.
TF32_UNIT_ROUNDOFF = 2.0**-11
# Hopper's fp8 tensor cores (wgmma) add products in an accumulator of about 14 bits that truncates
# (DeepSeek-V3's measurement): a chopped unit of 2^-13.  On the H200 the error of a one-signed fp8 dot grows
# like 2^-15.7 * K (bench/gpu/fp8_zoo.py, docs/tolerance.md): within K * 2^-13, the worst case.
FP8_FAST_ACCUMULATION_UNIT_ROUNDOFF = 2.0**-13


@dataclass(frozen=True, slots=True)
class Bound:
    """A resolved tolerance: ``atol + rtol * |ref|``, or the reference rule when ``reference_k`` is set.

    ``per_term``: what the bound allows per unit of the magnitude of the terms
    behind an element (``C * u_acc``), applied by :meth:`conditioned`
    once those magnitudes are known; 0 for a bound the subject set itself.
    ``accumulate``: the dtype ``u_acc`` is of (the precision the bound claims), "" where none applies.
    """

    rtol: float
    atol: object  # a float, or a tensor of per-element bounds
    reference_k: float | None = None
    floor: float = 0.0
    source: str = "dtype"  # where it came from: dtype policy, subject override, hook
    per_term: float = 0.0
    accumulate: str = ""

    def conditioned(self, magnitude) -> "Bound":
        """This bound, widened elementwise to ``per_term * magnitude`` where that is larger: a computation
        whose terms cancel may be off by their size, not the result's.  Elements whose magnitude is
        not finite keep this bound (an infinite allowance would check nothing)."""
        import torch

        m = magnitude.detach().to(torch.float64)
        allowance = torch.where(torch.isfinite(m), self.per_term * m, torch.zeros_like(m))
        atol = self.atol if isinstance(self.atol, (int, float)) else self.atol.detach().to(m.device, torch.float64)
        return replace(self, atol=torch.maximum(torch.as_tensor(atol, dtype=torch.float64, device=m.device),
                                                 allowance), per_term=0.0,
                       source=f"{self.source}; {self.per_term:.3g} * the terms' magnitude")

    def with_rounded_shares(self, out_dtype: str, shares) -> "Bound":
        """This bound widened by one rounding to ``out_dtype`` of each of the parts summed into an element
        (``shares``: elementwise sum_i |part_i|): ``C * u_out * shares`` more atol, as a sum of rounded
        terms allows.  A gradient reached through several outputs is such a sum (autograd adds the parts
        in the gradient's dtype; so may a kernel).  Non-finite shares add nothing."""
        import torch

        u_out = UNIT_ROUNDOFF.get(out_dtype, 0.0)
        extra = SAFETY_FACTOR * u_out * torch.nan_to_num(shares.detach().to(torch.float64), nan=0.0, posinf=0.0)
        return replace(self, atol=self.atol + extra, source=f"{self.source}, each part rounded")

    def describe(self) -> str:
        if self.reference_k is not None:
            atol = self.atol if isinstance(self.atol, (int, float)) else float(self.atol.max())
            return (f"|err| <= {atol:.3g} + {self.rtol:.3g} * |ref| + {self.reference_k:g} * "
                    f"max|oracle_in_input_dtype - oracle| + {self.floor:g} ({self.source})")
        atol = self.atol if isinstance(self.atol, (int, float)) else float(self.atol.max())
        kind = "" if isinstance(self.atol, (int, float)) else "max "
        return f"|err| <= {kind}{atol:.3g} + {self.rtol:.3g} * |ref| ({self.source})"


def accumulation_dtype(accumulate: str | Mapping[str, str], input_dtype: str | None) -> str:
    """The dtype a kernel accumulates in: ``accumulate`` itself, or for ``"input"`` or a mapping
    ``{input dtype: accumulation dtype}`` the one ``input_dtype`` gives (float32 where it gives none)."""
    if isinstance(accumulate, Mapping):
        return accumulate.get(input_dtype, "float32")
    if accumulate == "input":
        return input_dtype if input_dtype in UNIT_ROUNDOFF else "float32"
    return accumulate


def default_bound(*, out_dtype: str, accumulate: str | Mapping[str, str] = "float32", reduction: int = 1,
                  scale=1.0, tf32: bool = False, input_dtype: str | None = None,
                  fp8_fast_accumulation: bool = False) -> Bound:
    """The policy above for one output; ``scale`` is a number or an elementwise tensor.

    ``accumulate``: the accumulation dtype (``u_acc``), or ``"input"`` or a per-dtype
    mapping resolved with ``input_dtype`` (:func:`accumulation_dtype`): a kernel that
    accumulates fp16 inputs in fp16 declares it and gets fp16's ``u_acc``.
    ``tf32``: the kernel's dots round fp32 inputs to tf32 here (CUDA, fp32 inputs,
    ``dot_precision="tf32"``): widen by the tf32 term.
    ``fp8_fast_accumulation``: the kernel's dots of fp8 inputs accumulate in the tensor cores' narrower
    accumulator here (CUDA, fp8 inputs, ``dot_precision="fp8-fast-accumulate"``): ``u_acc`` is at least
    :data:`FP8_FAST_ACCUMULATION_UNIT_ROUNDOFF`.
    """
    accumulate = accumulation_dtype(accumulate, input_dtype)
    u_out = UNIT_ROUNDOFF.get(out_dtype, 0.0)
    accumulate = accumulate if accumulate in UNIT_ROUNDOFF else "float32"  # what u_acc is then of
    u_acc = UNIT_ROUNDOFF[accumulate]
    depth = math.sqrt(max(reduction, 1))
    if out_dtype not in UNIT_ROUNDOFF:  # integer / bool outputs: exact
        return Bound(rtol=0.0, atol=0.0)
    accumulation = SAFETY_FACTOR * u_acc * depth  # per unit of the output's scale
    if fp8_fast_accumulation:  # truncated partial sums: the worst case K * u_fast where it exceeds C * u * sqrt(K)
        u_acc = max(u_acc, FP8_FAST_ACCUMULATION_UNIT_ROUNDOFF)
        accumulation = u_acc * max(SAFETY_FACTOR * depth, max(reduction, 1))
    rtol = ROUNDING_FACTOR * u_out + accumulation
    floor = SMALLEST_NORMAL[out_dtype] if out_dtype == "float64" else max(SMALLEST_NORMAL[out_dtype], UNDERFLOW_FLOOR)
    atol = accumulation * scale + floor
    per_term = accumulation / depth  # the magnitudes carry their sums' sqrt(depth) themselves
    if tf32:
        rtol += SAFETY_FACTOR * 2 * TF32_UNIT_ROUNDOFF
        atol = atol + SAFETY_FACTOR * 2 * TF32_UNIT_ROUNDOFF * scale
        per_term += SAFETY_FACTOR * 2 * TF32_UNIT_ROUNDOFF
        return Bound(rtol=rtol, atol=atol, source="dtype, tf32 dot", per_term=per_term, accumulate=accumulate)
    return Bound(rtol=rtol, atol=atol, per_term=per_term, accumulate=accumulate)
