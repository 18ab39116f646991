"""Tutorial 02, fused softmax: ``softmax(x)`` as the tutorial writes and tests it (warmup, occupancy, persistent
programs).

Claims, from the tutorial: a matrix "whose rows can fit in the GPU's SRAM", fp32
(its test and benchmark); each row is one block of ``next_power_of_2(n_cols)``
(the benchmark runs 256 .. 12672 columns at 4096 rows, the test 1823 x 781); it
passes ``x.stride(0)`` and ``y.stride(0)``, and reads a row's elements one after
another: row-major inputs (nothing checks it).
"""

import torch

from sources.tutorial_02_fused_softmax import softmax

from triton_conformance import Dim, Tensor, register

register(
    softmax,
    name="tutorial_softmax",
    family="softmax",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",))},
    dims={"M": Dim(1, 1 << 24), "N": Dim(1, 12672)},
    oracle=lambda x: torch.softmax(x, -1),
    reduces="N",
    max_elements=1 << 12,  # a cost cap for the interpreter (not a claim)
)
