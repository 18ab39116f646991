"""
Stochastic rounding to the bfloat16 grid
========================================

Rounds each fp32 element to one of its two bfloat16 neighbours, away from zero
with probability equal to how far it lies past the lower one, so the result
is unbiased: E[out] = x.  Mixed-precision training uses this to keep small
updates from vanishing.

A bfloat16 number is the top 16 bits of an fp32 one, so in one pass:

* load ``x`` and view its bits as int32;
* add 16 random bits from ``tl.randint(seed, offsets)`` to the low half: the
  sum carries into the top half with probability (low half) / 2**16, which is
  exactly the distance past the lower neighbour over the gap (the sign bit is
  untouched, so this rounds the magnitude);
* clear the low half and store the bits as fp32 (exactly representable in
  bfloat16: ``out.to(torch.bfloat16)`` is lossless).

Contract (enforced by :func:`stochastic_round_bf16`): ``x`` is a finite fp32
tensor of any shape and strides (made contiguous first) with fewer than 2**31
elements; ``seed`` is an int in [0, 2**31).  The output is a new contiguous
fp32 tensor.  Declared as a stochastic subject: its ``oracle`` is the identity
and its model :class:`~triton_conformance.StochasticRounding`.
"""

from numbers import Integral

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Scalar, StochasticRounding, Tensor, subject

# %%
# Compute kernel
# --------------


@triton.jit
def stochastic_round_bf16_kernel(
    x_ptr,  # *Pointer* to the (contiguous) fp32 input
    out_ptr,  # *Pointer* to the (contiguous) fp32 output
    n_elements,  # Number of elements
    seed,  # Seed of the random stream
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    bits = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.int32, bitcast=True)
    # Keyed by the global offset, so every element gets its own random bits.
    noise = tl.randint(seed, offsets).to(tl.int32, bitcast=True) & 0xFFFF
    rounded = (bits + noise) & -65536  # -65536 == 0xFFFF0000: keep sign, exponent and 7 mantissa bits
    tl.store(out_ptr + offsets, rounded.to(tl.float32, bitcast=True), mask=mask)


# %%
# Contract and launcher
# ---------------------

MAX_ELEMENTS = 2**31 - 1
MAX_SEED = 2**31 - 1
BLOCK_SIZE = 1024

ROUNDING_CONTRACT = dict(
    family="stochastic_rounding",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
    dims={"M": Dim(0, MAX_ELEMENTS), "N": Dim(0, MAX_ELEMENTS)},
    scalars={"seed": Scalar(0, MAX_SEED, kind="int")},
    oracle=lambda x, seed: x.clone(),  # the deterministic part: the value being rounded
    model=StochasticRounding(grid="bfloat16", seed="seed"),
    deterministic=False,
    max_elements=MAX_ELEMENTS,
)


def check_rounding_args(x, seed, fn="stochastic_round_bf16"):
    """Raise TypeError/ValueError unless ``(x, seed)`` is inside the contract; return the seed as an int."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x is a {type(x).__name__}, expected a torch.Tensor")
    if x.dtype != torch.float32:
        raise TypeError(f"{fn}: x.dtype={x.dtype}, expected torch.float32")
    if x.numel() > MAX_ELEMENTS:
        raise ValueError(f"{fn}: x.numel()={x.numel()}, expected at most {MAX_ELEMENTS} elements")
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise TypeError(f"{fn}: seed={seed!r}, expected an int")
    if not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"{fn}: seed={seed!r}, expected 0 <= seed <= {MAX_SEED}")
    return int(seed)


@subject(**ROUNDING_CONTRACT)
def stochastic_round_bf16(x, seed):
    """``x`` (fp32, any shape and strides) stochastically rounded to the bfloat16 grid, returned as fp32."""
    seed = check_rounding_args(x, seed)
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    n = x.numel()
    if n == 0:
        return out  # a grid of zero programs is not a launch every backend accepts
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    stochastic_round_bf16_kernel[grid](x, out, n, seed, BLOCK_SIZE=BLOCK_SIZE)
    return out


# %%
# Demo
# ----
# 1 + 2**-10 lies an eighth of the way from 1 to the next bfloat16 (1 + 2**-7):
# about one element in eight rounds up, and the mean comes back to the input.

if __name__ == "__main__":
    x = torch.full((100_000,), 1.0 + 2.0**-10)
    y = stochastic_round_bf16(x, seed=7)
    print("values:", sorted(set(y.tolist())), "mean:", y.double().mean().item(), "input:", 1.0 + 2.0**-10)
