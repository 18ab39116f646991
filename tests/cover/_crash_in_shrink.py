"""A launcher wrong from N=100 up that kills its process at any such size the draws never hold: only the per-dim
shrink (a binary search over every integer) reaches those, after Hypothesis found and shrank the bug among the
drawn sizes (2^k +- 1 and primes, in the shape:non-pow2 cell)."""

import os

from triton_conformance import Dim, Tensor, register
from triton_conformance.strategies._internal.sizes import boundary_sizes

DRAWN = set(boundary_sizes(1, 1024))


def crash_in_shrink(x):
    n = x.shape[0]
    if n >= 100 and n not in DRAWN:
        os._exit(7)  # the process dies: the flight recorder's last example is all that names the input
    return x * 2 + (1.0 if n >= 100 else 0.0)


register(crash_in_shrink, inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 1024)},
         oracle=lambda x: x * 2, family="crash_in_shrink")
