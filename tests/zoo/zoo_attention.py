"""Buggy attention kernels.  Each claims the contract of the ``kernels_under_test.attention``
subject it mutates (``attention_naive`` or ``attention_masked``)."""

import torch
import triton
import triton.language as tl

from kernels_under_test.attention import (
    BLOCK_M,
    MASKED_CONTRACT,
    MASKED_DIMS,
    NAIVE_CONTRACT,
    attention_naive_kernel,
    check_attention_args,
)
from triton_conformance import subject

BUGS = [
    ("zoo_attention_masked_nan_rows", "mask:fully-masked", "wrong", "nan-mismatch"),
    ("zoo_attention_masked_dense_mask", "mask:broadcast", "unsafe", "poisoned-read"),
    ("zoo_attention_naive_unchecked_n", "shape:beyond-range", "wrong", "mismatch"),
    ("zoo_attention_naive_exp2_without_log2e", "layout:contiguous", "wrong", "mismatch"),
]


def _check_mask(mask, q, k, fn):
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"{fn}: mask.dtype={getattr(mask, 'dtype', None)}, expected torch.bool")
    if mask.shape != (q.shape[0], q.shape[1], k.shape[1]):
        raise ValueError(f"{fn}: mask.shape={tuple(mask.shape)}, expected (B, M, N)")


# %%
# Online softmax without the -inf guards
# --------------------------------------
# The textbook recurrence, with no case for a row whose keys are all masked.


@triton.jit
def attention_masked_kernel_unguarded(
    q_ptr,  # *Pointer* to q (B, M, D)
    k_ptr,  # *Pointer* to k (B, N, D)
    v_ptr,  # *Pointer* to v (B, N, D)
    mask_ptr,  # *Pointer* to the uint8 mask (B, M, N)
    out_ptr,  # *Pointer* to the output (B, M, D)
    stride_qb, stride_qm, stride_qd,  # Strides of q
    stride_kb, stride_kn, stride_kd,  # Strides of k
    stride_vb, stride_vn, stride_vd,  # Strides of v
    stride_mb, stride_mm, stride_mn,  # Strides of the mask
    stride_ob, stride_om, stride_od,  # Strides of the output
    M, N, D,  # Sizes
    sm_scale,  # Score scale
    BLOCK_M: tl.constexpr,  # Queries per program
    BLOCK_N: tl.constexpr,  # Keys per step
    BLOCK_D: tl.constexpr,  # Padded head dim
    DENSE_MASK: tl.constexpr,  # Index the mask as a dense (B, M, N) array
    GUARD_EMPTY_ROWS: tl.constexpr,  # Shift by 0 / divide by 1 where nothing is kept
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
        if DENSE_MASK:
            # BUG (zoo_attention_masked_dense_mask): the mask's strides are assumed, not passed.
            m_off = b * M * N + offs_m[:, None] * N + offs_n[None, :]
        else:
            m_off = b * stride_mb + offs_m[:, None] * stride_mm + offs_n[None, :] * stride_mn
        keep = tl.load(mask_ptr + m_off, mask=mask_m[:, None] & mask_n[None, :], other=0) != 0
        s = tl.where(keep, tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        if GUARD_EMPTY_ROWS:
            m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_shift = m_new  # BUG (zoo_attention_masked_nan_rows): -inf - (-inf) = NaN
        alpha = tl.exp(m_i - m_shift)
        p = tl.exp(s - m_shift[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new
    if GUARD_EMPTY_ROWS:
        l_i = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_i[:, None]
    tl.store(out_ptr + b * stride_ob + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


def _masked(q, k, v, mask, sm_scale, fn, dense_mask, guard_empty_rows):
    check_attention_args(q, k, v, sm_scale, MASKED_DIMS, fn)
    _check_mask(mask, q, k, fn)
    B, M, D = q.shape
    N = k.shape[1]
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    m8 = mask.view(torch.uint8)
    attention_masked_kernel_unguarded[(triton.cdiv(M, BLOCK_M), B)](
        q, k, v, m8, out,
        *q.stride(), *k.stride(), *v.stride(), *m8.stride(), *out.stride(),
        M, N, D, float(sm_scale),
        BLOCK_M=BLOCK_M, BLOCK_N=32, BLOCK_D=max(16, triton.next_power_of_2(D)),
        DENSE_MASK=dense_mask, GUARD_EMPTY_ROWS=guard_empty_rows,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out


@subject(**MASKED_CONTRACT, name="zoo_attention_masked_nan_rows",
         xfail="no guard for all-masked tiles: fully masked rows come out NaN, the policy says zeros")
def zoo_attention_masked_nan_rows(q, k, v, mask, sm_scale):
    """Bug: exp(-inf - (-inf)) and 0/0 make fully masked rows NaN despite fully_masked="zeros"."""
    return _masked(q, k, v, mask, sm_scale, "zoo_attention_masked_nan_rows",
                   dense_mask=False, guard_empty_rows=False)


@subject(**MASKED_CONTRACT, name="zoo_attention_masked_dense_mask",
         xfail="indexes the mask as a dense (B, M, N) array, ignoring its strides")
def zoo_attention_masked_dense_mask(q, k, v, mask, sm_scale):
    """Bug: a broadcast (stride-0) or strided mask is read as if dense, past its storage."""
    return _masked(q, k, v, mask, sm_scale, "zoo_attention_masked_dense_mask",
                   dense_mask=True, guard_empty_rows=True)


# %%
# A launcher that clamps instead of rejecting
# -------------------------------------------


@subject(**NAIVE_CONTRACT, name="zoo_attention_naive_unchecked_n",
         xfail="no N <= 128 check: the key tile is clamped to 128 and later keys are dropped")
def zoo_attention_naive_unchecked_n(q, k, v, sm_scale):
    """Bug: N > 128 is accepted and silently truncated to the first 128 keys."""
    dims = dict(NAIVE_CONTRACT["dims"], N=MASKED_DIMS["N"])  # BUG: the N limit is not enforced
    check_attention_args(q, k, v, sm_scale, dims, "zoo_attention_naive_unchecked_n")
    B, M, D = q.shape
    N = k.shape[1]
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    attention_naive_kernel[(triton.cdiv(M, BLOCK_M), B)](
        q, k, v, out,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        M, min(N, 128), D, float(sm_scale),  # BUG: "clamp" to what fits in one tile
        BLOCK_M=BLOCK_M, BLOCK_N=max(16, min(128, triton.next_power_of_2(N))),
        BLOCK_D=max(16, triton.next_power_of_2(D)),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out


# %%
# exp2 without log2(e)
# --------------------


@triton.jit
def attention_naive_kernel_exp2(
    q_ptr,  # *Pointer* to the queries (B, M, D)
    k_ptr,  # *Pointer* to the keys (B, N, D)
    v_ptr,  # *Pointer* to the values (B, N, D)
    out_ptr,  # *Pointer* to the output (B, M, D)
    stride_qb, stride_qm, stride_qd,  # Strides of q, in elements
    stride_kb, stride_kn, stride_kd,  # Strides of k
    stride_vb, stride_vn, stride_vd,  # Strides of v
    stride_ob, stride_om, stride_od,  # Strides of the output
    M, N, D,  # Queries, keys, head dim
    sm_scale,  # Scale applied to q @ k^T before the softmax
    BLOCK_M: tl.constexpr,  # Queries per program
    BLOCK_N: tl.constexpr,  # >= N: every key lives in this one tile
    BLOCK_D: tl.constexpr,  # >= D, padded with zeros
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs
):
    pid_m = tl.program_id(axis=0)
    b = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < M
    mask_n = offs_n < N
    mask_d = offs_d < D
    q = tl.load(q_ptr + b * stride_qb + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=mask_m[:, None] & mask_d[None, :], other=0.0)
    kt = tl.load(k_ptr + b * stride_kb + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                 mask=mask_n[None, :] & mask_d[:, None], other=0.0)
    v = tl.load(v_ptr + b * stride_vb + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                mask=mask_n[:, None] & mask_d[None, :], other=0.0)
    s = tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale
    s = tl.where(mask_n[None, :], s, float("-inf"))
    # BUG: switched to the faster exp2 as in the FlashAttention tutorial, but without
    # folding log2(e) = 1.4427 into sm_scale: this is a softmax at temperature ln 2.
    p = tl.exp2(s - tl.max(s, axis=1)[:, None])
    l = tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
    out = acc / l[:, None]
    tl.store(out_ptr + b * stride_ob + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


@subject(**NAIVE_CONTRACT, name="zoo_attention_naive_exp2_without_log2e",
         xfail="uses exp2 for the softmax without scaling the logits by log2(e): the attention weights are too flat")
def zoo_attention_naive_exp2_without_log2e(q, k, v, sm_scale):
    """Bug: ``exp2(s - max)`` where ``exp2((s - max) * log2(e))`` is meant; wrong whenever scores differ."""
    check_attention_args(q, k, v, sm_scale, NAIVE_CONTRACT["dims"], "zoo_attention_naive_exp2_without_log2e")
    B, M, D = q.shape
    N = k.shape[1]
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    attention_naive_kernel_exp2[(triton.cdiv(M, BLOCK_M), B)](
        q, k, v, out,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        M, N, D, float(sm_scale),
        BLOCK_M=BLOCK_M, BLOCK_N=max(16, triton.next_power_of_2(N)), BLOCK_D=max(16, triton.next_power_of_2(D)),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out
