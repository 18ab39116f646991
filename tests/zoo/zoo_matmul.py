"""Buggy matmuls.  Each claims the contract of ``kernels_under_test.matmul.matmul``."""

import torch
import triton
import triton.language as tl

from kernels_under_test.matmul import (
    BLOCK_K,
    BLOCK_M,
    BLOCK_N,
    MATMUL_CONTRACT,
    check_matmul_args,
    matmul_kernel,
)
from triton_conformance import subject

BUGS = [
    ("zoo_matmul_missing_k_mask", "shape:non-pow2", "unsafe", "poisoned-read"),
    # With K != N the swapped strides reach past b's storage; a square b gives wrong/mismatch.
    ("zoo_matmul_transposed_b_swap", "layout:transposed", "unsafe", "poisoned-read"),
    ("zoo_matmul_k_mask_offset_twice", "layout:contiguous", "wrong", "mismatch"),
]

# %%
# No mask on the K edge
# ---------------------


@triton.jit
def matmul_kernel_no_k_mask(
    a_ptr,  # *Pointer* to a (M, K)
    b_ptr,  # *Pointer* to b (K, N)
    c_ptr,  # *Pointer* to c (M, N)
    M, N, K,  # Problem size
    stride_am, stride_ak,  # Strides of a
    stride_bk, stride_bn,  # Strides of b
    stride_cm, stride_cn,  # Strides of c
    BLOCK_M: tl.constexpr,  # Rows of c per program
    BLOCK_N: tl.constexpr,  # Columns of c per program
    BLOCK_K: tl.constexpr,  # Step along K
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start_k in range(0, K, BLOCK_K):
        offs_k = start_k + tl.arange(0, BLOCK_K)
        # BUG: only the M and N edges are masked; "K is always a multiple of 32".
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=mask_m[:, None], other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


@subject(**MATMUL_CONTRACT, name="zoo_matmul_missing_k_mask",
         xfail="loads are not masked along K: past K they read neighbouring memory into the sum")
def zoo_matmul_missing_k_mask(a, b):
    """Bug: the K tail is unmasked, so K % 32 != 0 sums products of out-of-bounds elements."""
    check_matmul_args(a, b, "zoo_matmul_missing_k_mask")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    matmul_kernel_no_k_mask[(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
    )
    return c


# %%
# A well-meant special case for a transposed b
# --------------------------------------------


@subject(**MATMUL_CONTRACT, name="zoo_matmul_transposed_b_swap",
         xfail="swaps b's strides when b is a transposed view, reading b^T instead of b")
def zoo_matmul_transposed_b_swap(a, b):
    """Bug: a column-major b gets its strides swapped "to read it row-major" - a second transpose."""
    check_matmul_args(a, b, "zoo_matmul_transposed_b_swap")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    stride_bk, stride_bn = b.stride(0), b.stride(1)
    if stride_bk == 1 and stride_bn != 1:
        stride_bk, stride_bn = stride_bn, stride_bk  # BUG: the strides already describe the view
    matmul_kernel[(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), stride_bk, stride_bn, c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
    )
    return c



# %%
# The K mask offset twice
# -----------------------


@triton.jit
def matmul_kernel_k_mask_twice(
    a_ptr,  # *Pointer* to a (M, K)
    b_ptr,  # *Pointer* to b (K, N)
    c_ptr,  # *Pointer* to c (M, N)
    M, N, K,  # Problem size
    stride_am, stride_ak,  # Strides of a
    stride_bk, stride_bn,  # Strides of b
    stride_cm, stride_cn,  # Strides of c
    BLOCK_M: tl.constexpr,  # Rows of c per program
    BLOCK_N: tl.constexpr,  # Columns of c per program
    BLOCK_K: tl.constexpr,  # Step along K
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start_k in range(0, K, BLOCK_K):
        offs_k = start_k + tl.arange(0, BLOCK_K)
        # BUG: the tutorial's "offs_k < K - k * BLOCK_K" (meant for offsets relative to
        # the tile) kept after switching to absolute offsets: every tile after the
        # first is masked against K - start_k, so past K = 32 products go missing.
        mask_k = offs_k < K - start_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


@subject(**MATMUL_CONTRACT, name="zoo_matmul_k_mask_offset_twice",
         xfail="the K mask subtracts the tile start from K although offs_k already includes it: K > 32 drops products")
def zoo_matmul_k_mask_offset_twice(a, b):
    """Bug: ``offs_k < K - start_k`` with absolute ``offs_k``; right only while K fits in one tile."""
    check_matmul_args(a, b, "zoo_matmul_k_mask_offset_twice")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    matmul_kernel_k_mask_twice[(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
    )
    return c
