"""Buggy GEMVs.  Each claims the contract of the ``kernels_under_test.gemv`` subject it mutates."""

import torch
import triton
import triton.language as tl

from kernels_under_test.gemv import (
    BLOCK_N,
    check_gemv_args,
    gemv_contiguous_kernel,
    gemv_contract,
    gemv_strided_kernel,
)
from triton_conformance import subject

BUGS = [
    ("zoo_gemv_fp16_accumulator", "dtype:float16", "wrong", "mismatch"),
    ("zoo_gemv_ignores_x_stride", "layout:sliced", "unsafe", "poisoned-read"),
    ("zoo_gemv_unchecked_contiguous", "layout:transposed", "wrong", "mismatch"),
    ("zoo_gemv_x_stride_from_a", "layout:transposed", "unsafe", "poisoned-read"),
]

# %%
# Accumulating in fp16
# --------------------


@triton.jit
def gemv_kernel_fp16_acc(
    a_ptr,  # *Pointer* to A (M, N)
    x_ptr,  # *Pointer* to x (N,)
    y_ptr,  # *Pointer* to the fp32 output y (M,)
    N,  # Number of columns of A
    stride_am, stride_an,  # Strides of A
    stride_x,  # Stride of x
    BLOCK_N: tl.constexpr,  # Columns per step
):
    row = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float16)  # BUG: the accumulator has the input's precision
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        a = tl.load(a_ptr + row * stride_am + cols * stride_an, mask=mask, other=0.0)
        x = tl.load(x_ptr + cols * stride_x, mask=mask, other=0.0)
        acc += a * x
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(tl.float32))


@subject(**gemv_contract("any"), name="zoo_gemv_fp16_accumulator",
         xfail="products and partial sums are kept in fp16, not fp32")
def zoo_gemv_fp16_accumulator(A, x):
    """Bug: an fp16 accumulator; the fp32 output only hides the lost digits."""
    check_gemv_args(A, x, "zoo_gemv_fp16_accumulator")
    M, N = A.shape
    y = torch.empty((M,), dtype=torch.float32, device=A.device)
    gemv_kernel_fp16_acc[(M,)](A, x, y, N, A.stride(0), A.stride(1), x.stride(0), BLOCK_N=BLOCK_N)
    return y


# %%
# x read with unit stride
# -----------------------


@triton.jit
def gemv_kernel_unit_x(
    a_ptr,  # *Pointer* to A (M, N)
    x_ptr,  # *Pointer* to x (N,)
    y_ptr,  # *Pointer* to the fp32 output y (M,)
    N,  # Number of columns of A
    stride_am, stride_an,  # Strides of A
    BLOCK_N: tl.constexpr,  # Columns per step
):
    row = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        a = tl.load(a_ptr + row * stride_am + cols * stride_an, mask=mask, other=0.0)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0)  # BUG: x's stride is never applied
        acc += a.to(tl.float32) * x.to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


@subject(**gemv_contract("any"), name="zoo_gemv_ignores_x_stride",
         xfail="strides of A are honoured but x is read as if contiguous")
def zoo_gemv_ignores_x_stride(A, x):
    """Bug: claims any layout, but a sliced or broadcast x is read element after element."""
    check_gemv_args(A, x, "zoo_gemv_ignores_x_stride")
    M, N = A.shape
    y = torch.empty((M,), dtype=torch.float32, device=A.device)
    gemv_kernel_unit_x[(M,)](A, x, y, N, A.stride(0), A.stride(1), BLOCK_N=BLOCK_N)
    return y


# %%
# A contiguous-only kernel that does not check
# --------------------------------------------


@subject(**gemv_contract("contiguous"), name="zoo_gemv_unchecked_contiguous",
         xfail="claims contiguous inputs only but never checks: a transposed A is misread silently")
def zoo_gemv_unchecked_contiguous(A, x):
    """Bug: no layout check, so out-of-contract layouts give garbage instead of an error."""
    check_gemv_args(A, x, "zoo_gemv_unchecked_contiguous")
    M, N = A.shape
    y = torch.empty((M,), dtype=torch.float32, device=A.device)
    gemv_contiguous_kernel[(M,)](A, x, y, N, BLOCK_N=BLOCK_N)  # BUG: A.is_contiguous() never checked
    return y


# %%
# x read with A's column stride
# -----------------------------


@subject(**gemv_contract("any"), name="zoo_gemv_x_stride_from_a",
         xfail="passes A.stride(1) as x's stride: right while A's columns are unit-stride, wrong for a transposed A")
def zoo_gemv_x_stride_from_a(A, x):
    """Bug: a copy-paste slip in the launcher; x is walked with A's column stride instead of its own."""
    check_gemv_args(A, x, "zoo_gemv_x_stride_from_a")
    M, N = A.shape
    y = torch.empty((M,), dtype=torch.float32, device=A.device)
    gemv_strided_kernel[(M,)](
        A, x, y, N,
        A.stride(0), A.stride(1),
        A.stride(1),  # BUG: x.stride(0)
        y.stride(0),
        BLOCK_N=BLOCK_N,
    )
    return y
