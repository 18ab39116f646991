"""A kernel that never finishes: it waits for a flag that nothing ever sets.

The load is volatile so the compiler re-reads the flag each iteration, as a
real spin-wait would; the flag is zero and stays zero.
"""

import torch
import triton
import triton.language as tl

from tests.hazards._contract import HAZARD_CONTRACT, check_hazard_args
from triton_conformance import subject

# %%
# Kernel
# ------


@triton.jit
def spin_kernel(
    flag_ptr,  # *Pointer* to an int32 flag that stays 0 (the hazard)
    x_ptr,  # *Pointer* to the input vector
    out_ptr,  # *Pointer* to the output vector
    n_elements,  # Number of elements
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    while tl.load(flag_ptr, volatile=True) == 0:  # HAZARD: nobody sets the flag
        pass
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2, mask=mask)


# %%
# Launcher
# --------


@subject(**HAZARD_CONTRACT, name="hazard_hang", xfail="hazard: spins forever on a flag nobody sets")
def hazard_hang(x):
    check_hazard_args(x, "hazard_hang")
    n = x.shape[0]
    out = torch.empty_like(x)
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    BLOCK_SIZE = 64
    spin_kernel[(triton.cdiv(n, BLOCK_SIZE),)](flag, x, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out
