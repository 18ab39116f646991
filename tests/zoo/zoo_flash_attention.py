"""Buggy FlashAttention forwards.  Each claims the contract of the
``kernels_under_test.flash_attention`` subject it mutates."""

import torch
import triton
import triton.language as tl

from kernels_under_test.flash_attention import (
    attention_oracle,
    causal_attention_oracle,
    check_flash_args,
    flash_contract,
)
from triton_conformance import subject

BUGS = [
    ("zoo_flash_missing_rescale", "layout:contiguous", "wrong", "mismatch"),
    ("zoo_flash_causal_off_by_one", "layout:contiguous", "wrong", "nan-mismatch"),
]

# %%
# The accumulator is not rescaled
# -------------------------------


@triton.jit
def flash_kernel_no_rescale(
    q_ptr,  # *Pointer* to q (B, M, D)
    k_ptr,  # *Pointer* to k (B, N, D)
    v_ptr,  # *Pointer* to v (B, N, D)
    out_ptr,  # *Pointer* to the output (B, M, D)
    stride_qb, stride_qm, stride_qd,  # Strides of q
    stride_kb, stride_kn, stride_kd,  # Strides of k
    stride_vb, stride_vn, stride_vd,  # Strides of v
    stride_ob, stride_om, stride_od,  # Strides of the output
    M, N, D,  # Sizes
    sm_scale,  # Score scale
    BLOCK_M: tl.constexpr,  # Queries per program
    BLOCK_N: tl.constexpr,  # Keys per step
    BLOCK_D: tl.constexpr,  # Padded head dim
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32
):
    pid_m = tl.program_id(axis=0)
    b = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < M
    mask_d = offs_d < D
    q = tl.load(q_ptr + b * stride_qb + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=mask_m[:, None] & mask_d[None, :], other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start_n in range(0, N, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        kt = tl.load(k_ptr + b * stride_kb + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                     mask=mask_n[None, :] & mask_d[:, None], other=0.0)
        v = tl.load(v_ptr + b * stride_vb + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=mask_n[:, None] & mask_d[None, :], other=0.0)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale
        s = tl.where(mask_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)  # BUG: acc * alpha[:, None]
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + b * stride_ob + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


@subject(**flash_contract(attention_oracle), name="zoo_flash_missing_rescale",
         xfail="l_i is rescaled by alpha when the max grows, but acc is not")
def zoo_flash_missing_rescale(q, k, v, sm_scale):
    """Bug: the accumulator keeps terms exponentiated against a stale max (right only for N <= 32)."""
    check_flash_args(q, k, v, sm_scale, "zoo_flash_missing_rescale")
    B, M, D = q.shape
    N = k.shape[1]
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    flash_kernel_no_rescale[(triton.cdiv(M, 32), B)](
        q, k, v, out,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        M, N, D, float(sm_scale),
        BLOCK_M=32, BLOCK_N=32, BLOCK_D=max(16, triton.next_power_of_2(D)),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out


# %%
# Causal mask off by one
# ----------------------


@triton.jit
def flash_kernel_causal_strict(
    q_ptr,  # *Pointer* to q (B, M, D)
    k_ptr,  # *Pointer* to k (B, N, D)
    v_ptr,  # *Pointer* to v (B, N, D)
    out_ptr,  # *Pointer* to the output (B, M, D)
    stride_qb, stride_qm, stride_qd,  # Strides of q
    stride_kb, stride_kn, stride_kd,  # Strides of k
    stride_vb, stride_vn, stride_vd,  # Strides of v
    stride_ob, stride_om, stride_od,  # Strides of the output
    M, N, D,  # Sizes
    sm_scale,  # Score scale
    BLOCK_M: tl.constexpr,  # Queries per program
    BLOCK_N: tl.constexpr,  # Keys per step
    BLOCK_D: tl.constexpr,  # Padded head dim
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32
):
    pid_m = tl.program_id(axis=0)
    b = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < M
    mask_d = offs_d < D
    q = tl.load(q_ptr + b * stride_qb + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=mask_m[:, None] & mask_d[None, :], other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        kt = tl.load(k_ptr + b * stride_kb + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                     mask=mask_n[None, :] & mask_d[:, None], other=0.0)
        v = tl.load(v_ptr + b * stride_vb + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=mask_n[:, None] & mask_d[None, :], other=0.0)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale
        valid = mask_n[None, :] & (offs_n[None, :] < offs_m[:, None])  # BUG: j <= i
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + b * stride_ob + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


@subject(**flash_contract(causal_attention_oracle, causal=True), name="zoo_flash_causal_off_by_one",
         xfail="causal mask j < i instead of j <= i: a query never sees its own key, row 0 is NaN")
def zoo_flash_causal_off_by_one(q, k, v, sm_scale):
    """Bug: strict inequality in the causal mask; query 0 sees no key at all."""
    check_flash_args(q, k, v, sm_scale, "zoo_flash_causal_off_by_one")
    B, M, D = q.shape
    N = k.shape[1]
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    flash_kernel_causal_strict[(triton.cdiv(M, 32), B)](
        q, k, v, out,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        M, N, D, float(sm_scale),
        BLOCK_M=32, BLOCK_N=32, BLOCK_D=max(16, triton.next_power_of_2(D)),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out
