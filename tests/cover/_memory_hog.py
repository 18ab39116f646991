"""Two large-index subjects for the worker's memory bound (tests/cover/test_worker_memory.py).

- ``doubles_with_a_kernel`` is a Triton kernel with int64 offsets: the interpreter's emulation reserves tens of
  GiB of untouched address space for its large-index example and touches a few MB, so it runs inside a bound
  of half a GiB;
- ``doubles_with_a_scratch``, the same after a torch scratch buffer of :data:`SCRATCH` bytes filled at once (as
  a torch launcher's materialised intermediate is): a worker bounded below that refuses it at once, before a
  page of it is touched.  Kept to 2 GiB so that a broken bound costs the machine running the test little.
"""

import triton
import triton.language as tl
import torch

from triton_conformance import Dim, Tensor, register

VECTOR = {"x": Tensor(("N",), dtypes=("float16",))}


SCRATCH = 2 << 30


@triton.jit
def _double(x_ptr,  # the input
            out_ptr,  # the output, as long
            n,  # elements
            BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def doubles_with_a_kernel(x):
    out = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def doubles_with_a_scratch(x):
    torch.ones(SCRATCH // 8, dtype=torch.float64)  # every page touched at once, then dropped
    return doubles_with_a_kernel(x)


for _launcher in (doubles_with_a_kernel, doubles_with_a_scratch):
    register(_launcher, inputs=VECTOR, dims={"N": Dim(1, 1 << 32)}, oracle=lambda x: x * 2, family="memory_hog")


def killed_like_by_the_oom_killer(x):
    """Ends its own process with SIGKILL, as the kernel's out-of-memory killer ends its victim: no output."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return x * 2


register(killed_like_by_the_oom_killer, inputs=VECTOR, dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2,
         family="memory_hog")
