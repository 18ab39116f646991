"""
Matrix multiplication through tensor descriptors (TMA)
======================================================

``c = a @ b`` for fp16 a (M, K) and b (K, N), read and written through host
``TensorDescriptor`` objects, as Hopper kernels read through the copy engine.
Each program loads one ``BLOCK_M x BLOCK_K`` block of a and one ``BLOCK_K x
BLOCK_N`` block of b per step and accumulates ``tl.dot`` in fp32.  No load is
masked: a block that runs past K, M or N is zero-filled by the hardware, and a
store past M or N is dropped, so no dim needs to be a multiple of its block.

A descriptor has rules of its own: its base address and every stride but the
last must be 16-byte aligned, and its last dim contiguous.  A view that breaks
them (one element into its storage, rows K+1 elements apart, a transpose) is
copied first into rows that start on 16-byte boundaries.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_conformance import Dim, Tensor, subject

# %%
# Compute kernel
# --------------


@triton.jit
def tma_matmul_kernel(
    a_desc,  # Descriptor of a (M, K), blocks of BLOCK_M x BLOCK_K
    b_desc,  # Descriptor of b (K, N), blocks of BLOCK_K x BLOCK_N
    c_desc,  # Descriptor of the output c (M, N), blocks of BLOCK_M x BLOCK_N
    K,  # The reduced dim
    BLOCK_M: tl.constexpr,  # Rows of c per program
    BLOCK_N: tl.constexpr,  # Columns of c per program
    BLOCK_K: tl.constexpr,  # Step along K
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        # Past K the descriptor loads zeros, which add nothing to the dot product.
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


# %%
# Launcher and contract
# ---------------------

DIMS = {"M": Dim(1, 64), "K": Dim(1, 64), "N": Dim(1, 64)}
BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
ALIGN_BYTES = 16  # a descriptor's base and row strides

TMA_MATMUL_CONTRACT = dict(
    family="tma_matmul",
    inputs={
        "a": Tensor(("M", "K"), dtypes=("float16",), layouts="any", descriptor=True),
        "b": Tensor(("K", "N"), dtypes=("float16",), layouts="any", descriptor=True),
    },
    dims=DIMS,
    oracle=lambda a, b: a @ b,
    reduces="K",
    error_scale=lambda a, b: a.abs() @ b.abs(),
)


def check_tma_matmul_args(a, b, fn="tma_matmul"):
    """Raise TypeError/ValueError unless ``a`` and ``b`` are inside the contract."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype != torch.float16 or t.dim() != 2:
            raise TypeError(f"{fn}: {name} is a {t.dim()}-D {t.dtype} tensor, expected a 2-D torch.float16 one")
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"{fn}: b.shape[0]={b.shape[0]}, expected K={a.shape[1]} (a.shape[1])")
    for sym, n, where in (("M", a.shape[0], "a.shape[0]"), ("K", a.shape[1], "a.shape[1]"),
                          ("N", b.shape[1], "b.shape[1]")):
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: {where}={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")


def aligned_rows(rows, cols, like):
    """An empty (rows, cols) matrix whose rows start on 16-byte boundaries (padded past ``cols``)."""
    per_row = ALIGN_BYTES // like.element_size()
    return torch.empty((rows, triton.cdiv(cols, per_row) * per_row), dtype=like.dtype, device=like.device)[:, :cols]


def descriptor_ready(x):
    """``x`` itself if a descriptor may read it in place, else a copy in aligned rows."""
    per_row = ALIGN_BYTES // x.element_size()
    if x.stride(1) == 1 and x.stride(0) % per_row == 0 and x.data_ptr() % ALIGN_BYTES == 0:
        return x
    copy = aligned_rows(*x.shape, like=x)
    copy.copy_(x)
    return copy


def launch_tma_matmul(a, b, fn, prepare=descriptor_ready):
    """Check the arguments, lay a and b out for descriptors with ``prepare``, and run the kernel."""
    check_tma_matmul_args(a, b, fn)
    M, K = a.shape
    N = b.shape[1]
    a, b = prepare(a), prepare(b)
    c = aligned_rows(M, N, like=a)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    tma_matmul_kernel[grid](
        TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K]),
        TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N]),
        TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N]),
        K,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )
    return c


@subject(**TMA_MATMUL_CONTRACT)
def tma_matmul(a, b):
    """fp16 ``a @ b`` through tensor descriptors, for inputs of any layout (misaligned ones are copied)."""
    return launch_tma_matmul(a, b, "tma_matmul")


# %%
# Demo
# ----

if __name__ == "__main__":
    a = torch.randn(40, 31, dtype=torch.float16)  # rows of 62 bytes: copied into rows of 64
    b = torch.randn(50, 31, dtype=torch.float16).t()  # (31, 50), transposed: copied
    ref = a.double() @ b.double()
    print("max abs err:", (tma_matmul(a=a, b=b).double() - ref).abs().max().item())
