"""A kernel that stores far outside memory.

On CUDA the store is an illegal address: the kernel faults and the process's
CUDA context is lost for good.  Under the interpreter the same store is a
write through a wild host pointer, which kills the process (SIGSEGV).
"""

import torch
import triton
import triton.language as tl

from tests.hazards._contract import HAZARD_CONTRACT, check_hazard_args
from triton_conformance import subject

# 2^44 elements (64 TiB) past the output: unmapped on any machine.
FAR = 1 << 44

# %%
# Kernel
# ------


@triton.jit
def wild_store_kernel(
    x_ptr,  # *Pointer* to the input vector
    out_ptr,  # *Pointer* to the output vector
    n_elements,  # Number of elements
    far,  # Elements past out_ptr to store at (the hazard)
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + far + offs, x * 2, mask=mask)  # HAZARD: far outside the output


# %%
# Launcher
# --------


@subject(**HAZARD_CONTRACT, name="hazard_crash", xfail="hazard: stores 2^44 elements past its output")
def hazard_crash(x):
    check_hazard_args(x, "hazard_crash")
    n = x.shape[0]
    out = torch.empty_like(x)
    BLOCK_SIZE = 64
    wild_store_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, FAR, BLOCK_SIZE=BLOCK_SIZE)
    return out
