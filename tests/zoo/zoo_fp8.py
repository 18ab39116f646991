"""Buggy fp8 quantizers.  Each claims the contract of the ``kernels_under_test.fp8_quant`` subject it mutates."""

import triton
import triton.language as tl

from kernels_under_test.fp8_matmul import BLOCK_SCALED_CONTRACT, launch_block_scaled
from kernels_under_test.fp8_quant import (
    GROUP_QUANT_CONTRACT,
    STATIC_E5M2_CONTRACT,
    launch_group_quant,
    launch_static_e5m2,
)
from triton_conformance import subject

BUGS = [
    ("zoo_fp8_group_quant_zero_amax", "values:zero-blocks", "wrong", "nan-mismatch"),
    ("zoo_fp8_group_quant_toward_zero", "values:fp8-ties", "wrong", "mismatch"),
    ("zoo_fp8_static_e5m2_saturates", "values:fp8-overflow", "wrong", "nan-mismatch"),
    ("zoo_fp8_block_matmul_scale_by_step", "layout:contiguous", "unsafe", "poisoned-read"),  # past the scales
]

# %%
# A scale made from amax alone
# ----------------------------


@triton.jit
def group_quant_kernel_no_eps(
    x_ptr, q_ptr, s_ptr,  # *Pointers* to x (M, K), the fp8 q (M, K) and the fp32 scales (M, groups)
    K, n_groups,  # Row length, groups per row
    stride_xm, stride_xk, stride_qm, stride_qk, stride_sm, stride_sg,  # Strides, in elements
    eps,  # The smallest amax a scale should be made from (unused: the bug)
    FP8_MAX: tl.constexpr, GROUP: tl.constexpr, GROUPS_PER_PROGRAM: tl.constexpr,
):
    row = tl.program_id(axis=0)
    groups = tl.program_id(axis=1) * GROUPS_PER_PROGRAM + tl.arange(0, GROUPS_PER_PROGRAM)
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = cols < K
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xk, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    scale = amax / FP8_MAX  # BUG: an all-zero group gets scale 0, and 0 / 0 is NaN
    q = (x / scale[:, None]).to(q_ptr.dtype.element_ty)
    tl.store(q_ptr + row * stride_qm + cols * stride_qk, q, mask=mask)
    tl.store(s_ptr + row * stride_sm + groups * stride_sg, scale, mask=groups < n_groups)


@subject(**GROUP_QUANT_CONTRACT, name="zoo_fp8_group_quant_zero_amax",
         xfail="the scale is amax / 448 with no eps: an all-zero group divides 0 by 0")
def zoo_fp8_group_quant_zero_amax(x):
    """Bug: right on every group with a nonzero element; NaN for a group of zeros."""
    return launch_group_quant(group_quant_kernel_no_eps, x, "zoo_fp8_group_quant_zero_amax")


# %%
# Rounding toward zero
# --------------------


@triton.jit
def group_quant_kernel_truncating(
    x_ptr, q_ptr, s_ptr,  # *Pointers* to x (M, K), the fp8 q (M, K) and the fp32 scales (M, groups)
    K, n_groups,  # Row length, groups per row
    stride_xm, stride_xk, stride_qm, stride_qk, stride_sm, stride_sg,  # Strides, in elements
    eps,  # The smallest amax a scale is made from
    FP8_MAX: tl.constexpr, GROUP: tl.constexpr, GROUPS_PER_PROGRAM: tl.constexpr,
):
    row = tl.program_id(axis=0)
    groups = tl.program_id(axis=1) * GROUPS_PER_PROGRAM + tl.arange(0, GROUPS_PER_PROGRAM)
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = cols < K
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xk, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    scale = tl.maximum(amax, eps) / FP8_MAX
    y = x / scale[:, None]
    # BUG: clearing the 20 mantissa bits e4m3 has no room for "makes the cast exact": it rounds toward zero.
    y = (y.to(tl.int32, bitcast=True) & -1048576).to(tl.float32, bitcast=True)
    tl.store(q_ptr + row * stride_qm + cols * stride_qk, y.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row * stride_sm + groups * stride_sg, scale, mask=groups < n_groups)


@subject(**GROUP_QUANT_CONTRACT, name="zoo_fp8_group_quant_toward_zero",
         xfail="truncates the fp32 quotient's mantissa before the cast: rounds toward zero, not to nearest even")
def zoo_fp8_group_quant_toward_zero(x):
    """Bug: every value that is not already on the e4m3 grid loses up to a whole step."""
    return launch_group_quant(group_quant_kernel_truncating, x, "zoo_fp8_group_quant_toward_zero")


# %%
# An e5m2 cast that saturates where infinities are declared
# --------------------------------------------------------


@triton.jit
def static_e5m2_kernel_saturating(
    x_ptr,  # *Pointer* to x (N,), contiguous
    q_ptr,  # *Pointer* to the e5m2 output (N,)
    n,  # Number of elements
    scale,  # x is divided by it
    BLOCK: tl.constexpr,  # Elements per program
):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask, other=0.0) / scale
    tl.store(q_ptr + offs, y.to(tl.float8e5), mask=mask)  # BUG: the GPU's cast saturates at 57344


@subject(**STATIC_E5M2_CONTRACT, name="zoo_fp8_static_e5m2_saturates",
         xfail="relies on the cast, which saturates (cvt.rn.satfinite): 57344 where the contract says inf")
def zoo_fp8_static_e5m2_saturates(x, scale):
    """Bug: right below 61440; past it, 57344 instead of an infinity."""
    return launch_static_e5m2(static_e5m2_kernel_saturating, x, scale, "zoo_fp8_static_e5m2_saturates")


# %%
# A block-scaled GEMM that indexes its scales by the step, not the group
# --------------------------------------------------------------------


@triton.jit
def block_scaled_matmul_kernel_by_step(
    a_ptr, b_ptr, c_ptr,  # *Pointers* to a (M, K), b (K, N) and the fp32 output c (M, N)
    as_ptr, bs_ptr,  # *Pointers* to a's scales (M, cdiv(K, GROUP_K)) and b's (cdiv(K, GROUP_K), cdiv(N, GROUP_N))
    M, N, K,  # Problem size
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,  # Strides, in elements
    stride_asm, stride_ask, stride_bsk, stride_bsn,  # Strides of the scales
    GROUP_K: tl.constexpr, GROUP_N: tl.constexpr,  # Elements one scale covers along K and N
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,  # Tile and step (BLOCK_K < GROUP_K here)
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start_k in range(0, K, BLOCK_K):
        offs_k = start_k + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        group = start_k // BLOCK_K  # BUG: the step, not the group: right only while BLOCK_K == GROUP_K
        a_s = tl.load(as_ptr + offs_m * stride_asm + group * stride_ask, mask=mask_m, other=0.0)
        b_s = tl.load(bs_ptr + group * stride_bsk + (offs_n // GROUP_N) * stride_bsn, mask=mask_n, other=0.0)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
             mask=mask_m[:, None] & mask_n[None, :])


@subject(**BLOCK_SCALED_CONTRACT, name="zoo_fp8_block_matmul_scale_by_step",
         xfail="steps K by 64 but indexes the 128-wide scale groups by k // BLOCK_K: past K=64 the wrong scales")
def zoo_fp8_block_matmul_scale_by_step(a, b, a_scale, b_scale):
    """Bug: a smaller K step (tuned for speed) with the scale index still written for the group size."""
    return launch_block_scaled(block_scaled_matmul_kernel_by_step, a, b, a_scale, b_scale,
                               "zoo_fp8_block_matmul_scale_by_step", block_k=64)
