"""Sums along the last dim: ``sum``, ``mean``, ``cumsum``."""

from tests.calibration.common import COLUMNS, DTYPES, ROUNDS_TO_INPUT, ROWS, VALUES
from triton_conformance import Backward, Tensor, subject

ROW_INPUT = {"x": Tensor(("M", "N"), dtypes=DTYPES, layouts="any")}
DIMS = {"M": ROWS, "N": COLUMNS}


@subject(inputs=ROW_INPUT, dims=DIMS, family="torch_reduction", oracle=lambda x: x.sum(-1), reduces="N",
         values=VALUES, backward=Backward(output=("M",)))
def torch_sum(x):
    """torch.sum over the last dim."""
    return x.sum(-1)


@subject(inputs=ROW_INPUT, dims=DIMS, family="torch_reduction", oracle=lambda x: x.mean(-1), reduces="N",
         values=VALUES, backward=Backward(output=("M",)))
def torch_mean(x):
    """torch.mean over the last dim."""
    return x.mean(-1)


# torch's CUDA cumsum scans in the element type (ATen's scan with std::plus<scalar_t>: every fp16 or bf16
# prefix is rounded to its dtype; 71 of 1238 cells of two nightly seeds on an H200 under a float32 claim),
# while its CPU cumsum keeps float32 prefixes: the claim true of both is the input's precision.
@subject(inputs=ROW_INPUT, dims=DIMS, family="torch_reduction", oracle=lambda x: x.cumsum(-1), reduces="N",
         values=VALUES, accumulate=ROUNDS_TO_INPUT, backward=True)
def torch_cumsum(x):
    """torch.cumsum over the last dim."""
    return x.cumsum(-1)


SUBJECTS = (torch_sum, torch_mean, torch_cumsum)
