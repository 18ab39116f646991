"""Tutorial 09, persistent matmul: ``matmul_persistent(a, b)`` in fp16 and fp8, and the tensor-descriptor
form ``matmul_descriptor_persistent(a, b, warp_specialize=False)``, as the tutorial writes and runs them.

Claims, from the tutorial: "The kernels support both FP16 and FP8 data types
but the FP8 implementation is only available on CUDA devices with compute
capability >= 9.0"; the result has the inputs' dtype (``c = torch.empty((M,
N), dtype=a.dtype)``, so an fp8 GEMM stores its fp32 accumulator as e4m3fn;
its ``validate`` runs fp8 and fp16 alike); ``assert a.dtype == b.dtype``.
``matmul_persistent`` takes b as (K, N) and passes every stride, so any
layout; the descriptor forms take b transposed, (N, K) ("b is transposed"),
and build ``TensorDescriptor``s on a and b in place (declared
``descriptor=True``: the tutorial neither copies nor checks a view).  Its
benchmark runs M = N = 8192 and K from 128 to 1024 by 128; nothing bounds
the dims.  ``warp_specialize`` needs compute capability 10 (``supports_ws``):
False on the H200, declared so.

The newest version this session's search store can read (commit 02936a19)
imports ``triton.tools.experimental_descriptor`` at module level and builds
its TMA descriptors with ``driver.active.utils.fill_2d_tma_descriptor`` and
``tl._experimental_descriptor_load``, all gone in triton 3.9 (and 3.6): the
module is imported at the call, so that each cell records that and the other
tutorials still run.  A later checkout (``TensorDescriptor.from_tensor``,
``tl.make_tensor_descriptor``) runs as it is; FINDINGS.md, tutorial 09.
"""

from triton_conformance import Dim, Tensor, subject

UNBOUNDED = 1 << 24
DIMS = {"M": Dim(1, UNBOUNDED), "N": Dim(1, UNBOUNDED), "K": Dim(1, UNBOUNDED)}
COST = 1 << 15  # a cost cap for the interpreter (not a claim)


def tutorial():
    """The tutorial's module, imported at the call (see above)."""
    from sources import tutorial_09_persistent_matmul

    return tutorial_09_persistent_matmul


@subject(family="matmul",
         inputs={"a": Tensor(("M", "K"), dtypes=("float16",), layouts="any"),
                 "b": Tensor(("K", "N"), layouts="any", same_dtype_as="a")},
         dims=DIMS, oracle=lambda a, b: a @ b, reduces="K", max_elements=COST)
def tutorial_matmul_persistent(a, b):
    """``matmul_persistent(a, b)`` in fp16: one program per SM, each looping over output tiles."""
    return tutorial().matmul_persistent(a, b)


@subject(family="matmul",
         inputs={"a": Tensor(("M", "K"), dtypes=("float8_e4m3fn",), layouts="any"),
                 "b": Tensor(("K", "N"), layouts="any", same_dtype_as="a")},
         dims=DIMS, oracle=lambda a, b: a @ b, reduces="K", error_scale=lambda a, b: a.abs() @ b.abs(),
         dot_precision="fp8-fast-accumulate", max_elements=COST)
def tutorial_matmul_persistent_fp8(a, b):
    """``matmul_persistent(a, b)`` in e4m3fn: the fp32 accumulator stored as e4m3fn."""
    return tutorial().matmul_persistent(a, b)


@subject(family="matmul",
         inputs={"a": Tensor(("M", "K"), dtypes=("float16", "float8_e4m3fn"), descriptor=True),
                 "b": Tensor(("N", "K"), same_dtype_as="a", descriptor=True)},
         dims=DIMS, oracle=lambda a, b: a @ b.T, reduces="K", error_scale=lambda a, b: a.abs() @ b.abs().T,
         dot_precision="fp8-fast-accumulate",  # widens only for the fp8 inputs, on CUDA
         max_elements=COST)
def tutorial_matmul_descriptor_persistent(a, b):
    """``matmul_descriptor_persistent(a, b, warp_specialize=False)``: device-side descriptors on a, b and c."""
    return tutorial().matmul_descriptor_persistent(a, b, False)
