"""A kernel that cannot be compiled for the device: its tile needs more shared memory than an SM has.

It multiplies a 256 x 256 fp32 tile by its transpose, as a naive attention
kernel does with K/V once they no longer fit one tile; on an H200 Triton
raises ``OutOfResources`` ("out of resource: shared memory, Required: ...,
Hardware limit: 232448").  The interpreter compiles nothing and has no
shared memory, so there the same limit is a ``tl.static_assert`` that fails
(the launcher passes the H200's limit); on CUDA the launcher passes no limit
and the real compiler refuses.

The length comes in through a one-element tensor rather than an integer
argument, so every example shares one specialization: the (slow, doomed)
compilation happens once and is cached, and each cell fails fast.
"""

import os

import torch
import triton
import triton.language as tl

from tests.hazards._contract import HAZARD_CONTRACT, check_hazard_args
from triton_conformance import subject

TILE = 256
H200_SHARED_MEMORY = 232448  # bytes per block, as Triton reports the hardware limit
NO_LIMIT = 1 << 40

# %%
# Kernel
# ------


@triton.jit
def big_tile_kernel(
    x_ptr,  # *Pointer* to the input vector
    out_ptr,  # *Pointer* to the output vector
    n_ptr,  # *Pointer* to the number of elements (int32), read at run time
    TILE: tl.constexpr,  # Tile edge: TILE x TILE operands (the hazard)
    SHARED_LIMIT: tl.constexpr,  # Bytes of shared memory the interpreter pretends to have
):
    # Two fp32 TILE x TILE operands of the dot would sit in shared memory.
    tl.static_assert(2 * TILE * TILE * 4 <= SHARED_LIMIT, "tile operands exceed shared memory")
    n_elements = tl.load(n_ptr)
    rows = tl.arange(0, TILE)
    cols = tl.arange(0, TILE)
    mask = (rows[:, None] >= 0) & (cols[None, :] < n_elements)
    a = tl.load(x_ptr + rows[:, None] * 0 + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    c = tl.dot(a, tl.trans(a))  # HAZARD: TILE x TILE operands, far beyond shared memory
    x = tl.load(x_ptr + cols, mask=cols < n_elements, other=0.0)
    tl.store(out_ptr + cols, x * 2 + 0.0 * tl.sum(c, axis=0), mask=cols < n_elements)


# %%
# Launcher
# --------


@subject(**HAZARD_CONTRACT, name="hazard_compile", xfail="hazard: a 256 x 256 fp32 tile exceeds shared memory")
def hazard_compile(x):
    check_hazard_args(x, "hazard_compile")
    n = x.shape[0]
    out = torch.empty_like(x)
    limit = H200_SHARED_MEMORY if os.environ.get("TRITON_INTERPRET") == "1" else NO_LIMIT
    n_elements = torch.full((1,), n, dtype=torch.int32, device=x.device)
    big_tile_kernel[(1,)](x, out, n_elements, TILE=TILE, SHARED_LIMIT=limit)
    return out
