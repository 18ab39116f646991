"""Buggy vector additions.  Each claims the contract of ``kernels_under_test.vector_add.add``."""

import torch
import triton
import triton.language as tl

from kernels_under_test.vector_add import ADD_CONTRACT, add_kernel, check_add_args
from triton_conformance import subject

BUGS = [
    ("zoo_add_missing_store_mask", "memory", "unsafe", "oob-write"),
    ("zoo_add_floor_grid", "shape:non-pow2", "unsafe", "unwritten"),
    ("zoo_add_unit_stride_x", "layout:broadcast", "unsafe", "poisoned-read"),
    ("zoo_add_rejects_fp16", "dtype:float16", "crash", "exception"),
    ("zoo_add_mask_off_by_one", "layout:contiguous", "unsafe", "oob-write"),
]

# %%
# Missing store mask
# ------------------


@triton.jit
def add_kernel_no_store_mask(
    x_ptr,  # *Pointer* to the first input vector
    y_ptr,  # *Pointer* to the second input vector
    out_ptr,  # *Pointer* to the output vector
    n_elements,  # Number of elements in each vector
    stride_x,  # Element stride of x
    stride_y,  # Element stride of y
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs * stride_x, mask=mask)
    y = tl.load(y_ptr + offs * stride_y, mask=mask)
    out = x.to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty))  # BUG: no mask=mask


@subject(**ADD_CONTRACT, name="zoo_add_missing_store_mask",
         xfail="the store is not masked: the last block writes past the end of the output")
def zoo_add_missing_store_mask(x, y):
    """Bug: loads are masked but the store is not, so the tail block writes out of bounds."""
    check_add_args(x, y, "zoo_add_missing_store_mask")
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    # A small block keeps the overrun (< 128 elements) inside the suite's guard band.
    BLOCK_SIZE = 128
    add_kernel_no_store_mask[(triton.cdiv(n, BLOCK_SIZE),)](
        x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out


# %%
# Launcher bugs on the correct kernel
# -----------------------------------


@subject(**ADD_CONTRACT, name="zoo_add_floor_grid",
         xfail="grid = N // BLOCK_SIZE drops the last partial block")
def zoo_add_floor_grid(x, y):
    """Bug: the grid rounds down, so the last N % BLOCK_SIZE elements are never written."""
    check_add_args(x, y, "zoo_add_floor_grid")
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    BLOCK_SIZE = 1024
    grid = (n // BLOCK_SIZE,)  # BUG: should be triton.cdiv(n, BLOCK_SIZE)
    add_kernel[grid](x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out


@subject(**ADD_CONTRACT, name="zoo_add_unit_stride_x",
         xfail="stride 0 of a broadcast x is 'fixed' to 1, so x is read past its storage")
def zoo_add_unit_stride_x(x, y):
    """Bug: a zero stride is treated as degenerate and replaced by 1, breaking broadcasts."""
    check_add_args(x, y, "zoo_add_unit_stride_x")
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    BLOCK_SIZE = 1024
    stride_x = max(x.stride(0), 1)  # BUG: stride 0 is a legal broadcast, not an error
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, stride_x, y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out


@subject(**ADD_CONTRACT, name="zoo_add_rejects_fp16",
         xfail="the launcher rejects float16, which its contract claims")
def zoo_add_rejects_fp16(x, y):
    """Bug: the contract claims float16 but the launcher refuses it."""
    check_add_args(x, y, "zoo_add_rejects_fp16")
    if x.dtype == torch.float16:  # BUG: left over from a time fp16 was not supported
        raise TypeError("zoo_add_rejects_fp16: x.dtype=torch.float16 is not supported")
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    BLOCK_SIZE = 1024
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out


# %%
# An off-by-one mask
# ------------------


@triton.jit
def add_kernel_mask_le(
    x_ptr,  # *Pointer* to the first input vector
    y_ptr,  # *Pointer* to the second input vector
    out_ptr,  # *Pointer* to the output vector
    n_elements,  # Number of elements in each vector
    stride_x,  # Element stride of x
    stride_y,  # Element stride of y
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs <= n_elements  # BUG: <= lets lane n through, one element past the end
    x = tl.load(x_ptr + offs * stride_x, mask=mask)
    y = tl.load(y_ptr + offs * stride_y, mask=mask)
    out = x.to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**ADD_CONTRACT, name="zoo_add_mask_off_by_one",
         xfail="the mask is offs <= n: whenever N is not a multiple of the block, one element past the end is written")
def zoo_add_mask_off_by_one(x, y):
    """Bug: a fencepost in the mask; the output is right, but out[N] (outside it) is overwritten."""
    check_add_args(x, y, "zoo_add_mask_off_by_one")
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    BLOCK_SIZE = 1024
    add_kernel_mask_le[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out
