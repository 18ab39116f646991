"""
Vector addition
===============

The smallest useful Triton kernel, ``out = x + y``, written so that it keeps
every promise its contract makes:

* the last block is masked, so any ``N`` works, not just multiples of the block;
* the element strides of ``x`` and ``y`` are passed to the kernel, so sliced
  views, storage offsets and stride-0 broadcasts are read where they live;
* offsets are computed in int64, so vectors past 2^31 elements work (in int32,
  ``pid * BLOCK_SIZE`` would wrap around to a negative offset);
* an empty input returns an empty output without launching anything.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Performance, Tensor, subject

# %%
# Compute kernel
# --------------
# Each program handles ``BLOCK_SIZE`` consecutive elements of the output.


@triton.jit
def add_kernel(
    x_ptr,  # *Pointer* to the first input vector
    y_ptr,  # *Pointer* to the second input vector
    out_ptr,  # *Pointer* to the (contiguous) output vector
    n_elements,  # Number of elements in each vector
    stride_x,  # Element stride of x; 0 for a broadcast scalar
    stride_y,  # Element stride of y; 0 for a broadcast scalar
    BLOCK_SIZE: tl.constexpr,  # Elements per program; a power of two
):
    pid = tl.program_id(axis=0)
    # program_id is int32: widen it before multiplying, or offsets past 2^31 wrap.
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # The last block runs past the end unless N is a multiple of BLOCK_SIZE.
    mask = offs < n_elements
    x = tl.load(x_ptr + offs * stride_x, mask=mask)
    y = tl.load(y_ptr + offs * stride_y, mask=mask)
    # Add in fp32 and round once: this is what GPUs do for fp16/bf16 anyway,
    # and the interpreter has no native bf16 arithmetic.
    out = x.to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


# %%
# Launcher and contract
# ---------------------
# The contract is declared once and the launcher checks its arguments against
# the same numbers, so the claim and the checks cannot drift apart.

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DIMS = {"N": Dim(0, 1 << 32)}  # up to 4G elements: int64 offsets (shape:large-index checks it)

ADD_CONTRACT = dict(
    family="vector_add",
    inputs={
        "x": Tensor(("N",), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
        "y": Tensor(("N",), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
    },
    dims=DIMS,
    oracle=lambda x, y: x + y,
)


# Performance contract (timed on CUDA by the ``performance`` cell): every call
# must read x and y and write out once, 3 * N elements.  Measured at up to 2^26
# elements (768 MiB moved in fp32): long enough to time, cheap to check in fp64.
ADD_PERFORMANCE = Performance(
    dims={"N": min(DIMS["N"].max, 1 << 26)},
    dtype="float32",
    bytes=lambda dims, dtypes: 3 * dims["N"] * dtypes["x"].itemsize,
    baseline=lambda x, y: x + y,
)


def check_add_args(x, y, fn="add"):
    """Raise TypeError/ValueError unless ``x`` and ``y`` are inside the contract."""
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype not in DTYPES:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected one of float16, bfloat16, float32")
        if t.dim() != 1:
            raise ValueError(f"{fn}: {name}.dim()={t.dim()}, expected a 1-D tensor of shape (N,)")
    if y.dtype != x.dtype:
        raise TypeError(f"{fn}: y.dtype={y.dtype}, expected the dtype of x ({x.dtype})")
    if y.shape != x.shape:
        raise ValueError(f"{fn}: y.shape={tuple(y.shape)}, expected the shape of x {tuple(x.shape)}")
    if y.device != x.device:
        raise ValueError(f"{fn}: y.device={y.device}, expected the device of x ({x.device})")
    n, dim = x.shape[0], DIMS["N"]
    if not dim.admits(n):
        raise ValueError(f"{fn}: x.shape[0]={n}, expected {dim.min} <= N <= {dim.max}")


@subject(**ADD_CONTRACT, performance=ADD_PERFORMANCE)
def add(x, y):
    """``x + y`` for 1-D fp16/bf16/fp32 tensors of any stride; returns a new tensor."""
    check_add_args(x, y)
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out  # a grid of zero programs is not a launch every backend accepts
    BLOCK_SIZE = 1024
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    add_kernel[grid](x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out


# %%
# Demo
# ----
# A strided view and a broadcast scalar, with sizes that are not multiples of
# the block: the cases a textbook kernel gets wrong.

if __name__ == "__main__":
    base = torch.randn(2 * 3001 + 1)
    x = base[1::2]  # stride 2, storage offset 1
    y = torch.tensor([0.5]).expand(3001)  # stride 0
    print("strided + broadcast:", torch.equal(add(x=x, y=y), x + y))
    print("empty:", add(x=torch.empty(0), y=torch.empty(0)).shape)
