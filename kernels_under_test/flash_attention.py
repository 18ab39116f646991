"""
FlashAttention forward
======================

``out = softmax(q @ k^T * sm_scale) @ v`` without ever holding a full row of
scores: each program owns ``BLOCK_M`` queries and walks the keys in tiles of
``BLOCK_N``, keeping per query

* ``m_i``, the largest score seen so far,
* ``l_i``, the sum of ``exp(score - m_i)`` so far,
* ``acc``, the sum of ``exp(score - m_i) * v`` so far.

When a tile raises the max from ``m_old`` to ``m_new``, everything summed so
far was exponentiated against the old max, so ``l_i`` and ``acc`` are rescaled
by ``alpha = exp(m_old - m_new)`` before the tile is added.  At the end
``out = acc / l_i``.  Accumulation is fp32 whatever the input dtype.

One kernel gives two subjects: :func:`flash_attention` and
:func:`flash_attention_causal`, where query ``i`` attends key ``j`` iff
``j <= i`` (top-left aligned, also when M != N).
"""

import math
import numbers

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Performance, Scalar, Tensor, subject
from triton_conformance.oracles.rounding import input_dtype, rounded_to

# %%
# Compute kernel
# --------------


@triton.jit
def flash_attention_kernel(
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
    CAUSAL: tl.constexpr,  # Query i attends key j iff j <= i
    BLOCK_M: tl.constexpr,  # Queries per program
    BLOCK_N: tl.constexpr,  # Keys per step of the loop
    BLOCK_D: tl.constexpr,  # next_power_of_2(D), padded with zeros
    DOT_PRECISION: tl.constexpr,  # "tf32", Triton's default: fp32 dots run in tf32 on GPUs
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
    # Keys past this block's last query are masked for all its rows: skip them.
    if CAUSAL:
        hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    else:
        hi = N
    # Every row sees key 0 in the first tile (j = 0 <= i), so m_i is finite
    # from then on and no -inf - (-inf) can arise.
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        kt = tl.load(k_ptr + b * stride_kb + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                     mask=mask_n[None, :] & mask_d[:, None], other=0.0)
        v = tl.load(v_ptr + b * stride_vb + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=mask_n[:, None] & mask_d[None, :], other=0.0)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale
        valid = mask_n[None, :]
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
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


# %%
# Oracles and contracts
# ---------------------

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
SM_SCALE = Scalar(0.05, 1.0)
DIMS = {"B": Dim(1, 4), "M": Dim(1, 2048), "N": Dim(1, 2048), "D": Dim(1, 128)}


def attention_weights(q, k, sm_scale, causal=False):
    """P = softmax(Q K^T * sm_scale), with keys after the query masked off when causal."""
    s = q @ k.transpose(-1, -2) * sm_scale
    if causal:
        M, N = q.shape[-2], k.shape[-2]
        keep = torch.ones((M, N), dtype=torch.bool, device=q.device).tril()  # j <= i
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1)


def attention_oracle(q, k, v, sm_scale):
    # P is rounded to the input dtype before the P @ V dot, as tl.dot requires: the bound then
    # allows that rounding (u_bf16 * P @ |V| in bf16), and nothing more.
    return rounded_to(attention_weights(q, k, sm_scale), input_dtype(v)) @ v


def causal_attention_oracle(q, k, v, sm_scale):
    return rounded_to(attention_weights(q, k, sm_scale, causal=True), input_dtype(v)) @ v


def flash_contract(oracle, causal=False):
    dtypes = ("float16", "bfloat16", "float32")
    return dict(
        family="attention",
        inputs={
            "q": Tensor(("B", "M", "D"), dtypes=dtypes, layouts="any"),
            "k": Tensor(("B", "N", "D"), dtypes=dtypes, layouts="any"),
            "v": Tensor(("B", "N", "D"), dtypes=dtypes, layouts="any"),
        },
        dims=DIMS,
        scalars={"sm_scale": SM_SCALE},
        oracle=oracle,
        reduces="N",
        # fp32 dots run in tf32 on CUDA (10-bit mantissa), which the tolerance allows for there.
        dot_precision="tf32",
        # Rounding P or V errs by a fraction of P @ |V|, not of the output, which can
        # cancel to almost nothing (one query over 1447 keys: 4e-4, on the H200).
        error_scale=lambda q, k, v, sm_scale: attention_weights(q, k, sm_scale, causal) @ v.abs(),
    )


def attended_pairs(M, N, causal):
    """(query, key) pairs a forward pass scores: M * N, or those with j <= i when causal."""
    if not causal:
        return M * N
    diagonal = min(M, N)
    return diagonal * (diagonal + 1) // 2 + max(M - N, 0) * N


def flash_performance(causal):
    """Performance contract (timed on CUDA by the ``performance`` cell).

    Two dots per attended (query, key) pair, Q K^T and P V, of 2 * D flops each:
    4 * B * M * N * D in all, about half of that when causal.  The baseline is
    torch's fused attention on the same tensors.
    """
    def baseline(q, k, v, sm_scale):
        out = torch.nn.functional.scaled_dot_product_attention(
            q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), scale=sm_scale, is_causal=causal)
        return out.squeeze(1)

    return Performance(
        dims={"B": DIMS["B"].max, "M": DIMS["M"].max, "N": DIMS["N"].max, "D": 64},
        dtype="float16",
        flops=lambda dims, dtypes: 4 * dims["B"] * dims["D"] * attended_pairs(dims["M"], dims["N"], causal),
        baseline=baseline,
        scalars={"sm_scale": 0.125},  # 1 / sqrt(D)
    )


def check_flash_args(q, k, v, sm_scale, fn):
    """Raise TypeError/ValueError unless q, k, v and sm_scale are inside the contract."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype not in DTYPES:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected one of float16, bfloat16, float32")
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
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: {where}={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")
    if not isinstance(sm_scale, numbers.Real) or isinstance(sm_scale, bool):
        raise TypeError(f"{fn}: sm_scale={sm_scale!r}, expected a Python float")
    if not (math.isfinite(sm_scale) and SM_SCALE.low <= sm_scale <= SM_SCALE.high):
        raise ValueError(f"{fn}: sm_scale={sm_scale!r}, expected {SM_SCALE.low} <= sm_scale <= {SM_SCALE.high}")


# %%
# Launchers
# ---------
# ``block_n`` is a tuning knob outside the contract.  The GPU needs
# ``tl.dot`` tiles of at least 16 along the reduced dim, so values below 16
# only run under the interpreter (the golden tests use 2 to force two tiles).


def _flash_attention(q, k, v, sm_scale, causal, block_n, fn):
    check_flash_args(q, k, v, sm_scale, fn)
    if block_n is None:
        block_n = 32
    if not isinstance(block_n, int) or block_n < 1 or block_n & (block_n - 1):
        raise ValueError(f"{fn}: block_n={block_n!r}, expected a power of two")
    B, M, D = q.shape
    N = k.shape[1]
    out = torch.empty((B, M, D), dtype=q.dtype, device=q.device)
    BLOCK_M = 32
    grid = (triton.cdiv(M, BLOCK_M), B)
    flash_attention_kernel[grid](
        q, k, v, out,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        M, N, D, float(sm_scale),
        CAUSAL=causal,
        BLOCK_M=BLOCK_M,
        BLOCK_N=block_n,
        BLOCK_D=max(16, triton.next_power_of_2(D)),
        DOT_PRECISION="tf32",  # fast on tensor cores; fp16/bf16 dots ignore it
    )
    return out


@subject(**flash_contract(attention_oracle), performance=flash_performance(causal=False))
def flash_attention(q, k, v, sm_scale, *, block_n=None):
    """FlashAttention forward, non-causal, any layout, fp16/bf16/fp32."""
    return _flash_attention(q, k, v, sm_scale, False, block_n, "flash_attention")


@subject(**flash_contract(causal_attention_oracle, causal=True), performance=flash_performance(causal=True))
def flash_attention_causal(q, k, v, sm_scale, *, block_n=None):
    """FlashAttention forward where query i attends keys j <= i (top-left aligned)."""
    return _flash_attention(q, k, v, sm_scale, True, block_n, "flash_attention_causal")


# %%
# Demo
# ----
# A head dim that is not a power of two, M != N, and a transposed key layout.

if __name__ == "__main__":
    B, M, N, D = 2, 50, 70, 40
    q = torch.randn(B, M, D)
    k = torch.randn(B, D, N).transpose(1, 2)  # (B, N, D) with stride_kd = N
    v = torch.randn(B, N, D)
    for f, ref in ((flash_attention, attention_oracle), (flash_attention_causal, causal_attention_oracle)):
        err = (f(q=q, k=k, v=v, sm_scale=0.15) - ref(q, k, v, 0.15)).abs().max().item()
        print(f"{f.name}: max error {err:.2e}")
