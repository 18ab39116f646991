"""
Fused ReLU + dropout
====================

``out = relu(x) * keep / (1 - p)``, where each element is kept independently
with probability ``1 - p``, in one pass over memory:

* load ``x``, apply ReLU in fp32;
* draw ``r = tl.rand(seed, offsets)``, uniform on [0, 1), one per element,
  keyed by the element's flat index so the mask does not depend on the block size;
* keep the element when ``r >= p`` (so it is dropped with probability ``p``)
  and scale survivors by ``1 / (1 - p)`` so the expected output is ``relu(x)``;
* store, masking the tail so any element count works.

Contract (enforced by :func:`relu_dropout`): ``x`` is an fp16, bf16 or fp32
tensor of any shape and strides (the launcher makes it contiguous first) with
fewer than 2**31 elements (the kernel's offsets are int32); ``0 <= p < 1`` (``p = 1`` would divide by zero, so it is
rejected rather than special-cased); ``seed`` is an int in [0, 2**31). The
same ``(x, p, seed)`` gives bitwise-identical output.

Declared as a stochastic subject: its ``oracle`` is ReLU, the deterministic
part, and its model is :class:`~triton_conformance.Dropout`, which says each
output element is 0 or ``relu(x) / (1 - p)``, dropped independently with
probability ``p``.  The suite checks that with statistical tests.
"""

from numbers import Integral, Real

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Dropout, Scalar, Tensor, subject

# %%
# Compute kernel
# --------------
# Each program handles ``BLOCK_SIZE`` consecutive elements of the flattened tensor.


@triton.jit
def relu_dropout_kernel(
    x_ptr,  # *Pointer* to the (contiguous) input
    out_ptr,  # *Pointer* to the (contiguous) output, same shape and dtype
    n_elements,  # Number of elements in x
    p,  # Drop probability, 0 <= p < 1
    scale,  # 1 / (1 - p), computed once on the host in float64
    seed,  # Seed of the random stream; the same seed gives the same mask
    BLOCK_SIZE: tl.constexpr,  # Elements per program; a power of two
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # The last block runs past the end unless n_elements is a multiple of BLOCK_SIZE.
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    # Keyed by the global offset, not the position in the block: a block-local
    # key would give every block the same mask.
    r = tl.rand(seed, offsets)
    keep = r >= p
    out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


# %%
# Contract and launcher
# ---------------------
# The launcher checks every argument against the contract before launching,
# so an input outside it is a clear exception, never silent numbers.

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_ELEMENTS = 2**31 - 1  # int32 offsets in the kernel
MAX_SEED = 2**31 - 1  # an int32 argument on every backend
BLOCK_SIZE = 1024

# Any shape works (the kernel sees x.numel() elements in memory order); the
# contract declares two dims so that the suite can look for masks repeating by row.
DROPOUT_CONTRACT = dict(
    family="dropout",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "bfloat16", "float32"), layouts="any")},
    dims={"M": Dim(0, MAX_ELEMENTS), "N": Dim(0, MAX_ELEMENTS)},
    scalars={"p": Scalar(0.0, 0.999), "seed": Scalar(0, MAX_SEED, kind="int")},
    oracle=lambda x, p, seed: torch.relu(x),  # the deterministic part; the model adds the drop
    model=Dropout(p="p", seed="seed"),
    deterministic=False,
    max_elements=MAX_ELEMENTS,
)


def check_dropout_args(x, p, seed, fn="relu_dropout"):
    """Raise TypeError/ValueError unless ``(x, p, seed)`` is inside the contract; return ``(p, seed)`` normalised."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x is a {type(x).__name__}, expected a torch.Tensor")
    if x.dtype not in DTYPES:
        raise TypeError(f"{fn}: x.dtype={x.dtype}, expected one of float16, bfloat16, float32")
    if x.numel() > MAX_ELEMENTS:
        raise ValueError(f"{fn}: x.numel()={x.numel()}, expected at most {MAX_ELEMENTS} elements")
    if isinstance(p, bool) or not isinstance(p, Real):
        raise TypeError(f"{fn}: p={p!r}, expected a real number")
    p = float(p)
    if not 0.0 <= p < 1.0:  # also false for NaN
        raise ValueError(f"{fn}: p={p!r}, expected 0 <= p < 1")
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise TypeError(f"{fn}: seed={seed!r}, expected an int")
    seed = int(seed)
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{fn}: seed={seed!r}, expected 0 <= seed <= {MAX_SEED}")
    return p, seed


@subject(**DROPOUT_CONTRACT)
def relu_dropout(x, p, seed):
    """``relu(x)`` with each element dropped (set to 0) with probability ``p`` and survivors scaled by ``1/(1-p)``.

    ``x``: an fp16/bf16/fp32 tensor of any shape and strides; ``p``: 0 <= p < 1;
    ``seed``: an int in [0, 2**31). Returns a new contiguous tensor of x's shape.
    The mask depends only on ``seed`` and each element's row-major index.
    """
    p, seed = check_dropout_args(x, p, seed)
    # The kernel walks memory in order; any other layout is copied first, so the
    # mask follows the logical (row-major) order of the elements.
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out  # a grid of zero programs is not a launch every backend accepts
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    relu_dropout_kernel[grid](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_SIZE=BLOCK_SIZE)
    return out


# %%
# Demo
# ----
# The drop rate among positive inputs should be close to p, and the mean of the
# output close to the mean of relu(x).

if __name__ == "__main__":
    x = torch.randn(3001)
    y = relu_dropout(x, p=0.3, seed=1234)
    positive = x > 0
    print("drop rate among positives:", (y[positive] == 0).float().mean().item())
    print("mean out / mean relu:", (y.mean() / torch.relu(x).mean()).item())
