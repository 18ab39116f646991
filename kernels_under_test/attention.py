"""
Attention, two ways
===================

``out = softmax(q @ k^T * sm_scale) @ v`` for q (B, M, D) and k, v (B, N, D).

* :func:`attention_naive` loads *all* of K and V into one tile.  That is the
  simplest correct kernel, and it only works while a tile of
  ``next_power_of_2(N) x next_power_of_2(D)`` fits, so the contract says so
  (N <= 128, D <= 64) and the launcher refuses anything larger.
* :func:`attention_masked` adds an explicit boolean mask (True = attend), read
  through its own strides so that a mask broadcast over the batch or the
  queries costs nothing.  It walks K and V in tiles with an online softmax,
  so N can be large.  A query whose mask row is all False attends to nothing;
  its output is defined as zeros (policy ``fully_masked="zeros"``).

Both run one program per (block of queries, batch) and honour any strides.
"""

import math
import numbers

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Mask, Scalar, Tensor, subject
from triton_conformance.oracles.rounding import input_dtype, rounded_to

# %%
# Naive kernel: all keys in one tile
# ----------------------------------


@triton.jit
def attention_naive_kernel(
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
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs (no tf32 rounding)
):
    pid_m = tl.program_id(axis=0)
    b = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < M
    mask_n = offs_n < N
    mask_d = offs_d < D
    # Padded head-dim lanes load 0 so they add nothing to q . k.
    q = tl.load(q_ptr + b * stride_qb + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=mask_m[:, None] & mask_d[None, :], other=0.0)
    kt = tl.load(k_ptr + b * stride_kb + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                 mask=mask_n[None, :] & mask_d[:, None], other=0.0)
    v = tl.load(v_ptr + b * stride_vb + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                mask=mask_n[:, None] & mask_d[None, :], other=0.0)
    s = tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale
    # A padded key scores 0, not -inf, after the dot: mask it out explicitly.
    s = tl.where(mask_n[None, :], s, float("-inf"))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    l = tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
    out = acc / l[:, None]
    tl.store(out_ptr + b * stride_ob + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


# %%
# Masked kernel: tiles of keys, online softmax
# --------------------------------------------
# The running max ``m_i`` starts at -inf and stays there while every key seen
# so far is masked out.  Exponentiating against it would give
# ``-inf - (-inf) = NaN``, so such rows shift by 0 instead.


@triton.jit
def attention_masked_kernel(
    q_ptr,  # *Pointer* to the queries (B, M, D)
    k_ptr,  # *Pointer* to the keys (B, N, D)
    v_ptr,  # *Pointer* to the values (B, N, D)
    mask_ptr,  # *Pointer* to the mask (B, M, N) as uint8: nonzero = attend
    out_ptr,  # *Pointer* to the output (B, M, D)
    stride_qb, stride_qm, stride_qd,  # Strides of q, in elements
    stride_kb, stride_kn, stride_kd,  # Strides of k
    stride_vb, stride_vn, stride_vd,  # Strides of v
    stride_mb, stride_mm, stride_mn,  # Strides of the mask (0 where broadcast)
    stride_ob, stride_om, stride_od,  # Strides of the output
    M, N, D,  # Queries, keys, head dim
    sm_scale,  # Scale applied to q @ k^T before the softmax
    BLOCK_M: tl.constexpr,  # Queries per program
    BLOCK_N: tl.constexpr,  # Keys per step of the loop
    BLOCK_D: tl.constexpr,  # >= D, padded with zeros
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs (no tf32 rounding)
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
        # Out-of-range keys and padded queries load "do not attend".
        keep = tl.load(mask_ptr + b * stride_mb + offs_m[:, None] * stride_mm + offs_n[None, :] * stride_mn,
                       mask=mask_m[:, None] & mask_n[None, :], other=0) != 0
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_shift)  # rescales what was summed under the old max
        p = tl.exp(s - m_shift[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new
    # A fully masked row has l_i == 0 and acc == 0; dividing by 1 makes it the
    # zeros its policy promises instead of 0 / 0 = NaN.
    l_i = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_i[:, None]
    tl.store(out_ptr + b * stride_ob + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


# %%
# Oracles, contracts and argument checks
# --------------------------------------

DTYPES = (torch.float16, torch.float32)
SM_SCALE = Scalar(0.05, 1.0)
NAIVE_DIMS = {"B": Dim(1, 4), "M": Dim(1, 256), "N": Dim(1, 128), "D": Dim(1, 64)}
MASKED_DIMS = {"B": Dim(1, 4), "M": Dim(1, 256), "N": Dim(1, 1024), "D": Dim(1, 64)}
BLOCK_M = 16


# P is rounded to the input dtype before the P @ V dot, as tl.dot requires: the oracle says so, and
# the bound then allows that rounding (docs/tolerance.md).
def attention_oracle(q, k, v, sm_scale):
    p = torch.softmax(q @ k.transpose(-1, -2) * sm_scale, dim=-1)
    return rounded_to(p, input_dtype(v)) @ v


def masked_attention_oracle(q, k, v, mask, sm_scale):
    keep = mask.to(torch.bool)  # the suite may hand the mask over as 0/1 floats
    s = (q @ k.transpose(-1, -2) * sm_scale).masked_fill(~keep, float("-inf"))
    # softmax of an all -inf row is NaN; the declared policy makes it zeros.
    p = torch.softmax(s, dim=-1).masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)
    return rounded_to(p, input_dtype(v)) @ v


def _qkv_inputs():
    dtypes = ("float16", "float32")
    return {
        "q": Tensor(("B", "M", "D"), dtypes=dtypes, layouts="any"),
        "k": Tensor(("B", "N", "D"), dtypes=dtypes, layouts="any"),
        "v": Tensor(("B", "N", "D"), dtypes=dtypes, layouts="any"),
    }


NAIVE_CONTRACT = dict(
    family="attention", inputs=_qkv_inputs(), dims=NAIVE_DIMS,
    scalars={"sm_scale": SM_SCALE}, oracle=attention_oracle, reduces="N",
)
MASKED_CONTRACT = dict(
    family="attention",
    inputs={**_qkv_inputs(), "mask": Mask(("B", "M", "N"), kind="bool", fully_masked="zeros")},
    dims=MASKED_DIMS, scalars={"sm_scale": SM_SCALE}, oracle=masked_attention_oracle, reduces="N",
)


def check_attention_args(q, k, v, sm_scale, dims, fn):
    """Raise TypeError/ValueError unless q, k, v and sm_scale are inside the contract."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype not in DTYPES:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected float16 or float32")
        if t.dim() != 3:
            raise ValueError(f"{fn}: {name}.dim()={t.dim()}, expected a 3-D tensor")
        if t.dtype != q.dtype or t.device != q.device:
            raise TypeError(f"{fn}: {name} is {t.dtype} on {t.device}, expected q's {q.dtype} on {q.device}")
    B, M, D = q.shape
    N = k.shape[1]
    for name, t in (("k", k), ("v", v)):
        if t.shape != (B, N, D):
            raise ValueError(f"{fn}: {name}.shape={tuple(t.shape)}, expected (B, N, D) = ({B}, {N}, {D})")
    for sym, n, where in (("B", B, "q.shape[0]"), ("M", M, "q.shape[1]"), ("N", N, "k.shape[1]"),
                          ("D", D, "q.shape[2]")):
        if not dims[sym].admits(n):
            raise ValueError(f"{fn}: {where}={n}, expected {dims[sym].min} <= {sym} <= {dims[sym].max}")
    if not isinstance(sm_scale, numbers.Real) or isinstance(sm_scale, bool):
        raise TypeError(f"{fn}: sm_scale={sm_scale!r}, expected a Python float")
    if not (math.isfinite(sm_scale) and SM_SCALE.low <= sm_scale <= SM_SCALE.high):
        raise ValueError(f"{fn}: sm_scale={sm_scale!r}, expected {SM_SCALE.low} <= sm_scale <= {SM_SCALE.high}")


def _strides(*tensors):
    return [s for t in tensors for s in t.stride()]


# %%
# Launchers
# ---------
# ``tl.dot`` needs tiles of at least 16 along the reduced dim on GPUs, hence
# the floor of 16 on the padded sizes.


@subject(**NAIVE_CONTRACT)
def attention_naive(q, k, v, sm_scale):
    """Attention with every key in one tile; N <= 128 and D <= 64 only."""
    check_attention_args(q, k, v, sm_scale, NAIVE_DIMS, "attention_naive")
    B, M, D = q.shape
    N = k.shape[1]
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(M, BLOCK_M), B)
    attention_naive_kernel[grid](
        q, k, v, out,
        *_strides(q, k, v, out),
        M, N, D, float(sm_scale),
        BLOCK_M=BLOCK_M,
        BLOCK_N=max(16, triton.next_power_of_2(N)),
        BLOCK_D=max(16, triton.next_power_of_2(D)),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out


@subject(**MASKED_CONTRACT)
def attention_masked(q, k, v, mask, sm_scale):
    """Attention under a boolean mask (True = attend); fully masked rows give zeros."""
    check_attention_args(q, k, v, sm_scale, MASKED_DIMS, "attention_masked")
    B, M, D = q.shape
    N = k.shape[1]
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"attention_masked: mask.dtype={getattr(mask, 'dtype', type(mask).__name__)}, "
                        "expected a torch.bool tensor")
    if mask.shape != (B, M, N):
        raise ValueError(f"attention_masked: mask.shape={tuple(mask.shape)}, expected (B, M, N) = ({B}, {M}, {N})")
    if mask.device != q.device:
        raise ValueError(f"attention_masked: mask.device={mask.device}, expected q's device {q.device}")
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    # Same bytes, same strides: a uint8 view loads the same on every backend.
    mask_u8 = mask.view(torch.uint8)
    grid = (triton.cdiv(M, BLOCK_M), B)
    attention_masked_kernel[grid](
        q, k, v, mask_u8, out,
        *_strides(q, k, v, mask_u8, out),
        M, N, D, float(sm_scale),
        BLOCK_M=BLOCK_M,
        BLOCK_N=32,
        BLOCK_D=max(16, triton.next_power_of_2(D)),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out


# %%
# Demo
# ----

if __name__ == "__main__":
    B, M, N, D = 2, 40, 100, 24
    q, k, v = (torch.randn(B, L, D) for L in (M, N, N))
    print("naive:", (attention_naive(q=q, k=k, v=v, sm_scale=0.2) - attention_oracle(q, k, v, 0.2)).abs().max())
    mask = torch.rand(1, M, N) > 0.5
    mask[:, 3] = False  # query 3 attends to nothing: its output is zeros
    mask = mask.expand(B, M, N)  # broadcast over the batch: stride 0
    out = attention_masked(q=q, k=k, v=v, mask=mask, sm_scale=0.2)
    print("masked:", (out - masked_attention_oracle(q, k, v, mask, 0.2)).abs().max(), out[:, 3].abs().max())
