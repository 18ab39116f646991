"""
fp8 quantization
================

Two quantizers of the kind serving stacks run before an fp8 GEMM:

* :func:`per_token_group_quant_fp8` splits each row of ``x`` (M, K) into groups of
  ``GROUP`` elements along K and gives each group its own fp32 scale,
  ``max(amax, eps) / 448``, then stores ``x / scale`` as ``float8_e4m3fn``.  The
  ``eps`` keeps an all-zero group's scale positive: no 0 / 0.
* :func:`static_quant_e5m2` divides by a given scale and stores ``float8_e5m2``,
  declared to make infinities past the largest finite value (57344), as torch's cast
  does.  The GPU's fp32 -> e5m2 conversion saturates (``cvt.rn.satfinite``), so the
  kernel writes the infinities itself.

Both are judged bit for bit against :mod:`triton_conformance.oracles.quantization`.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Scalar, Tensor, Tolerance, subject
from triton_conformance.oracles.quantization import group_quantized, static_quantized

# %%
# Per-token-group quantization
# ----------------------------


@triton.jit
def group_quant_kernel(
    x_ptr,  # *Pointer* to x (M, K)
    q_ptr,  # *Pointer* to the fp8 output q (M, K)
    s_ptr,  # *Pointer* to the fp32 scales (M, cdiv(K, GROUP))
    K,  # Row length
    n_groups,  # Groups per row
    stride_xm, stride_xk,  # Strides of x, in elements
    stride_qm, stride_qk,  # Strides of q
    stride_sm, stride_sg,  # Strides of the scales
    eps,  # The smallest amax a scale is made from
    FP8_MAX: tl.constexpr,  # Largest finite value of q's format
    GROUP: tl.constexpr,  # Elements per group
    GROUPS_PER_PROGRAM: tl.constexpr,  # Groups of one row each program quantizes
):
    row = tl.program_id(axis=0)
    groups = tl.program_id(axis=1) * GROUPS_PER_PROGRAM + tl.arange(0, GROUPS_PER_PROGRAM)
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = cols < K
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xk, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    # tl.math.div_rn: IEEE division.  A plain ``/`` on fp32 is approximate on CUDA (div.full.f32), which moves
    # a value at an fp8 rounding tie to the wrong side (the H200 nightly caught -31 stored as -30).
    scale = tl.math.div_rn(tl.maximum(amax, eps), FP8_MAX)  # an all-zero group gets eps / FP8_MAX, never 0
    q = tl.math.div_rn(x, scale[:, None]).to(q_ptr.dtype.element_ty)
    tl.store(q_ptr + row * stride_qm + cols * stride_qk, q, mask=mask)
    tl.store(s_ptr + row * stride_sm + groups * stride_sg, scale, mask=groups < n_groups)


GROUP, GROUPS_PER_PROGRAM, EPS = 32, 8, 1e-10
GROUP_QUANT_CONTRACT = dict(
    family="fp8_group_quant",
    inputs={"x": Tensor(("M", "K"), dtypes=("float32", "float16"), layouts="any")},
    dims={"M": Dim(1, 64), "K": Dim(1, 1024)},
    oracle=lambda x: group_quantized(x, group=GROUP, dtype="float8_e4m3fn", eps=EPS),
    tolerance=Tolerance(rtol=0.0, atol=0.0),  # fp8 values and fp32 scales bit for bit
    values=("zero-blocks", "fp8-subnormal", "fp8-ties"),
)


def check_quant_args(x, fn, contract, dtypes=(torch.float32, torch.float16)):
    """Raise TypeError/ValueError unless ``x`` is a tensor of one of ``dtypes`` with the contract's dims."""
    symbols = contract["inputs"]["x"].shape
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x is a {type(x).__name__}, expected a torch.Tensor")
    if x.dtype not in dtypes:
        raise TypeError(f"{fn}: x.dtype={x.dtype}, expected one of {dtypes}")
    if x.dim() != len(symbols):
        raise ValueError(f"{fn}: x.dim()={x.dim()}, expected a {len(symbols)}-D tensor")
    for sym, n in zip(symbols, x.shape):
        dim = contract["dims"][sym]
        if not dim.admits(n):
            raise ValueError(f"{fn}: {sym}={n}, expected {dim.min} <= {sym} <= {dim.max}")


def launch_group_quant(kernel, x, fn):
    """Allocate q and the scales, and run ``kernel`` (the group quantizer or a variant of it) over x."""
    check_quant_args(x, fn, GROUP_QUANT_CONTRACT)
    M, K = x.shape
    n_groups = triton.cdiv(K, GROUP)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, n_groups), dtype=torch.float32, device=x.device)
    grid = (M, triton.cdiv(n_groups, GROUPS_PER_PROGRAM))
    kernel[grid](x, q, s, K, n_groups, x.stride(0), x.stride(1), q.stride(0), q.stride(1), s.stride(0), s.stride(1),
                 EPS, FP8_MAX=448.0, GROUP=GROUP, GROUPS_PER_PROGRAM=GROUPS_PER_PROGRAM)
    return q, s


@subject(**GROUP_QUANT_CONTRACT)
def per_token_group_quant_fp8(x):
    """(q, scales): x in groups of 32 along K, each scaled to e4m3fn's range by its own fp32 scale."""
    return launch_group_quant(group_quant_kernel, x, "per_token_group_quant_fp8")


# %%
# Static e5m2 quantization, making infinities
# -------------------------------------------


@triton.jit
def static_e5m2_kernel(
    x_ptr,  # *Pointer* to x (N,), contiguous
    q_ptr,  # *Pointer* to the e5m2 output (N,)
    n,  # Number of elements
    scale,  # x is divided by it
    BLOCK: tl.constexpr,  # Elements per program
):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.math.div_rn(tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32), scale)  # IEEE division, as above
    bits = y.to(tl.float8e5).to(tl.uint8, bitcast=True).to(tl.int32)
    # The cast saturates at 57344 on the GPU; a value that rounds past it is an infinity here.
    overflow = tl.abs(y) >= 61440.0  # the midpoint between 57344 and 2^16
    bits = tl.where(overflow, (bits & 0x80) | 0x7C, bits)
    tl.store(q_ptr + offs, bits.to(tl.uint8).to(tl.float8e5, bitcast=True), mask=mask)


STATIC_E5M2_CONTRACT = dict(
    family="fp8_static_quant",
    inputs={"x": Tensor(("N",), dtypes=("float32",))},
    dims={"N": Dim(1, 8192)},
    scalars={"scale": Scalar(0.5, 2.0)},
    oracle=lambda x, scale: static_quantized(x, scale, dtype="float8_e5m2", saturate=False),
    tolerance=Tolerance(rtol=0.0, atol=0.0),
    values=("fp8-overflow", "fp8-subnormal", "inf", "nan"),
)
BLOCK = 1024


def launch_static_e5m2(kernel, x, scale, fn):
    check_quant_args(x, fn, STATIC_E5M2_CONTRACT, dtypes=(torch.float32,))
    if not x.is_contiguous():
        raise ValueError(f"{fn}: x.stride()={x.stride()}, expected a contiguous x")
    q = torch.empty(x.shape, dtype=torch.float8_e5m2, device=x.device)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, q, x.numel(), scale, BLOCK=BLOCK)
    return q


@subject(**STATIC_E5M2_CONTRACT)
def static_quant_e5m2(x, scale):
    """x / scale as e5m2, rounded to nearest even; past 57344 it is an infinity."""
    return launch_static_e5m2(static_e5m2_kernel, x, scale, "static_quant_e5m2")


# %%
# Demo
# ----

if __name__ == "__main__":
    x = torch.randn(4, 100)
    q, s = per_token_group_quant_fp8(x=x)
    ref_q, ref_s = group_quantized(x.double(), group=GROUP)
    print("q differs in", int((q.double() != ref_q).sum()), "elements; scales in", int((s.double() != ref_s).sum()))
