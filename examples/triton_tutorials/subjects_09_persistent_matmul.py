"""Tutorial 09, persistent matmul: ``matmul_persistent(a, b)`` in fp16 and fp8, and its three tensor-descriptor
forms ``matmul_tma(a, b, ws)``, ``matmul_tma_persistent(a, b, ws)`` (host ``TensorDescriptor``s) and
``matmul_descriptor_persistent(a, b, ws)`` (``tl.make_tensor_descriptor`` in the kernel), as its ``validate``
runs them.

Claims, from the tutorial (triton-lang/triton c147f098): "The kernels support
both FP16 and FP8 data types but the FP8 implementation is only available on
CUDA devices with compute capability >= 9.0" (the interpreter's compat target
and the H200 are 9.0); the result has the inputs' dtype (``c =
torch.empty((M, N), dtype=a.dtype)``: an fp8 GEMM stores its fp32 accumulator
as e4m3fn); ``assert a.dtype == b.dtype``.  ``matmul_persistent`` takes b as
(K, N) and passes every stride: any layout.  The descriptor forms take b
transposed, (N, K) ("b is transposed"; ``validate`` passes ``b.T.contiguous()``):
row-major inputs.  The host forms build ``TensorDescriptor.from_tensor`` on a,
b and c, whose row strides must be 16-byte aligned (it asserts so), and the
device form builds its descriptors with strides ``[K, 1]`` and ``[N, 1]``: K and
N multiples of 16 elements (16 bytes of e4m3fn; the benchmark's K runs 128 to
1024 by 128, M = N = 8192), declared ``Divisible(..., by="ALIGN")``.  Nothing
else bounds the dims.  ``warp_specialize``: ``validate`` runs False everywhere
and True only where ``HAS_WARP_SPECIALIZE`` (capability >= 9, so the H200),
on Hopper only for ``matmul_descriptor_persistent``: declared so.
"""

from sources.tutorial_09_persistent_matmul import (
    matmul_descriptor_persistent,
    matmul_persistent,
    matmul_tma,
    matmul_tma_persistent,
)

from triton_conformance import Dim, Divisible, Tensor, subject

UNBOUNDED = 1 << 24
DIMS = {"M": Dim(1, UNBOUNDED), "N": Dim(1, UNBOUNDED), "K": Dim(1, UNBOUNDED)}
COST = 1 << 15  # a cost cap for the interpreter (not a claim)
# The descriptor forms: a (M, K) and b (N, K) row-major, read through descriptors with 16-byte aligned rows.
DESCRIPTOR_CONTRACT = dict(
    family="matmul",
    inputs={"a": Tensor(("M", "K"), dtypes=("float16", "float8_e4m3fn"), descriptor=True),
            "b": Tensor(("N", "K"), same_dtype_as="a", descriptor=True)},
    dims={**DIMS, "ALIGN": Dim(16, 16)}, relations=(Divisible("K", by="ALIGN"), Divisible("N", by="ALIGN")),
    oracle=lambda a, b, ALIGN: a @ b.T, reduces="K", max_elements=COST,
    error_scale=lambda a, b, ALIGN: a.abs() @ b.abs().T,
    dot_precision="fp8-fast-accumulate",  # widens only for the fp8 inputs, on CUDA
)


@subject(family="matmul",
         inputs={"a": Tensor(("M", "K"), dtypes=("float16",), layouts="any"),
                 "b": Tensor(("K", "N"), layouts="any", same_dtype_as="a")},
         dims=DIMS, oracle=lambda a, b: a @ b, reduces="K", max_elements=COST)
def tutorial_matmul_persistent(a, b):
    """``matmul_persistent(a, b)`` in fp16: one program per SM, each looping over output tiles."""
    return matmul_persistent(a, b)


@subject(family="matmul",
         inputs={"a": Tensor(("M", "K"), dtypes=("float8_e4m3fn",), layouts="any"),
                 "b": Tensor(("K", "N"), layouts="any", same_dtype_as="a")},
         dims=DIMS, oracle=lambda a, b: a @ b, reduces="K", error_scale=lambda a, b: a.abs() @ b.abs(),
         dot_precision="fp8-fast-accumulate", max_elements=COST)
def tutorial_matmul_persistent_fp8(a, b):
    """``matmul_persistent(a, b)`` in e4m3fn: the fp32 accumulator stored as e4m3fn."""
    return matmul_persistent(a, b)


@subject(**DESCRIPTOR_CONTRACT)
def tutorial_matmul_tma(a, b, ALIGN):
    """``matmul_tma(a, b, warp_specialize=False)``: host descriptors on a, b and c, one program per tile."""
    return matmul_tma(a, b, False)


@subject(**DESCRIPTOR_CONTRACT)
def tutorial_matmul_tma_persistent(a, b, ALIGN):
    """``matmul_tma_persistent(a, b, warp_specialize=False)``: host descriptors, one program per SM."""
    return matmul_tma_persistent(a, b, False)


@subject(**DESCRIPTOR_CONTRACT)
def tutorial_matmul_descriptor_persistent(a, b, ALIGN):
    """``matmul_descriptor_persistent(a, b, warp_specialize=False)``: device-side descriptors on a, b and c."""
    return matmul_descriptor_persistent(a, b, False)


@subject(**DESCRIPTOR_CONTRACT)
def tutorial_matmul_descriptor_persistent_ws(a, b, ALIGN):
    """``matmul_descriptor_persistent(a, b, warp_specialize=True)``, as ``validate`` runs it on the H200 (Hopper:
    ``flatten=False``)."""
    return matmul_descriptor_persistent(a, b, True)
