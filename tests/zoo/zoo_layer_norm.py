"""Buggy layer norms.  Each claims the contract of ``kernels_under_test.layer_norm.layer_norm``."""

import torch
import triton
import triton.language as tl

from kernels_under_test.layer_norm import LAYER_NORM_CONTRACT, check_layer_norm_args
from triton_conformance import subject

BUGS = [
    ("zoo_layer_norm_padded_variance", "shape:non-pow2", "wrong", "mismatch"),
    ("zoo_layer_norm_no_bias_on_tail", "shape:non-pow2", "wrong", "mismatch"),
    ("zoo_layer_norm_missing_load_mask", "shape:non-pow2", "unsafe", "poisoned-read"),
]


@triton.jit
def layer_norm_kernel_buggy(
    x_ptr,  # *Pointer* to the input (M, N)
    w_ptr,  # *Pointer* to the weight (N,)
    b_ptr,  # *Pointer* to the bias (N,)
    out_ptr,  # *Pointer* to the output (M, N)
    stride_xm, stride_xn,  # Strides of x
    stride_w,  # Stride of weight
    stride_b,  # Stride of bias
    stride_om, stride_on,  # Strides of out
    N,  # Row length
    eps,  # Variance epsilon
    BLOCK_N: tl.constexpr,  # Columns per step
    EVEN_N: tl.constexpr,  # N % BLOCK_N == 0: no lane is ever masked
    BUG: tl.constexpr,  # Which of the zoo's bugs this instance has
):
    row = tl.program_id(axis=0)
    x_row = x_ptr + row * stride_xm
    out_row = out_ptr + row * stride_om

    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        if BUG == "missing_load_mask":
            x = tl.load(x_row + cols * stride_xn).to(tl.float32)  # BUG: lanes past N are summed too
        else:
            x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=0) / N

    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        if BUG == "padded_variance":
            diff = x - mean  # BUG: a masked lane loaded 0 and adds (0 - mean)^2
        else:
            diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
    var = tl.sum(acc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)

    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)
        if EVEN_N or BUG != "no_bias_on_tail":
            y = (x - mean) * rstd * w + b
        else:
            y = (x - mean) * rstd * w  # BUG: the masked path, written later, forgot "+ b"
        tl.store(out_row + cols * stride_on, y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(x, weight, bias, eps, bug, fn):
    check_layer_norm_args(x, weight, bias, eps, fn)
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_N = min(1024, triton.next_power_of_2(N))
    layer_norm_kernel_buggy[(M,)](
        x, weight, bias, out,
        x.stride(0), x.stride(1), weight.stride(0), bias.stride(0), out.stride(0), out.stride(1),
        N, float(eps),
        BLOCK_N=BLOCK_N, EVEN_N=N % BLOCK_N == 0, BUG=bug,
    )
    return out


@subject(**LAYER_NORM_CONTRACT, name="zoo_layer_norm_padded_variance",
         xfail="the variance sums (0 - mean)^2 over padded lanes")
def zoo_layer_norm_padded_variance(x, weight, bias, eps):
    """Bug: masked lanes are excluded from the mean but not from the variance."""
    return _launch(x, weight, bias, eps, "padded_variance", "zoo_layer_norm_padded_variance")


@subject(**LAYER_NORM_CONTRACT, name="zoo_layer_norm_no_bias_on_tail",
         xfail="the bias is added only when N is a multiple of the block (power-of-two N)")
def zoo_layer_norm_no_bias_on_tail(x, weight, bias, eps):
    """Bug: the masked (non-power-of-two N) path ignores the bias."""
    return _launch(x, weight, bias, eps, "no_bias_on_tail", "zoo_layer_norm_no_bias_on_tail")


@subject(**LAYER_NORM_CONTRACT, name="zoo_layer_norm_missing_load_mask",
         xfail="the mean pass loads without a mask: memory past the row joins the sum")
def zoo_layer_norm_missing_load_mask(x, weight, bias, eps):
    """Bug: an unmasked load feeds the mean, so the tail of the block reads past each row."""
    return _launch(x, weight, bias, eps, "missing_load_mask", "zoo_layer_norm_missing_load_mask")
