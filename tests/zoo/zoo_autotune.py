"""Bugs of ``@triton.autotune`` kernels (issue 13 section 2), each beside its correct twin.

No kernel in ``kernels_under_test`` declares these contracts, so the correct
twins live here too, without ``xfail``: the same kernel with the bug fixed.

* A softmax whose four configs pack 1, 1, 1 or 4 rows into one program, and
  which masks the columns but not the rows: the 4-row config writes past the
  last row when ``M % 4 != 0``.  Only that config's cell, ``autotune:config3``,
  runs it on every draw (the autotuner would pick it only where it is fastest).
* A row sum that accumulates blocks of a row into ``out`` with atomics after
  the launcher zeroes it, but declares no ``reset_to_zero``: the tuning
  benchmark runs every config on the same ``out``, so the final call adds to
  their sums (``autotune:benchmark``).
* A one-block softmax whose pruning keeps blocks at least as wide as the row,
  but whose key is the row count, not the row length: a block chosen for short
  rows is reused for long ones with the same row count, and the lanes past it
  are never computed (``autotune:key``).  It is launched through a helper, so
  the kernel is found a call below the launcher.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, subject

BUGS = [
    ("zoo_softmax_autotuned_rows_unmasked", "autotune:config3", "unsafe", "oob-write"),
    ("zoo_row_sum_atomic_no_reset_to_zero", "autotune:benchmark", "wrong", "mismatch"),
    ("zoo_softmax_autotune_key_omits_n", "autotune:key", "unsafe", "unwritten"),
]

# %%
# Rows per program
# ----------------

ROWS_CONFIGS = [
    triton.Config({"BLOCK_N": 32, "ROWS": 1}, num_warps=1),
    triton.Config({"BLOCK_N": 64, "ROWS": 1}, num_warps=2),
    triton.Config({"BLOCK_N": 128, "ROWS": 1}, num_warps=4),
    triton.Config({"BLOCK_N": 64, "ROWS": 4}, num_warps=4),
]


@triton.jit
def _rows_softmax_body(out_ptr, x_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
                       MASK_ROWS: tl.constexpr):
    rows = tl.program_id(axis=0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    m = tl.full([ROWS], -float("inf"), tl.float32)
    l = tl.zeros([ROWS], tl.float32)
    if MASK_ROWS:
        row_ok = rows < n_rows
    else:
        row_ok = rows >= 0  # BUG: every packed row is taken to exist
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = row_ok[:, None] & (offs[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * n_cols + offs[None, :], mask=mask, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=1))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = row_ok[:, None] & (offs[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * n_cols + offs[None, :], mask=mask, other=-float("inf"))
        y = tl.exp(x - m[:, None]) / l[:, None]
        tl.store(out_ptr + rows[:, None] * n_cols + offs[None, :], y, mask=mask)


@triton.autotune(configs=ROWS_CONFIGS, key=["n_rows", "n_cols"])
@triton.jit
def rows_kernel_buggy(out_ptr, x_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    _rows_softmax_body(out_ptr, x_ptr, n_rows, n_cols, BLOCK_N, ROWS, False)


@triton.autotune(configs=ROWS_CONFIGS, key=["n_rows", "n_cols"])
@triton.jit
def rows_kernel(out_ptr, x_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    _rows_softmax_body(out_ptr, x_ptr, n_rows, n_cols, BLOCK_N, ROWS, True)


ROWS_SOFTMAX = dict(
    family="zoo_softmax_rows_autotuned",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",))},
    dims={"M": Dim(1, 16), "N": Dim(1, 256)},
    oracle=lambda x: torch.softmax(x, dim=-1),
    reduces="N",
)


def _rows_softmax(kernel, x):
    M, N = x.shape
    out = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(M, meta["ROWS"]),)](out, x, M, N)
    return out


@subject(**ROWS_SOFTMAX, xfail="the 4-rows-per-program config does not mask rows past M")
def zoo_softmax_autotuned_rows_unmasked(x):
    return _rows_softmax(rows_kernel_buggy, x)


@subject(**ROWS_SOFTMAX)
def zoo_softmax_autotuned_rows(x):
    return _rows_softmax(rows_kernel, x)


# %%
# Atomic row sum, in place
# ------------------------

SUM_CONFIGS = [triton.Config({"BLOCK_N": b}, num_warps=w) for b, w in ((16, 1), (32, 1), (64, 2), (128, 4))]


@triton.jit
def _row_sum_body(out_ptr, x_ptr, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0)
    offs = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))


@triton.autotune(configs=SUM_CONFIGS, key=["n_cols"])  # BUG: no reset_to_zero=["out_ptr"]
@triton.jit
def row_sum_kernel_no_reset(out_ptr, x_ptr, n_cols, BLOCK_N: tl.constexpr):
    _row_sum_body(out_ptr, x_ptr, n_cols, BLOCK_N)


@triton.autotune(configs=SUM_CONFIGS, key=["n_cols"], reset_to_zero=["out_ptr"])
@triton.jit
def row_sum_kernel(out_ptr, x_ptr, n_cols, BLOCK_N: tl.constexpr):
    _row_sum_body(out_ptr, x_ptr, n_cols, BLOCK_N)


ROW_SUM = dict(
    family="zoo_row_sum_atomic_autotuned",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",)), "out": Tensor(("M",), dtypes=("float32",))},
    dims={"M": Dim(1, 16), "N": Dim(1, 512)},
    oracle=lambda x, out: x.sum(dim=-1),
    reduces="N",
    inplace=("out",),
    deterministic=False,  # float atomics: the order of the partial sums varies on a GPU
)


def _row_sum(kernel, x, out):
    M, N = x.shape
    out.zero_()
    kernel[lambda meta: (M, triton.cdiv(N, meta["BLOCK_N"]))](out, x, N)


@subject(**ROW_SUM, xfail="no reset_to_zero: the tuning benchmark's runs accumulate into out")
def zoo_row_sum_atomic_no_reset_to_zero(x, out):
    _row_sum(row_sum_kernel_no_reset, x, out)


@subject(**ROW_SUM)
def zoo_row_sum_atomic_reset_to_zero(x, out):
    _row_sum(row_sum_kernel, x, out)


# %%
# A key that omits the row length
# -------------------------------

BLOCK_CONFIGS = [triton.Config({"BLOCK_N": b}, num_warps=w) for b, w in ((32, 1), (64, 2), (128, 4), (256, 8))]


def keep_blocks_that_hold_the_row(configs, named_args, **kwargs):
    kept = [c for c in configs if c.kwargs["BLOCK_N"] >= named_args["n_cols"]]
    return kept or configs[-1:]


@triton.jit
def _one_block_softmax(out_ptr, x_ptr, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.autotune(configs=BLOCK_CONFIGS, key=["n_rows"],  # BUG: the mask depends on n_cols
                 prune_configs_by={"early_config_prune": keep_blocks_that_hold_the_row})
@triton.jit
def one_block_softmax_key_rows(out_ptr, x_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr):
    _one_block_softmax(out_ptr, x_ptr, n_cols, BLOCK_N)


@triton.autotune(configs=BLOCK_CONFIGS, key=["n_rows", "n_cols"],
                 prune_configs_by={"early_config_prune": keep_blocks_that_hold_the_row})
@triton.jit
def one_block_softmax(out_ptr, x_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr):
    _one_block_softmax(out_ptr, x_ptr, n_cols, BLOCK_N)


ONE_BLOCK = dict(
    family="zoo_softmax_one_block_autotuned",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",))},
    dims={"M": Dim(1, 16), "N": Dim(1, 256)},
    oracle=lambda x: torch.softmax(x, dim=-1),
    reduces="N",
)


def _launch_one_block(kernel, x):
    M, N = x.shape
    out = torch.empty_like(x)
    kernel[(M,)](out, x, M, N)
    return out


def softmax_rows_keyed(x):
    """The library's entry point (the subject calls it, so the kernel is found a call below)."""
    return _launch_one_block(one_block_softmax_key_rows, x)


def softmax_keyed(x):
    return _launch_one_block(one_block_softmax, x)


@subject(**ONE_BLOCK, xfail="key=['n_rows'] omits n_cols, which the block must cover")
def zoo_softmax_autotune_key_omits_n(x):
    return softmax_rows_keyed(x)


@subject(**ONE_BLOCK)
def zoo_softmax_autotune_key_covers_n(x):
    return softmax_keyed(x)
