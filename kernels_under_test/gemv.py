"""
Matrix-vector product (GEMV)
============================

``y = A @ x`` for an fp16 matrix ``A`` (M, N) and an fp16 vector ``x`` (N,),
accumulated and returned in fp32.  One program computes one output element: it
walks its row of ``A`` in chunks of ``BLOCK_N`` columns, so N is not limited by
the block size.

Two subjects show the two honest ways to treat layouts:

* :func:`gemv_textbook` indexes ``A`` as ``row * N + col``.  That is only right
  for a row-major contiguous ``A`` and a unit-stride ``x``, so its contract
  claims ``layouts="contiguous"`` and its launcher *rejects* anything else
  rather than computing on the wrong elements.
* :func:`gemv_strided` takes every stride as an argument and claims
  ``layouts="any"``: transposed ``A``, sliced ``x``, stride-0 broadcasts.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Performance, Tensor, subject

# %%
# Compute kernels
# ---------------
# fp16 products are summed in an fp32 vector of partial sums: an fp16
# accumulator loses about three digits over a few thousand terms.


@triton.jit
def gemv_contiguous_kernel(
    a_ptr,  # *Pointer* to A, row-major contiguous (M, N)
    x_ptr,  # *Pointer* to x, unit stride (N,)
    y_ptr,  # *Pointer* to the fp32 output y (M,)
    N,  # Number of columns of A
    BLOCK_N: tl.constexpr,  # Columns per step of the loop over a row
):
    row = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        a = tl.load(a_ptr + row * N + cols, mask=mask, other=0.0)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0)
        acc += a.to(tl.float32) * x.to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def gemv_strided_kernel(
    a_ptr,  # *Pointer* to A (M, N)
    x_ptr,  # *Pointer* to x (N,)
    y_ptr,  # *Pointer* to the fp32 output y (M,)
    N,  # Number of columns of A
    stride_am,  # Elements between rows of A (0 if A is broadcast along M)
    stride_an,  # Elements between columns of A
    stride_x,  # Elements between entries of x (0 for a broadcast scalar)
    stride_y,  # Elements between entries of y
    BLOCK_N: tl.constexpr,  # Columns per step of the loop over a row
):
    row = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        a = tl.load(a_ptr + row * stride_am + cols * stride_an, mask=mask, other=0.0)
        x = tl.load(x_ptr + cols * stride_x, mask=mask, other=0.0)
        acc += a.to(tl.float32) * x.to(tl.float32)
    tl.store(y_ptr + row * stride_y, tl.sum(acc, axis=0))


# %%
# Launchers and contracts
# -----------------------

DIMS = {"M": Dim(1, 4096), "N": Dim(1, 8192)}
BLOCK_N = 128


def gemv_contract(layouts):
    """The shared contract; only the layout claim differs between the subjects."""
    return dict(
        family="gemv",
        inputs={
            "A": Tensor(("M", "N"), dtypes=("float16",), layouts=layouts),
            "x": Tensor(("N",), dtypes=("float16",), layouts=layouts),
        },
        dims=DIMS,
        oracle=lambda A, x: A @ x,
        reduces="N",
        # Rounding errors of a dot product scale with |A| @ |x|, not with the result.
        error_scale=lambda A, x: A.abs() @ x.abs(),
    )


# Performance contract (timed on CUDA by the ``performance`` cell): a GEMV is
# bound by reading A once; x is read and the fp32 y written once as well.
GEMV_PERFORMANCE = Performance(
    dims={"M": DIMS["M"].max, "N": DIMS["N"].max},
    dtype="float16",
    bytes=lambda dims, dtypes: (dims["M"] * dims["N"] * dtypes["A"].itemsize + dims["N"] * dtypes["x"].itemsize
                                + dims["M"] * 4),
    baseline=lambda A, x: A @ x,
)


def check_gemv_args(A, x, fn):
    """Raise TypeError/ValueError unless ``A`` and ``x`` fit the shapes and dtypes."""
    for name, t, ndim in (("A", A, 2), ("x", x, 1)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype != torch.float16:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected torch.float16")
        if t.dim() != ndim:
            raise ValueError(f"{fn}: {name}.dim()={t.dim()}, expected a {ndim}-D tensor")
    if x.device != A.device:
        raise ValueError(f"{fn}: x.device={x.device}, expected the device of A ({A.device})")
    M, N = A.shape
    for axis, sym, n in ((0, "M", M), (1, "N", N)):
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: A.shape[{axis}]={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")
    if x.shape[0] != N:
        raise ValueError(f"{fn}: x.shape[0]={x.shape[0]}, expected N={N} (A.shape[1])")


@subject(**gemv_contract("contiguous"), performance=GEMV_PERFORMANCE)
def gemv_textbook(A, x):
    """``A @ x`` in fp32 for a row-major contiguous fp16 ``A`` and unit-stride ``x``."""
    check_gemv_args(A, x, "gemv_textbook")
    M, N = A.shape
    # The kernel computes addresses as row * N + col: refuse what that misreads.
    # (is_contiguous() ignores the strides of size-1 dims, which are never used.)
    if not A.is_contiguous():
        raise ValueError(f"gemv_textbook: A.stride()={A.stride()}, expected row-major contiguous ({N}, 1)")
    if not x.is_contiguous():
        raise ValueError(f"gemv_textbook: x.stride()={x.stride()}, expected a unit-stride vector (1,)")
    # A view that starts inside its storage (a storage offset) is contiguous too: the
    # pointer Triton receives already points at its first element.
    y = torch.empty((M,), dtype=torch.float32, device=A.device)
    grid = (M,)
    gemv_contiguous_kernel[grid](A, x, y, N, BLOCK_N=BLOCK_N)
    return y


@subject(**gemv_contract("any"), performance=GEMV_PERFORMANCE)
def gemv_strided(A, x):
    """``A @ x`` in fp32 for fp16 ``A`` and ``x`` of any strides, offsets or broadcasts."""
    check_gemv_args(A, x, "gemv_strided")
    M, N = A.shape
    y = torch.empty((M,), dtype=torch.float32, device=A.device)
    grid = (M,)
    gemv_strided_kernel[grid](
        A, x, y, N,
        A.stride(0), A.stride(1),
        x.stride(0),
        y.stride(0),
        BLOCK_N=BLOCK_N,
    )
    return y


# %%
# Demo
# ----

if __name__ == "__main__":
    A = torch.randn(300, 77, dtype=torch.float16)
    x = torch.randn(2 * 300, dtype=torch.float16)[::2]
    ref = A.double().t() @ x.double()
    print("strided, A transposed:", (gemv_strided(A=A.t(), x=x) - ref).abs().max().item())
    try:
        gemv_textbook(A=A.t(), x=x)
    except ValueError as exc:
        print("textbook rejects it:", exc)
