"""Buggy descriptor matmuls.  Each claims the contract of ``kernels_under_test.tma_matmul`` it mutates."""

from kernels_under_test.tma_matmul import TMA_MATMUL_CONTRACT, launch_tma_matmul
from triton_conformance import subject

BUGS = [
    ("zoo_tma_matmul_unaligned_rows", "descriptor:unaligned-rows", "unsafe", "misaligned-descriptor"),
]

# %%
# A descriptor on rows that are not 16-byte aligned
# -------------------------------------------------


def last_dim_contiguous(x):
    """BUG: a descriptor's last dim must be contiguous, but so must its rows start on 16-byte boundaries:
    a view with rows K+1 elements apart (or one element into its storage) is passed as it is."""
    return x if x.stride(-1) == 1 else x.contiguous()


@subject(**TMA_MATMUL_CONTRACT, name="zoo_tma_matmul_unaligned_rows",
         xfail="copies only views whose last dim is strided: rows K+1 elements apart reach the descriptor")
def zoo_tma_matmul_unaligned_rows(a, b):
    """Bug: right on the CPU's reads, an illegal instruction or garbage on the GPU for unaligned rows."""
    return launch_tma_matmul(a, b, "zoo_tma_matmul_unaligned_rows", prepare=last_dim_contiguous)

