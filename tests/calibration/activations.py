"""Pointwise activations: ``gelu`` (exact and tanh) and ``silu``."""

import torch.nn.functional as F

from tests.calibration.common import COLUMNS, DTYPES, FINITE_VALUES, ROWS, VALUES
from triton_conformance import Tensor, subject

INPUT = {"x": Tensor(("M", "N"), dtypes=DTYPES, layouts="any")}
DIMS = {"M": ROWS, "N": COLUMNS}


@subject(inputs=INPUT, dims=DIMS, family="torch_activation", oracle=lambda x: F.gelu(x), values=FINITE_VALUES,
         backward=True)
def torch_gelu(x):
    """F.gelu (the erf form)."""
    return F.gelu(x)


@subject(inputs=INPUT, dims=DIMS, family="torch_activation", oracle=lambda x: F.gelu(x, approximate="tanh"),
         values=VALUES, backward=True)
def torch_gelu_tanh(x):
    """F.gelu with approximate="tanh"."""
    return F.gelu(x, approximate="tanh")


@subject(inputs=INPUT, dims=DIMS, family="torch_activation", oracle=lambda x: F.silu(x), values=VALUES,
         backward=True)
def torch_silu(x):
    """F.silu."""
    return F.silu(x)


SUBJECTS = (torch_gelu, torch_gelu_tanh, torch_silu)
