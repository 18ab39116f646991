"""
Block-scaled fp8 matrix multiplication
======================================

``c = dequant(a) @ dequant(b)`` for fp8 (e4m3fn) ``a`` (M, K) with one fp32 scale
per token and group of ``GROUP_K`` along K, and fp8 ``b`` (K, N) with one fp32
scale per ``GROUP_K x GROUP_N`` block, as the DeepSeek-style W8A8 block GEMMs of
serving stacks take them.  Each program computes one ``BLOCK_M x BLOCK_N`` tile,
walking K in steps of ``BLOCK_K == GROUP_K`` so that each step's partial product
is scaled by exactly one scale of ``a`` per row and one of ``b``, and
accumulates in fp32.  Every edge is masked and every stride passed.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, subject
from triton_conformance.model.scales import Scale

# %%
# Compute kernel
# --------------


@triton.jit
def block_scaled_matmul_kernel(
    a_ptr, b_ptr, c_ptr,  # *Pointers* to a (M, K), b (K, N) and the fp32 output c (M, N)
    as_ptr, bs_ptr,  # *Pointers* to a's scales (M, cdiv(K, GROUP_K)) and b's (cdiv(K, GROUP_K), cdiv(N, GROUP_N))
    M, N, K,  # Problem size
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,  # Strides, in elements
    stride_asm, stride_ask, stride_bsk, stride_bsn,  # Strides of the scales
    GROUP_K: tl.constexpr,  # Elements of K one scale covers
    GROUP_N: tl.constexpr,  # Columns of b one scale covers
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  # Tile of c per program (BLOCK_N divides GROUP_N)
    BLOCK_K: tl.constexpr,  # Step along K: one group, so one scale per row of a and one of b
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
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        group = start_k // GROUP_K  # the scales' index along K: by the group size, not the step
        a_s = tl.load(as_ptr + offs_m * stride_asm + group * stride_ask, mask=mask_m, other=0.0)
        b_s = tl.load(bs_ptr + group * stride_bsk + (offs_n // GROUP_N) * stride_bsn, mask=mask_n, other=0.0)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
             mask=mask_m[:, None] & mask_n[None, :])


# %%
# Launcher and contract
# ---------------------

GROUP_K, GROUP_N = 128, 128
BLOCK_M, BLOCK_N = 32, 32
DIMS = {"M": Dim(1, 64), "K": Dim(1, 512), "N": Dim(1, 256)}

BLOCK_SCALED_CONTRACT = dict(
    family="fp8_block_matmul",
    inputs={
        "a": Tensor(("M", "K"), dtypes=("float8_e4m3fn",), layouts="any"),
        "b": Tensor(("K", "N"), dtypes=("float8_e4m3fn",), layouts="any"),
        "a_scale": Scale(("M", "K"), of="a", block=(1, GROUP_K), layouts="any"),  # per token and group
        "b_scale": Scale(("K", "N"), of="b", block=(GROUP_K, GROUP_N), layouts="any"),  # per 128 x 128 block
    },
    dims=DIMS,
    oracle=lambda a, b, a_scale, b_scale: a @ b,  # a and b arrive dequantized
    reduces="K",
    error_scale=lambda a, b, a_scale, b_scale: a.abs() @ b.abs(),
    dot_precision="fp8-fast-accumulate",
)


def check_block_scaled_args(a, b, a_scale, b_scale, fn):
    """Raise TypeError/ValueError unless the operands and their scales are inside the contract."""
    for name, t, dtype in (("a", a, torch.float8_e4m3fn), ("b", b, torch.float8_e4m3fn),
                           ("a_scale", a_scale, torch.float32), ("b_scale", b_scale, torch.float32)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype != dtype or t.dim() != 2:
            raise TypeError(f"{fn}: {name} is {t.dim()}-D {t.dtype}, expected a 2-D {dtype}")
    M, K = a.shape
    N = b.shape[1]
    if b.shape[0] != K:
        raise ValueError(f"{fn}: b.shape[0]={b.shape[0]}, expected K={K} (a.shape[1])")
    expected = {"a_scale": (M, triton.cdiv(K, GROUP_K)), "b_scale": (triton.cdiv(K, GROUP_K), triton.cdiv(N, GROUP_N))}
    for name, t in (("a_scale", a_scale), ("b_scale", b_scale)):
        if tuple(t.shape) != expected[name]:
            raise ValueError(f"{fn}: {name}.shape={tuple(t.shape)}, expected {expected[name]}")
    for sym, n in (("M", M), ("K", K), ("N", N)):
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: {sym}={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")


def launch_block_scaled(kernel, a, b, a_scale, b_scale, fn, block_k=GROUP_K):
    """Check the arguments, allocate c and run ``kernel`` (the block-scaled GEMM or a variant of it)."""
    check_block_scaled_args(a, b, a_scale, b_scale, fn)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    kernel[grid](a, b, c, a_scale, b_scale, M, N, K,
                 a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
                 GROUP_K=GROUP_K, GROUP_N=GROUP_N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=block_k)
    return c


@subject(**BLOCK_SCALED_CONTRACT)
def block_scaled_matmul_fp8(a, b, a_scale, b_scale):
    """fp32 ``dequant(a) @ dequant(b)``: a per token and group of 128 along K, b per 128 x 128 block."""
    return launch_block_scaled(block_scaled_matmul_kernel, a, b, a_scale, b_scale, "block_scaled_matmul_fp8")


# %%
# Demo
# ----

if __name__ == "__main__":
    a = torch.randn(40, 300).to(torch.float8_e4m3fn)
    b = torch.randn(300, 70).to(torch.float8_e4m3fn)
    a_s, b_s = torch.rand(40, 3) + 0.5, torch.rand(3, 1) + 0.5
    c = block_scaled_matmul_fp8(a=a, b=b, a_scale=a_s, b_scale=b_s)
    ref = (a.double() * a_s.double().repeat_interleave(128, 1)[:, :300]) @ (b.double() * b_s.double().repeat_interleave(
        128, 0)[:300].expand(300, 70))
    print("max abs err:", (c.double() - ref).abs().max().item())
