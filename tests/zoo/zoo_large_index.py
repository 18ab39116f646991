"""An int32-offset vector addition.  It claims the contract of ``kernels_under_test.vector_add.add``.

The textbook ``offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)`` is right
for every vector below 2^31 elements: ``pid`` is int32, so past that the
product wraps to a negative offset and the last blocks read and write 4 GiB
before the tensors.  Only the ``shape:large-index`` cell reaches such sizes.
"""

import torch
import triton
import triton.language as tl

from kernels_under_test.vector_add import ADD_CONTRACT, check_add_args
from triton_conformance import subject

BUGS = [
    # CPU: the emulation checks every address and stops at the first store outside the tensors;
    # CUDA: the store lands in the gap left before the output, which is checked afterwards.
    ("zoo_add_int32_offsets", "shape:large-index", "unsafe", "oob-write"),
]


@triton.jit
def add_kernel_int32_offsets(
    x_ptr,  # *Pointer* to the first input vector
    y_ptr,  # *Pointer* to the second input vector
    out_ptr,  # *Pointer* to the output vector
    n_elements,  # Number of elements in each vector
    stride_x,  # Element stride of x
    stride_y,  # Element stride of y
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # BUG: int32, wraps past 2^31 elements
    mask = offs < n_elements
    x = tl.load(x_ptr + offs * stride_x, mask=mask)
    y = tl.load(y_ptr + offs * stride_y, mask=mask)
    out = x.to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**ADD_CONTRACT, name="zoo_add_int32_offsets",
         xfail="offsets are int32: past 2^31 elements pid * BLOCK_SIZE wraps to a negative offset")
def zoo_add_int32_offsets(x, y):
    """Bug: correct below 2^31 elements; past it the last blocks address memory 4 GiB before the tensors."""
    check_add_args(x, y, "zoo_add_int32_offsets")
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    BLOCK_SIZE = 1024
    add_kernel_int32_offsets[(triton.cdiv(n, BLOCK_SIZE),)](
        x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out
