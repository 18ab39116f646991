"""Bugs a looser tolerance could let through: each must still fail the bound of ``oracles/tolerance.py``.

The bound widens an element whose terms cancel to the size of those terms
(``docs/tolerance.md``).  These kernels are off by less than an ordinary bug,
or only where the terms are large, and stay caught:

- a row sum that claims fp32 accumulation (the default) and sums fp32 inputs in an
  fp16 accumulator: fp16's rounding is 8192 times fp32's, past what the terms'
  magnitude allows (``zoo_features`` has the subtler case: fp16 inputs summed in fp16);
- a softmax that clamps exp's argument to [-80, 80] instead of subtracting the
  row max: no overflow, no NaN, just wrong weights once logits pass 80;
- a layer norm that divides its variance by the padded block, counting the
  masked lanes: 15% off at N=3, 0.05% at N=1023;
- an RMSNorm backward whose projection term uses ``1 / mean(x^2)`` for
  ``rstd^2``, dropping eps: off by an eps-sized term that the two O(1) terms of
  dx cancel down to (at N=1, dx is that term and nothing else).

The row sum's correct twin is declared here; the others claim the contracts of
``kernels_under_test.softmax``, ``.layer_norm`` and ``.rms_norm``.
"""

import torch
import triton
import triton.language as tl

from kernels_under_test.layer_norm import LAYER_NORM_CONTRACT, check_layer_norm_args
from kernels_under_test.rms_norm import (
    RMS_NORM_CONTRACT,
    _block,
    check_rms_norm_args,
    rms_norm_dw_kernel,
    rms_norm_forward,
)
from kernels_under_test.softmax import SOFTMAX_CONTRACT, check_softmax_args
from triton_conformance import Dim, Tensor, register, subject

BUGS = [
    ("zoo_row_sum_fp32_summed_in_fp16", "dtype:float32", "wrong", "mismatch"),
    ("zoo_softmax_clamped_exp", "values:huge", "wrong", "mismatch"),
    ("zoo_layer_norm_variance_over_block", "shape:non-pow2", "wrong", "mismatch"),
    ("zoo_rms_norm_backward_drops_eps", "grad:dtype:float32", "wrong", "mismatch"),
]


# %%
# Row sum: the correct kernel and its fp16 accumulator
# ----------------------------------------------------


@triton.jit
def row_sum_kernel(
    x_ptr, out_ptr,  # x (M, N); out (M,)
    stride_xm, stride_xn, stride_o,
    N,
    BLOCK_N: tl.constexpr,  # columns per step
    ACC: tl.constexpr,  # the accumulator's dtype
):
    row = tl.program_id(axis=0)
    acc = tl.zeros((BLOCK_N,), dtype=ACC)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < N, other=0.0)
        acc += x.to(ACC)
    tl.store(out_ptr + row * stride_o, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


ROW_SUM_CONTRACT = dict(
    family="row_sum",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "bfloat16", "float32"), layouts="any")},
    dims={"M": Dim(1, 1024), "N": Dim(1, 8192)},
    oracle=lambda x: x.sum(-1),
    reduces="N",
)


def _row_sum(x, acc, fn):
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"{fn}: x must be a 2-D tensor, got {type(x).__name__} {getattr(x, 'shape', '')}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{fn}: x.dtype={x.dtype}, expected one of float16, bfloat16, float32")
    M, N = x.shape
    if not (1 <= M <= 1024 and 1 <= N <= 8192):
        raise ValueError(f"{fn}: x.shape={tuple(x.shape)}, expected 1 <= M <= 1024 and 1 <= N <= 8192")
    out = torch.empty((M,), dtype=x.dtype, device=x.device)
    row_sum_kernel[(M,)](x, out, x.stride(0), x.stride(1), out.stride(0), N,
                         BLOCK_N=min(1024, triton.next_power_of_2(N)), ACC=acc)
    return out


@subject(**ROW_SUM_CONTRACT)
def row_sum(x):
    """The sum of each row, accumulated in fp32: the correct twin of the fp16 accumulator."""
    return _row_sum(x, tl.float32, "row_sum")


@subject(**ROW_SUM_CONTRACT, name="zoo_row_sum_fp32_summed_in_fp16",
         xfail="claims fp32 accumulation (the default) and accumulates in fp16")
def zoo_row_sum_fp32_summed_in_fp16(x):
    """Bug: the fp16 accumulator of a kernel written for fp16 inputs, kept for fp32 ones."""
    return _row_sum(x, tl.float16, "zoo_row_sum_fp32_summed_in_fp16")


# %%
# Softmax: exp's argument clamped instead of the row max subtracted
# -----------------------------------------------------------------


@triton.jit
def softmax_kernel_clamped_exp(
    out_ptr, x_ptr,
    stride_xm, stride_xn, stride_om, stride_on,
    n_cols,
    BLOCK_SIZE: tl.constexpr,  # next_power_of_2(N)
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf")).to(tl.float32)
    # BUG: "clamp so exp cannot overflow" in place of x - max(x): the weights of logits past 80 are wrong.
    num = tl.where(mask, tl.exp(tl.minimum(tl.maximum(x, -80.0), 80.0)), 0.0)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_om + cols * stride_on, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**SOFTMAX_CONTRACT, name="zoo_softmax_clamped_exp",
         xfail="exp's argument is clamped to [-80, 80] instead of the row max being subtracted")
def zoo_softmax_clamped_exp(x):
    """Bug: no overflow and no NaN, but logits above 80 all weigh as 80."""
    check_softmax_args(x, "zoo_softmax_clamped_exp")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_kernel_clamped_exp[(M,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), N,
                                     BLOCK_SIZE=triton.next_power_of_2(N))
    return out


# %%
# Layer norm: the variance divided by the padded block
# ----------------------------------------------------


@triton.jit
def layer_norm_kernel_block_variance(
    x_ptr, w_ptr, b_ptr, out_ptr,
    stride_xm, stride_xn, stride_w, stride_b, stride_om, stride_on,
    N, eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(axis=0)
    x_row = x_ptr + row * stride_xm
    out_row = out_ptr + row * stride_om
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(x_row + cols * stride_xn, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    lanes = 0
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
        lanes += BLOCK_N  # BUG: counts every lane of the block, masked ones too
    var = tl.sum(acc, axis=0) / lanes
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols * stride_on, ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)


@subject(**LAYER_NORM_CONTRACT, name="zoo_layer_norm_variance_over_block",
         xfail="the variance is divided by the lanes of the padded block, masked ones included, not by N")
def zoo_layer_norm_variance_over_block(x, weight, bias, eps):
    """Bug: right for a power-of-two N; rstd too large by sqrt(block / N) otherwise."""
    check_layer_norm_args(x, weight, bias, eps, "zoo_layer_norm_variance_over_block")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    layer_norm_kernel_block_variance[(M,)](
        x, weight, bias, out, x.stride(0), x.stride(1), weight.stride(0), bias.stride(0), out.stride(0),
        out.stride(1), N, float(eps), BLOCK_N=min(1024, triton.next_power_of_2(N)))
    return out


# %%
# RMSNorm backward: eps dropped from the projection term
# ------------------------------------------------------


@triton.jit
def rms_norm_bwd_kernel_no_eps(
    x_ptr, w_ptr, g_ptr, rstd_ptr, dx_ptr, dw_partial_ptr,
    stride_xm, stride_xn, stride_w, stride_gm, stride_gn, stride_dxm, stride_dxn,
    M, N, ROWS,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    partial_row = dw_partial_ptr + pid * N
    for r in range(0, ROWS):
        row = pid * ROWS + r
        if row < M:
            rstd = tl.load(rstd_ptr + row)
            acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
            squares = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                mask = cols < N
                x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
                g = tl.load(g_ptr + row * stride_gm + cols * stride_gn, mask=mask, other=0.0).to(tl.float32)
                acc += x * w * g
                squares += x * x
            # BUG: rstd^2 recomputed as 1 / mean(x^2), without eps
            c = tl.sum(acc, axis=0) / N / (tl.sum(squares, axis=0) / N)
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                mask = cols < N
                x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
                g = tl.load(g_ptr + row * stride_gm + cols * stride_gn, mask=mask, other=0.0).to(tl.float32)
                dx = rstd * (w * g - x * c)
                tl.store(dx_ptr + row * stride_dxm + cols * stride_dxn, dx.to(dx_ptr.dtype.element_ty), mask=mask)
                dw = tl.load(partial_row + cols, mask=mask, other=0.0)
                tl.store(partial_row + cols, dw + g * x * rstd, mask=mask)


def _rms_norm_backward_no_eps(x, weight, rstd, g):
    M, N = x.shape
    programs = min(M, 32)
    rows = triton.cdiv(M, programs)
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    partial = torch.zeros((programs, N), dtype=torch.float32, device=x.device)
    rms_norm_bwd_kernel_no_eps[(programs,)](x, weight, g, rstd, dx, partial, x.stride(0), x.stride(1),
                                            weight.stride(0), g.stride(0), g.stride(1), dx.stride(0), dx.stride(1),
                                            M, N, rows, BLOCK_N=_block(N))
    dw = torch.empty((N,), dtype=weight.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(N))
    rms_norm_dw_kernel[(triton.cdiv(N, BLOCK),)](partial, dw, programs, N, BLOCK_P=triton.next_power_of_2(programs),
                                                 BLOCK_N=BLOCK)
    return dx, dw


class RMSNormBackwardDropsEps(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        check_rms_norm_args(x, weight, eps, "zoo_rms_norm_backward_drops_eps")
        y, rstd = rms_norm_forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, rstd = ctx.saved_tensors
        dx, dw = _rms_norm_backward_no_eps(x, weight, rstd, grad_output)
        return dx, dw, None


register(RMSNormBackwardDropsEps, name="zoo_rms_norm_backward_drops_eps", **RMS_NORM_CONTRACT,
         xfail="the backward's projection term uses 1 / mean(x^2) for rstd^2, without eps")
