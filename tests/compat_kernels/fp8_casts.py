"""Kernels that cast to and from fp8, for the fp8 shim's tests (defined under TRITON_INTERPRET=1)."""

import triton
import triton.language as tl


@triton.jit
def to_fp8(
    x_ptr,  # *Pointer* to the float input
    y_ptr,  # *Pointer* to the fp8 output (its element type picks the format)
    n,  # Number of elements
    TOWARD_ZERO: tl.constexpr,  # fp_downcast_rounding="rtz" instead of the default (nearest even)
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if TOWARD_ZERO:
        y = x.to(y_ptr.dtype.element_ty, fp_downcast_rounding="rtz")
    else:
        y = x.to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def from_fp8(
    q_ptr,  # *Pointer* to the fp8 input
    y_ptr,  # *Pointer* to the float output (its element type is the cast's target)
    n,  # Number of elements
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(q_ptr + offs, mask=mask).to(y_ptr.dtype.element_ty), mask=mask)
