"""Bugs that only the contract features of issue 12 section 2 can reach, each beside its correct twin.

No kernel in ``kernels_under_test`` declares these contracts, so the correct twins
live here too, without ``xfail``: the same kernel with the bug fixed (or, for the
accumulation, the same kernel declaring what it does).

* An online softmax whose running max starts at 0 instead of -inf: right for
  every row with a non-negative element, so N(0, 1) values (and any row short
  of exp's underflow) pass.  Its logits are declared in ``[-1e4, 1e4]``
  (``value_range``), so the ``values:extreme`` cell fills rows with large
  negative values: exp(x - 0) underflows to 0 in every lane and the row is 0/0.
* A per-row cross entropy with class indices ``index_of="V"`` and an ignore
  index (``special=(-100,)``) that masks the gather but forgets to zero the
  ignored rows' loss.
* A row sum that packs many short rows into one program, with a grid of
  ``M // ROWS`` tiles instead of ``cdiv(M, ROWS)``: right up to one tile (2048
  rows of one element), wrong for a long batch of short rows, which only a
  wide outer dim (``shape:beyond-block`` pinning ``M``) reaches.
* A row sum that accumulates fp16 inputs in fp16: caught when it declares the
  default fp32 accumulation, honoured when it declares
  ``accumulate={"float16": "float16", "float32": "float32"}``.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, subject

BUGS = [
    ("zoo_online_softmax_max_starts_at_zero", "values:extreme", "wrong", "nan-mismatch"),
    ("zoo_cross_entropy_ignore_index_not_zeroed", "dtype:float32", "wrong", "mismatch"),
    ("zoo_row_sum_packed_floor_grid", "shape:beyond-block", "unsafe", "unwritten"),
    ("zoo_row_sum_fp16_accumulator_undeclared", "dtype:float16", "wrong", "mismatch"),
]

# %%
# Online softmax
# --------------
# One program per row, the row read in blocks: the running max ``m`` and the
# running sum ``l`` of ``exp(x - m)`` are rescaled by ``exp(m_old - m_new)``
# whenever the max grows, then a second pass writes ``exp(x - m) / l``.


@triton.jit
def online_softmax_kernel(
    out_ptr,  # *Pointer* to the output (M, N)
    x_ptr,  # *Pointer* to the input (M, N)
    stride_xm, stride_xn,  # Strides of x
    stride_om, stride_on,  # Strides of out
    n_cols,  # N
    BLOCK: tl.constexpr,  # Lanes per block of the row
    MAX_STARTS_AT_ZERO: tl.constexpr,  # the bug: the running max starts at 0, not -inf
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK)
    if MAX_STARTS_AT_ZERO:
        m = tl.full([], 0.0, tl.float32)  # BUG: an upper bound only while some x >= 0
    else:
        m = tl.full([], -float("inf"), tl.float32)
    l = tl.full([], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < n_cols, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < n_cols, other=-float("inf"))
        out = tl.exp(x.to(tl.float32) - m) / l
        tl.store(out_ptr + row * stride_om + offs * stride_on, out.to(out_ptr.dtype.element_ty), mask=offs < n_cols)


ONLINE_SOFTMAX = dict(
    family="online_softmax",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any", value_range=(-1e4, 1e4))},
    dims={"M": Dim(1, 64), "N": Dim(1, 4096)},
    oracle=lambda x: torch.softmax(x, dim=-1),
    reduces="N",
)


def _online_softmax(x, max_starts_at_zero):
    if x.dim() != 2 or x.dtype not in (torch.float16, torch.float32):
        raise ValueError(f"online_softmax: x must be a 2-D float16/float32 tensor, got {tuple(x.shape)} {x.dtype}")
    M, N = x.shape
    if not (1 <= M <= 64 and 1 <= N <= 4096):
        raise ValueError(f"online_softmax: shape {(M, N)} outside M in [1, 64], N in [1, 4096]")
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    online_softmax_kernel[(M,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), N,
                                BLOCK=min(256, triton.next_power_of_2(N)), MAX_STARTS_AT_ZERO=max_starts_at_zero)
    return out


@subject(**ONLINE_SOFTMAX, name="zoo_online_softmax")
def zoo_online_softmax(x):
    """Correct: the running max starts at -inf."""
    return _online_softmax(x, False)


@subject(**ONLINE_SOFTMAX, name="zoo_online_softmax_max_starts_at_zero",
         xfail="the running max starts at 0: a row of large negative logits underflows to 0/0")
def zoo_online_softmax_max_starts_at_zero(x):
    """Bug: ``m = 0`` where ``-inf`` belongs; right whenever a row holds a value above about -87."""
    return _online_softmax(x, True)


# %%
# Cross entropy with an ignore index
# ----------------------------------
# One program per row: ``loss = logsumexp(logits) - logits[target]``, and 0 where
# ``target == -100`` (the ignore index), as ``F.cross_entropy(..., reduction="none")``.

IGNORE_INDEX = -100


@triton.jit
def cross_entropy_kernel(
    loss_ptr,  # *Pointer* to the per-row loss (M,)
    logits_ptr,  # *Pointer* to the logits (M, V)
    target_ptr,  # *Pointer* to the class indices (M,), int64
    stride_lm, stride_lv,  # Strides of logits
    stride_t,  # Stride of target
    n_classes,  # V
    IGNORE: tl.constexpr,  # the ignore index
    BLOCK: tl.constexpr,  # next_power_of_2(V)
    ZERO_IGNORED: tl.constexpr,  # False is the bug: ignored rows keep logsumexp as their loss
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(logits_ptr + row * stride_lm + cols * stride_lv, mask=cols < n_classes, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    t = tl.load(target_ptr + row * stride_t)
    keep = t != IGNORE
    picked = tl.load(logits_ptr + row * stride_lm + t * stride_lv, mask=keep, other=0.0).to(tl.float32)
    loss = lse - picked
    if ZERO_IGNORED:
        loss = tl.where(keep, loss, 0.0)
    tl.store(loss_ptr + row, loss.to(loss_ptr.dtype.element_ty))


CROSS_ENTROPY = dict(
    family="cross_entropy_rows",
    inputs={"logits": Tensor(("M", "V"), dtypes=("float32",), layouts="any"),
            "target": Tensor(("M",), dtypes=("int64",), layouts="any", index_of="V", special=(IGNORE_INDEX,))},
    dims={"M": Dim(1, 64), "V": Dim(1, 1024)},
    oracle=lambda logits, target: F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX, reduction="none"),
    reduces="V",
)


def _cross_entropy(logits, target, zero_ignored):
    if logits.dim() != 2 or logits.dtype != torch.float32:
        raise ValueError(f"cross_entropy: logits must be 2-D float32, got {tuple(logits.shape)} {logits.dtype}")
    if target.dtype != torch.int64 or target.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy: target must be int64 of shape {tuple(logits.shape[:1])}, "
                         f"got {tuple(target.shape)} {target.dtype}")
    M, V = logits.shape
    if not (1 <= M <= 64 and 1 <= V <= 1024):
        raise ValueError(f"cross_entropy: shape {(M, V)} outside M in [1, 64], V in [1, 1024]")
    loss = torch.empty(M, dtype=logits.dtype, device=logits.device)
    cross_entropy_kernel[(M,)](loss, logits, target, logits.stride(0), logits.stride(1), target.stride(0), V,
                               IGNORE=IGNORE_INDEX, BLOCK=triton.next_power_of_2(V), ZERO_IGNORED=zero_ignored)
    return loss


@subject(**CROSS_ENTROPY, name="zoo_cross_entropy")
def zoo_cross_entropy(logits, target):
    """Correct: an ignored row's loss is 0."""
    return _cross_entropy(logits, target, True)


@subject(**CROSS_ENTROPY, name="zoo_cross_entropy_ignore_index_not_zeroed",
         xfail="masks the gather at the ignore index but leaves logsumexp as the ignored rows' loss")
def zoo_cross_entropy_ignore_index_not_zeroed(logits, target):
    """Bug: the load is masked, the loss is not zeroed."""
    return _cross_entropy(logits, target, False)


# %%
# Packed row sums
# ---------------
# Short rows waste a program each, so the launcher packs ``ROWS`` of them into
# one (2048 rows of up to 2 elements, fewer for longer rows, one row per program
# past 16 elements) and launches a tile per ``ROWS`` rows.


@triton.jit
def packed_row_sum_kernel(
    out_ptr,  # *Pointer* to the output (M,)
    x_ptr,  # *Pointer* to the input (M, N)
    stride_xm, stride_xn,  # Strides of x
    n_rows, n_cols,  # M, N
    ROWS: tl.constexpr,  # rows per program
    BLOCK: tl.constexpr,  # next_power_of_2(N)
):
    pid = tl.program_id(axis=0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
    total = tl.sum(x.to(tl.float32), axis=1)
    tl.store(out_ptr + rows, total.to(out_ptr.dtype.element_ty), mask=rows < n_rows)


PACKED_ROW_SUM = dict(
    family="packed_row_sum",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
    dims={"M": Dim(1, 1 << 16), "N": Dim(1, 8192)},
    oracle=lambda x: x.sum(dim=-1),
    reduces="N",
)


def _packed_row_sum(x, floor_grid):
    if x.dim() != 2 or x.dtype != torch.float32:
        raise ValueError(f"packed_row_sum: x must be 2-D float32, got {tuple(x.shape)} {x.dtype}")
    M, N = x.shape
    if not (1 <= M <= 1 << 16 and 1 <= N <= 8192):
        raise ValueError(f"packed_row_sum: shape {(M, N)} outside M in [1, 65536], N in [1, 8192]")
    block = triton.next_power_of_2(N)
    rows = min(2048, 4096 // block) if block <= 16 else 1
    tiles = max(1, M // rows) if floor_grid else triton.cdiv(M, rows)  # BUG (floor_grid): drops a partial tile
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    packed_row_sum_kernel[(tiles,)](out, x, x.stride(0), x.stride(1), M, N, ROWS=rows, BLOCK=block)
    return out


@subject(**PACKED_ROW_SUM, name="zoo_row_sum_packed")
def zoo_row_sum_packed(x):
    """Correct: ``cdiv(M, ROWS)`` tiles."""
    return _packed_row_sum(x, False)


@subject(**PACKED_ROW_SUM, name="zoo_row_sum_packed_floor_grid",
         xfail="launches M // ROWS tiles: the rows of a partial last tile past the first are never written")
def zoo_row_sum_packed_floor_grid(x):
    """Bug: ``max(1, M // ROWS)`` tiles; right up to one tile, so only a batch past 2048 short rows shows it."""
    return _packed_row_sum(x, True)


# %%
# A row sum accumulating in its input dtype
# -----------------------------------------
# ``BLOCK`` lanes each add every ``BLOCK``-th element of the row into an
# accumulator of the input's dtype: fp16 inputs are summed in fp16.


@triton.jit
def input_dtype_row_sum_kernel(
    out_ptr,  # *Pointer* to the output (M,)
    x_ptr,  # *Pointer* to the input (M, N)
    stride_xm, stride_xn,  # Strides of x
    n_cols,  # N
    BLOCK: tl.constexpr,  # Lanes
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)  # the input's dtype: fp16 for fp16 inputs
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        acc += tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


INPUT_DTYPE_ROW_SUM = dict(
    family="input_dtype_row_sum",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any")},
    dims={"M": Dim(1, 64), "N": Dim(1, 8192)},
    oracle=lambda x: x.sum(dim=-1),
    reduces="N",
)


def _input_dtype_row_sum(x):
    if x.dim() != 2 or x.dtype not in (torch.float16, torch.float32):
        raise ValueError(f"row_sum: x must be a 2-D float16/float32 tensor, got {tuple(x.shape)} {x.dtype}")
    M, N = x.shape
    if not (1 <= M <= 64 and 1 <= N <= 8192):
        raise ValueError(f"row_sum: shape {(M, N)} outside M in [1, 64], N in [1, 8192]")
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    input_dtype_row_sum_kernel[(M,)](out, x, x.stride(0), x.stride(1), N, BLOCK=16)
    return out


@subject(**INPUT_DTYPE_ROW_SUM, name="zoo_row_sum_fp16_accumulator",
         accumulate={"float16": "float16", "float32": "float32"})
def zoo_row_sum_fp16_accumulator(x):
    """Correct as declared: it accumulates in the input dtype and says so."""
    return _input_dtype_row_sum(x)


@subject(**INPUT_DTYPE_ROW_SUM, name="zoo_row_sum_fp16_accumulator_undeclared",
         xfail="accumulates fp16 inputs in fp16 but declares the default fp32 accumulation")
def zoo_row_sum_fp16_accumulator_undeclared(x):
    """Bug (of the declaration): the same kernel, claiming fp32 accumulation."""
    return _input_dtype_row_sum(x)
