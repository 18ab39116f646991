"""Tutorial 08, grouped GEMM: ``group_gemm_fn(group_A, group_B)`` (pointer loads) and ``group_gemm_tma_fn(group_A,
group_B_T)`` (``tl.make_tensor_descriptor`` in the kernel), each a list of GEMMs of their own sizes computed by
one persistent launch, as the tutorial's test runs them.

Claims, from the tutorial (triton-lang/triton c147f098).  A group is declared
as two GEMMs of independent sizes (its test runs four, 1024^3 .. 128^3, its
benchmark four of one size): the launcher takes lists, so each subject wraps
two pairs in lists and returns the two products; the two share K (one
reduction length a subject, for its tolerance; its benchmark's GEMMs share N = K = 8192).  ``group_gemm_fn``: A_i (M_i,
K_i), B_i (K_i, N_i), fp16 (the kernel casts every pointer to
``tl.float16``), rows ``A.stride(0)`` apart and unit column stride (only the
leading dims are passed); "assume full tile for now": no masks, so every dim
a multiple of its tile, M and N of 128 and K of 64 (the largest of its
configs' blocks; its test's and benchmark's sizes are multiples of 128).
``group_gemm_tma_fn``: ``assert supports_tma()`` (the interpreter's compat
target and the H200 are capability 9.0), B_i transposed, (N_i, K_i) (the test
passes ``B.T.contiguous()``), fp16 or e4m3fn (``FP8=torch.float8_e4m3fn ==
group_A[0].dtype``: an e4m3fn result); descriptors zero-fill and clip, so any
M, and K, N multiples of 16 elements (a descriptor's 16-byte aligned rows, 16
bytes of e4m3fn).  Nothing else bounds the dims.
"""

from sources.tutorial_08_grouped_gemm import group_gemm_fn, group_gemm_tma_fn

from triton_conformance import Dim, Divisible, Tensor, subject

UNBOUNDED = 1 << 24
PAIRS = ("0", "1")
COST = 1 << 16  # a cost cap for the interpreter (not a claim)


def gemm_dims(low_mn, low_k):
    """M_i and N_i for each GEMM, and one K (a subject has one reduction length, which sets its tolerance)."""
    return {**{f"{d}{i}": Dim(low_mn, UNBOUNDED) for i in PAIRS for d in "MN"}, "K": Dim(low_k, UNBOUNDED)}


@subject(family="matmul",
         inputs={"a0": Tensor(("M0", "K"), dtypes=("float16",)), "b0": Tensor(("K", "N0"), same_dtype_as="a0"),
                 "a1": Tensor(("M1", "K"), same_dtype_as="a0"), "b1": Tensor(("K", "N1"), same_dtype_as="a0")},
         dims={**gemm_dims(128, 64), "TILE_MN": Dim(128, 128), "TILE_K": Dim(64, 64)},
         relations=(Divisible("K", by="TILE_K"), *(Divisible(f"{d}{i}", by="TILE_MN") for i in PAIRS for d in "MN")),
         oracle=lambda a0, b0, a1, b1, TILE_MN, TILE_K: (a0 @ b0, a1 @ b1), reduces="K",
         max_elements=COST)
def tutorial_group_gemm(a0, b0, a1, b1, TILE_MN, TILE_K):
    """``group_gemm_fn([a0, a1], [b0, b1])``: each C_i = A_i @ B_i, in fp16."""
    return tuple(group_gemm_fn([a0, a1], [b0, b1]))


@subject(family="matmul",
         inputs={"a0": Tensor(("M0", "K"), dtypes=("float16", "float8_e4m3fn"), descriptor=True),
                 "b0": Tensor(("N0", "K"), same_dtype_as="a0", descriptor=True),
                 "a1": Tensor(("M1", "K"), same_dtype_as="a0", descriptor=True),
                 "b1": Tensor(("N1", "K"), same_dtype_as="a0", descriptor=True)},
         dims={**gemm_dims(1, 16), "ALIGN": Dim(16, 16)},
         relations=(Divisible("K", by="ALIGN"), *(Divisible(f"N{i}", by="ALIGN") for i in PAIRS)),
         oracle=lambda a0, b0, a1, b1, ALIGN: (a0 @ b0.T, a1 @ b1.T), reduces="K",
         error_scale=lambda a0, b0, a1, b1, ALIGN: (a0.abs() @ b0.abs().T, a1.abs() @ b1.abs().T),
         dot_precision="fp8-fast-accumulate",  # widens only for the fp8 inputs, on CUDA
         max_elements=COST)
def tutorial_group_gemm_tma(a0, b0, a1, b1, ALIGN):
    """``group_gemm_tma_fn([a0, a1], [b0, b1])``: each C_i = A_i @ B_i^T through device descriptors."""
    return tuple(group_gemm_tma_fn([a0, a1], [b0, b1]))
