"""Buggy row softmaxes.  Each claims the contract of ``kernels_under_test.softmax.softmax``."""

import torch
import triton
import triton.language as tl

from kernels_under_test.softmax import (
    SOFTMAX_CONTRACT,
    check_softmax_args,
    softmax_kernel,
)
from triton_conformance import subject

BUGS = [
    ("zoo_softmax_other_zero", "values:huge", "wrong", "mismatch"),
    ("zoo_softmax_missing_load_mask", "shape:non-pow2", "unsafe", "poisoned-read"),
    ("zoo_softmax_row_stride_is_n", "layout:padded", "unsafe", "poisoned-read"),
    ("zoo_softmax_input_as_scratch", "memory", "unsafe", "mutated-input"),
    ("zoo_softmax_no_max_subtraction", "values:huge", "wrong", "nan-mismatch"),
]

# %%
# Padded lanes load 0 instead of -inf
# -----------------------------------


@triton.jit
def softmax_kernel_other_zero(
    out_ptr,  # *Pointer* to the output (M, N)
    x_ptr,  # *Pointer* to the input (M, N)
    stride_xm, stride_xn,  # Strides of x
    stride_om, stride_on,  # Strides of out
    n_cols,  # N
    BLOCK_SIZE: tl.constexpr,  # next_power_of_2(N)
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0)  # BUG: other=-inf
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_om + cols * stride_on, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**SOFTMAX_CONTRACT, name="zoo_softmax_other_zero",
         xfail="padded lanes load 0, not -inf: they win the max of negative rows and join the sum")
def zoo_softmax_other_zero(x):
    """Bug: ``other=0.0`` where ``-inf`` is needed; rows of large negative values collapse."""
    check_softmax_args(x, "zoo_softmax_other_zero")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_kernel_other_zero[(M,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), N,
                                    BLOCK_SIZE=triton.next_power_of_2(N))
    return out


# %%
# No load mask at all
# -------------------


@triton.jit
def softmax_kernel_no_load_mask(
    out_ptr,  # *Pointer* to the output (M, N)
    x_ptr,  # *Pointer* to the input (M, N)
    stride_xm, stride_xn,  # Strides of x
    stride_om, stride_on,  # Strides of out
    n_cols,  # N
    BLOCK_SIZE: tl.constexpr,  # next_power_of_2(N)
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn).to(tl.float32)  # BUG: no mask, no other
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_om + cols * stride_on, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**SOFTMAX_CONTRACT, name="zoo_softmax_missing_load_mask",
         xfail="the load is unmasked: lanes past N read the next row or past the input into max and sum")
def zoo_softmax_missing_load_mask(x):
    """Bug: only the store is masked, so the reduction sees memory past the end of each row."""
    check_softmax_args(x, "zoo_softmax_missing_load_mask")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_kernel_no_load_mask[(M,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), N,
                                      BLOCK_SIZE=triton.next_power_of_2(N))
    return out


# %%
# Row stride assumed to be N
# --------------------------


@subject(**SOFTMAX_CONTRACT, name="zoo_softmax_row_stride_is_n",
         xfail="passes x.shape[1] as the row stride, so padded and sliced rows are misread")
def zoo_softmax_row_stride_is_n(x):
    """Bug: the launcher passes N where ``x.stride(0)`` belongs (right only for dense rows)."""
    check_softmax_args(x, "zoo_softmax_row_stride_is_n")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_kernel[(M,)](out, x, N, x.stride(1), out.stride(0), out.stride(1), N,  # BUG: N, not x.stride(0)
                         BLOCK_SIZE=triton.next_power_of_2(N))
    return out


# %%
# The input used as scratch space
# -------------------------------


@triton.jit
def softmax_kernel_scratch(
    out_ptr,  # *Pointer* to the output (M, N)
    x_ptr,  # *Pointer* to the input (M, N), also (wrongly) used as scratch
    stride_xm, stride_xn,  # Strides of x
    stride_om, stride_on,  # Strides of out
    n_cols,  # N
    BLOCK_SIZE: tl.constexpr,  # next_power_of_2(N)
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x_row = x_ptr + row * stride_xm + cols * stride_xn
    x = tl.load(x_row, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    den = tl.sum(num, axis=0)
    # BUG: parks the numerators in x "to free registers", destroying the caller's input.
    tl.store(x_row, num.to(x_ptr.dtype.element_ty), mask=mask)
    num = tl.load(x_row, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + cols * stride_on, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


@subject(**SOFTMAX_CONTRACT, name="zoo_softmax_input_as_scratch",
         xfail="writes exp(x - max) back into x: the input is mutated")
def zoo_softmax_input_as_scratch(x):
    """Bug: the kernel uses its input as scratch; the result is right but x is overwritten."""
    check_softmax_args(x, "zoo_softmax_input_as_scratch")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_kernel_scratch[(M,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), N,
                                 BLOCK_SIZE=triton.next_power_of_2(N))
    return out


# %%
# No max subtraction
# ------------------


@triton.jit
def softmax_kernel_no_max(
    out_ptr,  # *Pointer* to the output (M, N)
    x_ptr,  # *Pointer* to the input (M, N)
    stride_xm, stride_xn,  # Strides of x
    stride_om, stride_on,  # Strides of out
    n_cols,  # N
    BLOCK_SIZE: tl.constexpr,  # next_power_of_2(N)
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf")).to(tl.float32)
    # BUG: "softmax is exp(x) / sum(exp(x))" taken literally; without x - max(x),
    # exp overflows to inf for logits above ~88 and the row becomes inf / inf = NaN.
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_om + cols * stride_on, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**SOFTMAX_CONTRACT, name="zoo_softmax_no_max_subtraction",
         xfail="the row max is not subtracted before exp: huge logits overflow to inf and the row turns NaN")
def zoo_softmax_no_max_subtraction(x):
    """Bug: textbook ``exp(x) / sum(exp(x))``; right for ordinary logits, NaN for huge ones."""
    check_softmax_args(x, "zoo_softmax_no_max_subtraction")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_kernel_no_max[(M,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), N,
                                BLOCK_SIZE=triton.next_power_of_2(N))
    return out
