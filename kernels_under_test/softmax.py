"""
Row softmax
===========

``out[i, :] = softmax(x[i, :])`` with one program per row, the whole row held
in one block of ``next_power_of_2(N)`` lanes.  What makes it correct beyond the
textbook version:

* padded lanes load ``-inf``, so they never win the row max and add
  ``exp(-inf) = 0`` to the sum;
* the row max is subtracted before ``exp``, so huge inputs cannot overflow;
* row and column strides are passed, so transposed, sliced, padded and
  broadcast inputs are read where they live.

It also declares :func:`softmax_block1024`, the same kernel behind a launcher
with a hard-coded block of 1024 lanes: a classic bug, kept as a known-failing
subject so that the suite can show it catches it.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, subject

# %%
# Compute kernel
# --------------


@triton.jit
def softmax_kernel(
    out_ptr,  # *Pointer* to the output matrix (M, N)
    x_ptr,  # *Pointer* to the input matrix (M, N)
    stride_xm,  # Elements between consecutive rows of x
    stride_xn,  # Elements between consecutive columns of x
    stride_om,  # Elements between consecutive rows of out
    stride_on,  # Elements between consecutive columns of out
    n_cols,  # N, the length of each row
    BLOCK_SIZE: tl.constexpr,  # Lanes per row; must be >= n_cols to see the whole row
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # -inf, not 0: a padded lane must lose the max even when every real value
    # is negative, and must contribute exp(-inf) = 0 to the sum.
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    # Subtracting the max keeps exp() <= 1, so huge logits do not overflow.
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    out = num / den
    tl.store(out_ptr + row * stride_om + cols * stride_on, out.to(out_ptr.dtype.element_ty), mask=mask)


# %%
# Launcher and contract
# ---------------------
# Value classes claimed, checked against ``torch.softmax`` in float64 on the
# interpreter and on an H200: huge logits (the max is subtracted), ties, and
# non-finite values.  A ``-inf`` logit gets weight 0, while a row holding
# ``+inf`` or NaN (or made only of ``-inf``) becomes all NaN, exactly as torch
# does: ``inf - inf`` is NaN, and one NaN lane makes the row sum NaN.

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DIMS = {"M": Dim(1, 1024), "N": Dim(1, 8192)}

SOFTMAX_CONTRACT = dict(
    family="softmax",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "bfloat16", "float32"), layouts="any")},
    dims=DIMS,
    oracle=lambda x: torch.softmax(x, dim=-1),
    reduces="N",
    values=("huge", "ties", "inf", "nan"),
)


def check_softmax_args(x, fn="softmax"):
    """Raise TypeError/ValueError unless ``x`` is inside the contract."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x is a {type(x).__name__}, expected a torch.Tensor")
    if x.dtype not in DTYPES:
        raise TypeError(f"{fn}: x.dtype={x.dtype}, expected one of float16, bfloat16, float32")
    if x.dim() != 2:
        raise ValueError(f"{fn}: x.dim()={x.dim()}, expected a 2-D tensor of shape (M, N)")
    for axis, sym in enumerate(("M", "N")):
        dim = DIMS[sym]
        if not dim.admits(x.shape[axis]):
            raise ValueError(f"{fn}: x.shape[{axis}]={x.shape[axis]}, expected {dim.min} <= {sym} <= {dim.max}")


@subject(**SOFTMAX_CONTRACT)
def softmax(x):
    """Softmax over the last dim of a 2-D fp16/bf16/fp32 tensor of any layout."""
    check_softmax_args(x)
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_SIZE = triton.next_power_of_2(N)
    grid = (M,)
    softmax_kernel[grid](
        out, x,
        x.stride(0), x.stride(1),
        out.stride(0), out.stride(1),
        N,
        BLOCK_SIZE=BLOCK_SIZE,
    )
    return out


# %%
# A known bug: a hard-coded block
# -------------------------------
# Someone benchmarked rows of 1024 and froze the block size.  The contract still
# claims N <= 8192, so rows longer than 1024 are normalised over their first
# 1024 columns only, and the rest keep the zeros of ``torch.zeros_like``: no
# error, no NaN, just wrong numbers.


@subject(**SOFTMAX_CONTRACT, xfail="hard-coded BLOCK_SIZE=1024 ignores columns past 1024")
def softmax_block1024(x):
    """Softmax that silently ignores columns past 1024 (kept as a known bug)."""
    check_softmax_args(x, fn="softmax_block1024")
    M, N = x.shape
    out = torch.zeros_like(x)
    BLOCK_SIZE = 1024
    softmax_kernel[(M,)](
        out, x,
        x.stride(0), x.stride(1),
        out.stride(0), out.stride(1),
        N,
        BLOCK_SIZE=BLOCK_SIZE,
    )
    return out


# %%
# Demo
# ----
# A transposed input with a non-power-of-two row length, and the bug showing
# up as soon as N passes 1024.

if __name__ == "__main__":
    x = torch.randn(300, 37).t()  # (37, 300), column stride 37
    print("transposed:", torch.allclose(softmax(x=x), torch.softmax(x, -1), atol=1e-6))
    x = torch.randn(4, 1500)
    err = (softmax_block1024(x=x) - torch.softmax(x, -1)).abs().max().item()
    print(f"softmax_block1024 at N=1500: max error {err:.3g}")
