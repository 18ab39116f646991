"""Kernels whose bug is an int32 offset past 2^31 elements, for the ``shape:large-index`` cell.

The int32-offset vector addition claims the contract of ``kernels_under_test.vector_add.add``.
The others (a layer norm with a weight and bias, a full sum, a persistent softmax over 132 and
over 1056 programs, a sum over the middle dim on a grid of rows x tiles) have no twin in
``kernels_under_test`` admitting such sizes, so their correct twins live here too, without
``xfail``: the same kernel with 64-bit offsets.  The last two have the grids of two public
kernels the cell's emulation once gave false alarms on (examples/FINDINGS.md): the Triton
softmax tutorial's and FlagGems' ``sum_dim``.

The textbook ``offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)`` is right
for every vector below 2^31 elements: ``pid`` is int32, so past that the
product wraps to a negative offset and the last blocks read and write 4 GiB
before the tensors.  Only the ``shape:large-index`` cell reaches such sizes.
"""

import torch
import triton
import triton.language as tl

from kernels_under_test.vector_add import ADD_CONTRACT, check_add_args
from triton_conformance import Dim, Scalar, Tensor, Tolerance, subject

BUGS = [
    # CPU: the emulation checks every address and stops at the first store outside the tensors;
    # CUDA: the store lands in the gap left before the output, which is checked afterwards.
    ("zoo_add_int32_offsets", "shape:large-index", "unsafe", "oob-write"),
    # A weight and bias (N,) beside rows (M, N): parameters broadcast over the rows, built whole.
    ("zoo_layer_norm_rows_int32", "shape:large-index", "unsafe", "oob-write"),
    # A full reduction (0-d): the wrapped loads lie outside every tensor (masked off, recorded).
    ("zoo_sum_all_int32", "shape:large-index", "unsafe", "poisoned-read"),
    # A persistent kernel: its loops over ~500k rows run only their last iterations.
    ("zoo_softmax_persistent_int32", "shape:large-index", "unsafe", "oob-write"),
    # The same over 1056 programs (the softmax tutorial's grid): every program runs, each its last row.
    ("zoo_softmax_persistent_wide_int32", "shape:large-index", "unsafe", "oob-write"),
    # A reduction over the middle dim on a (rows, 5 tiles) grid: the wrapped loads are masked off, recorded.
    ("zoo_sum_middle_tiles_int32", "shape:large-index", "unsafe", "poisoned-read"),
    # Rows of ~32k on a grid capped at 65535: only a row start passes 2^31, every element offset in a row is int64.
    ("zoo_log_softmax_row_start_int32", "shape:large-index", "unsafe", "oob-write"),
]


@triton.jit
def add_kernel_int32_offsets(
    x_ptr,  # *Pointer* to the first input vector
    y_ptr,  # *Pointer* to the second input vector
    out_ptr,  # *Pointer* to the output vector
    n_elements,  # Number of elements in each vector
    stride_x,  # Element stride of x
    stride_y,  # Element stride of y
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # BUG: int32, wraps past 2^31 elements
    mask = offs < n_elements
    x = tl.load(x_ptr + offs * stride_x, mask=mask)
    y = tl.load(y_ptr + offs * stride_y, mask=mask)
    out = x.to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


@subject(**ADD_CONTRACT, name="zoo_add_int32_offsets",
         xfail="offsets are int32: past 2^31 elements pid * BLOCK_SIZE wraps to a negative offset")
def zoo_add_int32_offsets(x, y):
    """Bug: correct below 2^31 elements; past it the last blocks address memory 4 GiB before the tensors."""
    check_add_args(x, y, "zoo_add_int32_offsets")
    n = x.shape[0]
    out = torch.empty((n,), dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    BLOCK_SIZE = 1024
    add_kernel_int32_offsets[(triton.cdiv(n, BLOCK_SIZE),)](
        x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out


# -- row kernels with parameters broadcast over the rows: a layer norm over ~2^31 elements ---------------
# The weight and bias (N,) lack the rows' dim M: the cell builds them whole and small, only x is huge.

LAYER_NORM_ROWS = dict(
    family="layer_norm_rows",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32")),
            "weight": Tensor(("N",), dtypes=("float16", "float32")),
            "bias": Tensor(("N",), dtypes=("float16", "float32"))},
    dims={"M": Dim(1, 1 << 32), "N": Dim(1, 1024)},
    scalars={"eps": Scalar(1e-5, 1e-5)},
    oracle=lambda x, weight, bias, eps: torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps),
    reduces="N",
    tolerance=Tolerance(rtol=2e-2, atol=2e-2),
)


@triton.jit
def layer_norm_rows_kernel(x_ptr, w_ptr, b_ptr, out_ptr, stride_row, N, eps, BLOCK_N: tl.constexpr,
                           WIDE: tl.constexpr):
    row = tl.program_id(axis=0)
    if WIDE:
        row = row.to(tl.int64)  # the fix: 64-bit row offsets
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)  # int32 unless WIDE
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    tl.store(out_ptr + row * stride_row + cols, (diff * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)


def _layer_norm_rows(x, weight, bias, eps, wide, name):
    if x.dim() != 2 or weight.shape != (x.shape[1],) or bias.shape != (x.shape[1],):
        raise ValueError(f"{name}: x (M, N) with weight and bias (N,) expected, got {tuple(x.shape)}, "
                         f"{tuple(weight.shape)}, {tuple(bias.shape)}")
    if not (x.is_contiguous() and weight.is_contiguous() and bias.is_contiguous()):
        raise ValueError(f"{name}: contiguous inputs expected")
    if not (x.dtype == weight.dtype == bias.dtype) or x.dtype not in (torch.float16, torch.float32):
        raise TypeError(f"{name}: x, weight and bias of one dtype, float16 or float32, expected")
    M, N = x.shape
    if not (1 <= M <= 1 << 32 and 1 <= N <= 1024):
        raise ValueError(f"{name}: 1 <= M <= 2^32 and 1 <= N <= 1024 expected, got M={M}, N={N}")
    out = torch.empty_like(x)
    layer_norm_rows_kernel[(M,)](x, weight, bias, out, x.stride(0), N, eps,
                                 BLOCK_N=triton.next_power_of_2(N), WIDE=wide)
    return out


@subject(**LAYER_NORM_ROWS, name="zoo_layer_norm_rows")
def zoo_layer_norm_rows(x, weight, bias, eps):
    """Correct: 64-bit row offsets (the twin of the buggy one below)."""
    return _layer_norm_rows(x, weight, bias, eps, True, "zoo_layer_norm_rows")


@subject(**LAYER_NORM_ROWS, name="zoo_layer_norm_rows_int32",
         xfail="row * stride_row is int32: past 2^31 elements the last rows are stored 4 GiB before out")
def zoo_layer_norm_rows_int32(x, weight, bias, eps):
    """Bug: int32 row offsets."""
    return _layer_norm_rows(x, weight, bias, eps, False, "zoo_layer_norm_rows_int32")


# -- a full reduction: a sum over everything, 0-d ------------------------------------------------------

SUM_ALL = dict(
    family="sum_all",
    inputs={"x": Tensor(("N",), dtypes=("float16", "float32"))},
    dims={"N": Dim(1, 1 << 32)},
    oracle=lambda x: x.sum(),
    reduces="N",
    deterministic=False,  # atomics: the order of the partial sums varies
)


@triton.jit
def sum_all_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    pid = tl.program_id(axis=0)
    if WIDE:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # int32 unless WIDE
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def _sum_all(x, wide, name):
    if x.dim() != 1 or not x.is_contiguous() or x.dtype not in (torch.float16, torch.float32) or x.numel() < 1:
        raise ValueError(f"{name}: a non-empty contiguous float16/float32 vector expected")
    out = torch.zeros((), dtype=torch.float32, device=x.device)
    BLOCK = 1024
    sum_all_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK, WIDE=wide)
    return out


@subject(**SUM_ALL, name="zoo_sum_all")
def zoo_sum_all(x):
    """Correct: 64-bit offsets."""
    return _sum_all(x, True, "zoo_sum_all")


@subject(**SUM_ALL, name="zoo_sum_all_int32",
         xfail="pid * BLOCK is int32: past 2^31 elements the last blocks load 4 GiB before x")
def zoo_sum_all_int32(x):
    """Bug: int32 offsets; the wrapped loads are masked off by nothing."""
    return _sum_all(x, False, "zoo_sum_all_int32")


# -- a persistent kernel: the fused-softmax tutorial's fixed grid, each program looping over rows ---------

NUM_PROGRAMS = 132  # an H100's SMs; the tutorial asks the device, the interpreter has none

SOFTMAX_ROWS = dict(
    family="softmax_rows_persistent",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"))},
    dims={"M": Dim(1, 1 << 32), "N": Dim(1, 1024)},
    oracle=lambda x: torch.softmax(x, dim=-1),
    reduces="N",
)


@triton.jit
def softmax_persistent_kernel(out_ptr, in_ptr, row_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                              WIDE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    stride = row_stride.to(tl.int64) if WIDE else row_stride
    for row_idx in tl.range(row_start, n_rows, row_step):
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        row = tl.load(in_ptr + row_idx * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        num = tl.exp(row - tl.max(row, axis=0))
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row_idx * stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _softmax_persistent(x, wide, name, programs=NUM_PROGRAMS):
    if x.dim() != 2 or not x.is_contiguous() or x.dtype not in (torch.float16, torch.float32):
        raise ValueError(f"{name}: a contiguous (M, N) float16/float32 tensor expected")
    M, N = x.shape
    if not (1 <= M <= 1 << 32 and 1 <= N <= 1024):
        raise ValueError(f"{name}: 1 <= M <= 2^32 and 1 <= N <= 1024 expected, got M={M}, N={N}")
    out = torch.empty_like(x)
    programs = min(programs, M)
    softmax_persistent_kernel[(programs,)](out, x, x.stride(0), M, N, BLOCK=triton.next_power_of_2(N), WIDE=wide)
    return out


@subject(**SOFTMAX_ROWS, name="zoo_softmax_persistent")
def zoo_softmax_persistent(x):
    """Correct: a persistent softmax with 64-bit row offsets."""
    return _softmax_persistent(x, True, "zoo_softmax_persistent")


@subject(**SOFTMAX_ROWS, name="zoo_softmax_persistent_int32",
         xfail="row_idx * row_stride is int32: past 2^31 elements the last rows are stored 4 GiB before out")
def zoo_softmax_persistent_int32(x):
    """Bug: the tutorial's int32 row offsets."""
    return _softmax_persistent(x, False, "zoo_softmax_persistent_int32")


# The tutorial's own grid: SMs x occupancy (132 x 8 for its fp32 rows on an H100), more programs than rows
# reach in a loop's last few iterations: each program's last row is among the last 1056.
WIDE_GRID = 1056
SOFTMAX_ROWS_WIDE = {**SOFTMAX_ROWS, "family": "softmax_rows_persistent_wide"}


@subject(**SOFTMAX_ROWS_WIDE, name="zoo_softmax_persistent_wide")
def zoo_softmax_persistent_wide(x):
    """Correct: 64-bit row offsets, 1056 persistent programs."""
    return _softmax_persistent(x, True, "zoo_softmax_persistent_wide", WIDE_GRID)


@subject(**SOFTMAX_ROWS_WIDE, name="zoo_softmax_persistent_wide_int32",
         xfail="row_idx * row_stride is int32: past 2^31 elements the last rows are stored 4 GiB before out")
def zoo_softmax_persistent_wide_int32(x):
    """Bug: the tutorial's int32 row offsets, on the tutorial's grid."""
    return _softmax_persistent(x, False, "zoo_softmax_persistent_wide_int32", WIDE_GRID)


# -- a reduction over the middle dim, tiled along the last: a second, small grid axis ------------------
# FlagGems' sum_dim over dim 1 of (M, N, K) launches (M, cdiv(K, TILE_K)) programs, each summing a
# TILE_K-wide strip of one row's N x K block: the output's rows are spread over the second axis.

SUM_MIDDLE = dict(
    family="sum_middle_tiles",
    inputs={"x": Tensor(("M", "N", "K"), dtypes=("float16", "float32"))},
    dims={"M": Dim(1, 1 << 32), "N": Dim(1, 64), "K": Dim(1, 64)},
    oracle=lambda x: x.sum(1),
    reduces="N",
)


@triton.jit
def sum_middle_kernel(out_ptr, x_ptr, N, K, BLOCK_N: tl.constexpr, TILE_K: tl.constexpr, WIDE: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_k = tl.program_id(axis=1)
    if WIDE:
        pid_m = pid_m.to(tl.int64)  # the fix: 64-bit row offsets
    n = tl.arange(0, BLOCK_N)[:, None]
    k = pid_k * TILE_K + tl.arange(0, TILE_K)[None, :]
    x = tl.load(x_ptr + pid_m * N * K + n * K + k, mask=(n < N) & (k < K), other=0.0)  # int32 unless WIDE
    total = tl.sum(x.to(tl.float32), axis=0, keep_dims=True)
    tl.store(out_ptr + pid_m * K + k, total.to(out_ptr.dtype.element_ty), mask=k < K)


def _sum_middle(x, wide, name):
    if x.dim() != 3 or not x.is_contiguous() or x.dtype not in (torch.float16, torch.float32):
        raise ValueError(f"{name}: a contiguous (M, N, K) float16/float32 tensor expected")
    M, N, K = x.shape
    if not (1 <= M <= 1 << 32 and 1 <= N <= 64 and 1 <= K <= 64):
        raise ValueError(f"{name}: 1 <= M <= 2^32, 1 <= N, K <= 64 expected, got M={M}, N={N}, K={K}")
    out = torch.empty((M, K), dtype=x.dtype, device=x.device)
    TILE_K = 8  # K = 33 is 5 tiles
    sum_middle_kernel[(M, triton.cdiv(K, TILE_K))](out, x, N, K, BLOCK_N=triton.next_power_of_2(N), TILE_K=TILE_K,
                                                    WIDE=wide)
    return out


@subject(**SUM_MIDDLE, name="zoo_sum_middle_tiles")
def zoo_sum_middle_tiles(x):
    """Correct: 64-bit row offsets."""
    return _sum_middle(x, True, "zoo_sum_middle_tiles")


@subject(**SUM_MIDDLE, name="zoo_sum_middle_tiles_int32",
         xfail="pid_m * N * K is int32: past 2^31 elements the last rows are read 4 GiB before x")
def zoo_sum_middle_tiles_int32(x):
    """Bug: int32 row offsets."""
    return _sum_middle(x, False, "zoo_sum_middle_tiles_int32")


# -- a row start past 2^31, elements within a row in 64 bits: the cross-entropy bug of Liger #804 / #1483 -----
# The rows are capped at 65535 (a CUDA grid's y limit), so each row is ~32k wide.  Filled to just past 2^31
# elements, 65535 rows of 32769 start their last at 2^31 - 2: no row start wraps there.  The cell starts a row
# past 2^31 (65534 rows of 32770), where ``row * stride_row`` in int32 wraps.

LOG_SOFTMAX_WIDE_ROWS = dict(
    family="log_softmax_wide_rows",
    inputs={"x": Tensor(("M", "V"), dtypes=("float16", "float32"))},
    dims={"M": Dim(1, 65535), "V": Dim(1, 1 << 17)},
    oracle=lambda x: torch.log_softmax(x, dim=-1),
    reduces="V",
)


@triton.jit
def log_softmax_rows_kernel(
    out_ptr,  # *Pointer* to the output (M, V)
    x_ptr,  # *Pointer* to the logits (M, V)
    stride_row,  # Elements between two rows
    V,  # Columns
    BLOCK: tl.constexpr,  # Columns per program, a power of two >= V
    WIDE: tl.constexpr,  # 64-bit row starts (the fix)
):
    row = tl.program_id(axis=0)
    if WIDE:
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK).to(tl.int64)  # offsets within a row: 64-bit either way
    mask = cols < V
    start = row * stride_row  # int32 unless WIDE: wraps once a row starts past 2^31
    x = tl.load(x_ptr + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
    shifted = x - tl.max(x, axis=0)
    out = shifted - tl.log(tl.sum(tl.exp(shifted), axis=0))
    tl.store(out_ptr + start + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def _log_softmax_rows(x, wide, name):
    if x.dim() != 2 or not x.is_contiguous() or x.dtype not in (torch.float16, torch.float32):
        raise ValueError(f"{name}: a contiguous (M, V) float16/float32 tensor expected")
    M, V = x.shape
    if not (1 <= M <= 65535 and 1 <= V <= 1 << 17):
        raise ValueError(f"{name}: 1 <= M <= 65535 and 1 <= V <= 2^17 expected, got M={M}, V={V}")
    out = torch.empty_like(x)
    log_softmax_rows_kernel[(M,)](out, x, x.stride(0), V, BLOCK=triton.next_power_of_2(V), WIDE=wide)
    return out


@subject(**LOG_SOFTMAX_WIDE_ROWS, name="zoo_log_softmax_row_start")
def zoo_log_softmax_row_start(x):
    """Correct: 64-bit row starts."""
    return _log_softmax_rows(x, True, "zoo_log_softmax_row_start")


@subject(**LOG_SOFTMAX_WIDE_ROWS, name="zoo_log_softmax_row_start_int32",
         xfail="row * stride_row is int32: a row starting past 2^31 is read and stored 4 GiB before its tensor")
def zoo_log_softmax_row_start_int32(x):
    """Bug: int32 row starts only (element offsets within a row are int64)."""
    return _log_softmax_rows(x, False, "zoo_log_softmax_row_start_int32")
