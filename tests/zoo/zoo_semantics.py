"""
What "contiguous" and "out of contract" mean, kernel by kernel
==============================================================

One elementwise op, ``out = 2 * x + 1`` on an fp32 matrix ``x`` (M, N), in two
kernels: one that indexes ``x`` as ``row * N + col`` (right only for a
row-major ``x``) and one that takes both strides.  Every launcher below claims
``layouts="contiguous"``; each family is a correct launcher and the bugs that
break one rule of the suite's out-of-contract semantics (issue 12 section 1):

* ``zoo_sem_offset``: contiguous means torch's ``is_contiguous()``.  A view
  that starts one element (or 64) into its storage is contiguous, so it is
  *inside* the contract and must be computed.  The bugs read from the storage's
  first element instead of the view's, or refuse a storage offset.
* ``zoo_sem_strided``: a launcher that claims contiguous inputs but really
  handles any stride is *accepted* (``A``) on a transposed ``x``: right
  beyond its claim passes.  With ``strict=True`` the same launcher fails: a
  strict contract must refuse what it does not claim.
* ``zoo_sem_assert``: a bare ``assert x.is_contiguous()`` (the Triton
  tutorials' idiom, no message) refuses a transposed ``x``: *rejected*.
  Without the check the row-major kernel computes garbage on it, and
  accepted-and-wrong is *wrong*.  Under ``strict=True`` a refusal without a
  message is an unclean rejection (a crash).

The correct twins live here (nothing in ``kernels_under_test`` has these
contracts).  Dims stay below 64 so that the interpreter runs each cell in
seconds.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, subject

BUGS = [
    ("zoo_sem_offset_from_storage_start", "layout:offset", "unsafe", "poisoned-read"),
    ("zoo_sem_offset_refused", "layout:offset", "crash", "exception"),
    ("zoo_sem_strided_strict", "layout:transposed", "wrong", "accepted-out-of-contract"),
    ("zoo_sem_assert_missing", "layout:transposed", "wrong", "mismatch"),
    ("zoo_sem_assert_strict", "layout:transposed", "crash", "unclean-rejection"),
]

BLOCK_M = 16
BLOCK_N = 16


# %%
# Compute kernels
# ---------------
# A 2D grid of BLOCK_M x BLOCK_N tiles; both dims are masked, so M and N need
# not be multiples of the block.


@triton.jit
def affine_rowmajor_kernel(
    x_ptr,  # *Pointer* to x, row-major contiguous (M, N): element (i, j) at i * N + j
    out_ptr,  # *Pointer* to the output, row-major (M, N)
    M, N,  # Rows and columns
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  # Tile shape
):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2.0 + 1.0, mask=mask)


@triton.jit
def affine_strided_kernel(
    x_ptr,  # *Pointer* to x (M, N), any strides
    out_ptr,  # *Pointer* to the output, row-major (M, N)
    M, N,  # Rows and columns
    stride_xm, stride_xn,  # Elements between rows and between columns of x
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  # Tile shape
):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], x * 2.0 + 1.0, mask=mask)


# %%
# Launchers
# ---------
# The ``x`` given to a kernel is a pointer to ``x``'s first element: Triton
# adds the storage offset itself, so a kernel never sees it.


def affine_oracle(x):
    return x * 2 + 1


def contract(family, **kw):
    return dict(family=family, inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="contiguous")},
                dims={"M": Dim(1, 64), "N": Dim(1, 64)}, oracle=affine_oracle, **kw)


def check_args(x, name):
    """Dtype and rank; contiguity is each launcher's own business below."""
    if x.dtype != torch.float32 or x.dim() != 2 or not (1 <= x.shape[0] <= 64 and 1 <= x.shape[1] <= 64):
        raise ValueError(f"{name}: x is {tuple(x.shape)} {x.dtype}; expected (M, N) float32, 1 <= M, N <= 64")


def check_contiguous(x, name):
    if not x.is_contiguous():
        raise ValueError(f"{name}: x.stride()={x.stride()}, expected a contiguous x")


def grid(M, N):
    return (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))


def launch_rowmajor(x):
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    affine_rowmajor_kernel[grid(M, N)](x, out, M, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out


def launch_strided(x):
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    affine_strided_kernel[grid(M, N)](x, out, M, N, x.stride(0), x.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out


# %%
# 1. An offset view is contiguous
# -------------------------------


@subject(**contract("zoo_sem_offset"), name="zoo_sem_offset")
def zoo_sem_offset(x):
    """``2 x + 1``; refuses a non-contiguous ``x`` in words, computes any contiguous one, offset or not."""
    check_args(x, "zoo_sem_offset")
    check_contiguous(x, "zoo_sem_offset")
    return launch_rowmajor(x)


@subject(**contract("zoo_sem_offset"), name="zoo_sem_offset_from_storage_start",
         xfail="views x from its storage's first element: a view with a storage offset is read from before its start")
def zoo_sem_offset_from_storage_start(x):
    """Bug: rebuilds ``x`` over its storage with offset 0 (as code written against raw storage does)."""
    check_args(x, "zoo_sem_offset")
    check_contiguous(x, "zoo_sem_offset")
    base = x.as_strided(x.shape, x.stride(), 0)  # BUG: storage_offset 0, not x.storage_offset()
    return launch_rowmajor(base)


@subject(**contract("zoo_sem_offset"), name="zoo_sem_offset_refused",
         xfail="refuses a contiguous x with a storage offset, which a contiguous claim covers")
def zoo_sem_offset_refused(x):
    """Bug: 'contiguous' taken to mean 'starts its storage': an offset view, contiguous to torch, is refused."""
    check_args(x, "zoo_sem_offset_refused")
    if not x.is_contiguous() or x.storage_offset() != 0:  # BUG: the storage offset does not matter
        raise ValueError(f"zoo_sem_offset_refused: x.storage_offset()={x.storage_offset()}, expected a contiguous "
                         "x at the start of its storage")
    return launch_rowmajor(x)


# %%
# 2. Right beyond the claim: accepted, unless the contract is strict
# ------------------------------------------------------------------


@subject(**contract("zoo_sem_strided"), name="zoo_sem_strided")
def zoo_sem_strided(x):
    """Claims contiguous ``x`` only, but passes both strides: a transposed or sliced ``x`` comes out right."""
    check_args(x, "zoo_sem_strided")
    return launch_strided(x)


@subject(**contract("zoo_sem_strided", strict=True), name="zoo_sem_strided_strict",
         xfail="strict=True: must refuse a non-contiguous x, but computes it (rightly)")
def zoo_sem_strided_strict(x):
    """The same launcher under a strict contract: anything outside the claim must be refused."""
    check_args(x, "zoo_sem_strided_strict")
    return launch_strided(x)  # BUG (strict only): no contiguity check


# %%
# 3. and 4. A bare assert refuses; no check at all computes garbage
# -----------------------------------------------------------------


@subject(**contract("zoo_sem_assert"), name="zoo_sem_assert")
def zoo_sem_assert(x):
    """The tutorials' idiom: a bare ``assert`` (no message) guards the row-major kernel."""
    check_args(x, "zoo_sem_assert")
    assert x.is_contiguous()
    return launch_rowmajor(x)


@subject(**contract("zoo_sem_assert"), name="zoo_sem_assert_missing",
         xfail="no contiguity check: the row-major kernel reads a transposed x in the wrong order")
def zoo_sem_assert_missing(x):
    """Bug: the assert was dropped; a transposed ``x`` is accepted and read as if it were row-major."""
    check_args(x, "zoo_sem_assert_missing")
    return launch_rowmajor(x)  # BUG: no check that x is contiguous


@subject(**contract("zoo_sem_assert", strict=True), name="zoo_sem_assert_strict",
         xfail="strict=True: a bare assert refuses without a message, an unclean rejection")
def zoo_sem_assert_strict(x):
    """The bare ``assert`` under a strict contract: a refusal must say why."""
    check_args(x, "zoo_sem_assert_strict")
    assert x.is_contiguous()  # BUG (strict only): no message
    return launch_rowmajor(x)
