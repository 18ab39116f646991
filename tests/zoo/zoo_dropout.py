"""Buggy fused ReLU + dropout kernels.  Each claims the contract of ``kernels_under_test.dropout.relu_dropout``.

Every one of them looks fine to a glance at a few outputs, and most keep the
overall drop rate near p at p = 0.5; the statistical cells must tell.
"""

import torch
import triton
import triton.language as tl

from kernels_under_test.dropout import DROPOUT_CONTRACT, check_dropout_args
from triton_conformance import subject

BUGS = [
    ("zoo_dropout_scale_one_minus_p", "stochastic:values", "wrong", "invalid-value"),
    ("zoo_dropout_inverted", "stochastic:rate", "wrong", "rate-mismatch"),
    ("zoo_dropout_seed_ignored", "stochastic:seeds", "wrong", "seed-dependence"),
    ("zoo_dropout_block_local", "stochastic:independence", "wrong", "not-independent"),
    ("zoo_dropout_relu_after_drop", "stochastic:values", "wrong", "invalid-value"),
    ("zoo_dropout_rate_off", "stochastic:rate", "wrong", "rate-mismatch"),
    ("zoo_dropout_rows_repeat", "stochastic:independence", "wrong", "not-independent"),
    ("zoo_dropout_value_keyed", "stochastic:independence", "wrong", "not-independent"),
]

BLOCK_SIZE = 1024


def _launch(kernel, x, p, seed, name, **extra):
    """The correct launcher's steps, around a buggy kernel."""
    p, seed = check_dropout_args(x, p, seed, name)
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_SIZE=BLOCK_SIZE, **extra)
    return out


# %%
# Survivors scaled by (1 - p)
# ---------------------------


@triton.jit
def dropout_scale_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    keep = tl.rand(seed, offsets) >= p
    out = tl.where(keep, y * (1.0 - p), 0.0)  # BUG: should be y * scale = y / (1 - p)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_scale_one_minus_p",
         xfail="survivors are multiplied by (1 - p) instead of divided by it")
def zoo_dropout_scale_one_minus_p(x, p, seed):
    return _launch(dropout_scale_kernel, x, p, seed, "zoo_dropout_scale_one_minus_p")


# %%
# Keep and drop inverted
# ----------------------


@triton.jit
def dropout_inverted_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    keep = tl.rand(seed, offsets) < p  # BUG: keeps with probability p, drops with 1 - p
    out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_inverted",
         xfail="keep and drop are swapped: elements are dropped with probability 1 - p")
def zoo_dropout_inverted(x, p, seed):
    return _launch(dropout_inverted_kernel, x, p, seed, "zoo_dropout_inverted")


# %%
# Seed ignored
# ------------


@triton.jit
def dropout_fixed_seed_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    keep = tl.rand(42, offsets) >= p  # BUG: a constant left over from debugging instead of seed
    out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_seed_ignored",
         xfail="the seed argument is ignored: every call draws the same mask")
def zoo_dropout_seed_ignored(x, p, seed):
    return _launch(dropout_fixed_seed_kernel, x, p, seed, "zoo_dropout_seed_ignored")


# %%
# Block-local random offsets
# --------------------------


@triton.jit
def dropout_block_local_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    block = tl.arange(0, BLOCK_SIZE)
    offsets = tl.program_id(0) * BLOCK_SIZE + block
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    keep = tl.rand(seed, block) >= p  # BUG: keyed by the position in the block, so every block shares one mask
    out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_block_local",
         xfail="random offsets are block-local: every block of 1024 elements gets the same mask")
def zoo_dropout_block_local(x, p, seed):
    return _launch(dropout_block_local_kernel, x, p, seed, "zoo_dropout_block_local")


# %%
# ReLU applied after the drop
# ---------------------------


@triton.jit
def dropout_relu_after_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    keep = tl.rand(seed, offsets) >= p
    # BUG: the drop is a sign mask (+1 keep, -1 drop) applied before the ReLU, as
    # if the two commuted; a dropped negative input comes back positive.
    sign = tl.where(keep, 1.0, -1.0)
    out = tl.maximum(x * sign, 0.0) * scale
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_relu_after_drop",
         xfail="the drop is a sign flip applied before the ReLU: dropped negative inputs come back positive")
def zoo_dropout_relu_after_drop(x, p, seed):
    return _launch(dropout_relu_after_kernel, x, p, seed, "zoo_dropout_relu_after_drop")


# %%
# Rate off by a small constant
# ----------------------------


@triton.jit
def dropout_squeezed_rand_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    # BUG: the uniform is squeezed into [0.01, 0.99) "to stay off the endpoints",
    # so P(drop) = (p - 0.01) / 0.98: right at p = 0.5, off by up to 0.01 elsewhere.
    r = tl.rand(seed, offsets) * 0.98 + 0.01
    keep = r >= p
    out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_rate_off",
         xfail="the uniform is squeezed into [0.01, 0.99): the drop rate is (p - 0.01) / 0.98, not p")
def zoo_dropout_rate_off(x, p, seed):
    return _launch(dropout_squeezed_rand_kernel, x, p, seed, "zoo_dropout_rate_off")


# %%
# Mask repeating every 32 rows
# ----------------------------
# The random offset is meant to be the element's (row, column) position; it is
# computed from the row's index within a 32-row tile instead of the row itself.


@triton.jit
def dropout_rows_kernel(x_ptr, out_ptr, n_elements, n_cols, p, scale, seed, BLOCK_SIZE: tl.constexpr,
                        TILE_ROWS: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    row = offsets // n_cols
    col = offsets - row * n_cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    keep = tl.rand(seed, (row % TILE_ROWS) * n_cols + col) >= p  # BUG: row % TILE_ROWS, not row
    out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_rows_repeat",
         xfail="the random offset uses the row within a 32-row tile: the mask repeats every 32 rows")
def zoo_dropout_rows_repeat(x, p, seed):
    p, seed = check_dropout_args(x, p, seed, "zoo_dropout_rows_repeat")
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    n_cols = x.shape[-1] if x.dim() else 1
    dropout_rows_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, n_cols, p, 1.0 / (1.0 - p), seed,
                                                       BLOCK_SIZE=BLOCK_SIZE, TILE_ROWS=32)
    return out


# %%
# Random stream keyed by the input's bits
# ---------------------------------------


@triton.jit
def dropout_value_keyed_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(x, 0.0)
    # BUG: the value's bits are the counter, not the element's index, so equal
    # inputs always share their fate and the mask is a function of x.
    keep = tl.rand(seed, x.to(tl.int32, bitcast=True)) >= p
    out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**DROPOUT_CONTRACT, name="zoo_dropout_value_keyed",
         xfail="the random stream is keyed by x's bits: equal inputs are always dropped together")
def zoo_dropout_value_keyed(x, p, seed):
    return _launch(dropout_value_keyed_kernel, x, p, seed, "zoo_dropout_value_keyed")
