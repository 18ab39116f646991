"""Tutorial 01, vector addition: ``add(x, y)`` as the tutorial writes and tests it.

Claims, from the tutorial: two vectors of one size, fp32 (its test and benchmark
use ``torch.rand`` fp32), on ``DEVICE``; the kernel indexes ``x_ptr + offsets``,
so the vectors are contiguous (nothing checks it); any size (the benchmark runs
2^12 .. 2^27 elements).
"""

from sources.tutorial_01_vector_add import add

from triton_conformance import Dim, Tensor, register

register(
    add,
    name="tutorial_add",
    family="add",
    inputs={"x": Tensor(("N",), dtypes=("float32",)), "y": Tensor(("N",), dtypes=("float32",))},
    dims={"N": Dim(1, 1 << 27)},
    oracle=lambda x, y: x + y,
    max_elements=1 << 16,  # a cost cap for the interpreter (not a claim)
)
