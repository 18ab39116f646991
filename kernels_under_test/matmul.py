"""
Matrix multiplication
=====================

``c = a @ b`` for a (M, K) and b (K, N), tiled: each program computes one
``BLOCK_M x BLOCK_N`` tile of ``c`` by walking K in steps of ``BLOCK_K`` and
accumulating ``tl.dot`` products in fp32.  All three edges are masked, so no
dim needs to be a multiple of its block, and every stride is passed, so
transposed and sliced operands are read in place.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Performance, Tensor, subject

# %%
# Compute kernel
# --------------


@triton.jit
def matmul_kernel(
    a_ptr,  # *Pointer* to a (M, K)
    b_ptr,  # *Pointer* to b (K, N)
    c_ptr,  # *Pointer* to the output c (M, N)
    M, N, K,  # Problem size
    stride_am, stride_ak,  # Strides of a, in elements
    stride_bk, stride_bn,  # Strides of b
    stride_cm, stride_cn,  # Strides of c
    BLOCK_M: tl.constexpr,  # Rows of c per program
    BLOCK_N: tl.constexpr,  # Columns of c per program
    BLOCK_K: tl.constexpr,  # Step along the reduced dim
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs (no tf32 rounding)
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
        mask_k = offs_k < K
        # The K edge matters as much as the M and N edges: lanes past K must
        # load 0 so that they add nothing to the dot product.
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


# %%
# Launcher and contract
# ---------------------

DTYPES = (torch.float16, torch.float32)
DIMS = {"M": Dim(1, 1024), "K": Dim(1, 1024), "N": Dim(1, 1024)}
BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32

MATMUL_CONTRACT = dict(
    family="matmul",
    inputs={
        "a": Tensor(("M", "K"), dtypes=("float16", "float32"), layouts="any"),
        "b": Tensor(("K", "N"), dtypes=("float16", "float32"), layouts="any"),
    },
    dims=DIMS,
    oracle=lambda a, b: a @ b,
    reduces="K",
    # Rounding errors of a dot product scale with |a| @ |b|, not with the result.
    error_scale=lambda a, b: a.abs() @ b.abs(),
)


# Performance contract (timed on CUDA by the ``performance`` cell): 2 * M * N * K
# flops (a multiply and an add per term), judged against torch's fp16 matmul rate.
MATMUL_PERFORMANCE = Performance(
    dims={"M": DIMS["M"].max, "K": DIMS["K"].max, "N": DIMS["N"].max},
    dtype="float16",
    flops=lambda dims, dtypes: 2 * dims["M"] * dims["N"] * dims["K"],
    baseline=lambda a, b: a @ b,
)


def check_matmul_args(a, b, fn="matmul"):
    """Raise TypeError/ValueError unless ``a`` and ``b`` are inside the contract."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype not in DTYPES:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected float16 or float32")
        if t.dim() != 2:
            raise ValueError(f"{fn}: {name}.dim()={t.dim()}, expected a 2-D tensor")
    if b.dtype != a.dtype or b.device != a.device:
        raise TypeError(f"{fn}: b is {b.dtype} on {b.device}, expected a's {a.dtype} on {a.device}")
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"{fn}: b.shape[0]={b.shape[0]}, expected K={a.shape[1]} (a.shape[1])")
    for sym, n, where in (("M", a.shape[0], "a.shape[0]"), ("K", a.shape[1], "a.shape[1]"),
                          ("N", b.shape[1], "b.shape[1]")):
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: {where}={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")


@subject(**MATMUL_CONTRACT, performance=MATMUL_PERFORMANCE)
def matmul(a, b):
    """``a @ b`` for fp16 or fp32 matrices of any layout, accumulated in fp32."""
    check_matmul_args(a, b)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](
        a, b, c,
        M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
    )
    return c


# %%
# Demo
# ----

if __name__ == "__main__":
    a = torch.randn(70, 45)
    b = torch.randn(33, 45).t()  # (45, 33), transposed
    print("transposed b:", (matmul(a=a, b=b) - a @ b).abs().max().item())
