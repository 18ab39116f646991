"""Tutorial 03, matrix multiplication: ``matmul(a, b)`` as the tutorial writes and tests it (``@triton.autotune``
over its sixteen CUDA configs, keyed on M, N, K).

Claims, from the tutorial: ``assert a.is_contiguous(), "Matrix A must be
contiguous"`` (b takes any strides: they are passed to the kernel); fp16
inputs, an fp16 result (its test and benchmark; the fp8 path needs fp8
inputs the interpreter cannot make); any M, N, K (the benchmark runs square
256 .. 4096).
"""

from sources.tutorial_03_matrix_multiplication import matmul

from triton_conformance import Dim, Tensor, register

register(
    matmul,
    name="tutorial_matmul",
    family="matmul",
    inputs={"a": Tensor(("M", "K"), dtypes=("float16",)),
            "b": Tensor(("K", "N"), layouts="any", same_dtype_as="a")},
    dims={"M": Dim(1, 4096), "N": Dim(1, 4096), "K": Dim(1, 4096)},
    oracle=lambda a, b: a @ b,
    reduces="K",
    max_elements=1 << 14,  # a cost cap for the interpreter (not a claim)
)
