"""A subject a cell worker can import by module name, for the GPU-turns tests (torch only, no kernel)."""

from triton_conformance import Dim, Tensor, register


def doubled(x):
    return x * 2


register(doubled, name="turns_doubled_module", inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)},
         oracle=lambda x: x * 2)
