"""Buggy stochastic rounding kernels.  Each claims the contract of
``kernels_under_test.stochastic_rounding.stochastic_round_bf16``."""

import torch
import triton
import triton.language as tl

from kernels_under_test.stochastic_rounding import ROUNDING_CONTRACT, check_rounding_args
from triton_conformance import subject

BUGS = [
    ("zoo_sround_short_noise", "stochastic:rate", "wrong", "rate-mismatch"),
    ("zoo_sround_nearest", "stochastic:seeds", "wrong", "seed-dependence"),
]

BLOCK_SIZE = 1024


def _launch(kernel, x, seed, name):
    seed = check_rounding_args(x, seed, name)
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    if x.numel() == 0:
        return out
    kernel[(triton.cdiv(x.numel(), BLOCK_SIZE),)](x, out, x.numel(), seed, BLOCK_SIZE=BLOCK_SIZE)
    return out


# %%
# Fifteen bits of noise
# ---------------------


@triton.jit
def short_noise_kernel(x_ptr, out_ptr, n_elements, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    bits = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.int32, bitcast=True)
    noise = tl.randint(seed, offsets).to(tl.int32, bitcast=True) & 0x7FFF  # BUG: 15 bits, the gap is 16
    rounded = (bits + noise) & -65536
    tl.store(out_ptr + offsets, rounded.to(tl.float32, bitcast=True), mask=mask)


@subject(**ROUNDING_CONTRACT, name="zoo_sround_short_noise",
         xfail="the noise has 15 bits, not 16: values round up half as often as they should")
def zoo_sround_short_noise(x, seed):
    return _launch(short_noise_kernel, x, seed, "zoo_sround_short_noise")


# %%
# Round to nearest in disguise
# ----------------------------


@triton.jit
def nearest_kernel(x_ptr, out_ptr, n_elements, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    bits = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.int32, bitcast=True)
    noise = 0x8000  # BUG: a fixed half-gap left from testing: this is round-half-up, not stochastic
    rounded = (bits + noise) & -65536
    tl.store(out_ptr + offsets, rounded.to(tl.float32, bitcast=True), mask=mask)


@subject(**ROUNDING_CONTRACT, name="zoo_sround_nearest",
         xfail="a constant half-gap replaces the noise: deterministic round-half-up, the same for every seed")
def zoo_sround_nearest(x, seed):
    return _launch(nearest_kernel, x, seed, "zoo_sround_nearest")
