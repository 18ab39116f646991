"""Row normalisations: ``softmax``, ``log_softmax``, ``layer_norm`` (with and without bias), ``rms_norm``."""

import torch
import torch.nn.functional as F

from tests.calibration.common import COLUMNS, DTYPES, EPS, FINITE_VALUES, ROUNDS_TO_INPUT, ROWS, VALUES
from triton_conformance import Backward, Tensor, subject

DIMS = {"M": ROWS, "N": COLUMNS}
X = Tensor(("M", "N"), dtypes=DTYPES, layouts="any")
ROW_PARAMETER = Tensor(("N",), layouts="any", same_dtype_as="x")


@subject(inputs={"x": X}, dims=DIMS, family="torch_softmax", oracle=lambda x: torch.softmax(x, -1), reduces="N",
         values=VALUES, backward=Backward(accumulate={"x": ROUNDS_TO_INPUT}))
def torch_softmax(x):
    """torch.softmax over the last dim."""
    return torch.softmax(x, -1)


@subject(inputs={"x": X}, dims=DIMS, family="torch_softmax", oracle=lambda x: torch.log_softmax(x, -1),
         reduces="N", values=VALUES, accumulate=ROUNDS_TO_INPUT, backward=True)
def torch_log_softmax(x):
    """torch.log_softmax over the last dim."""
    return torch.log_softmax(x, -1)


def layer_norm(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@subject(inputs={"x": X, "weight": ROW_PARAMETER, "bias": ROW_PARAMETER}, dims=DIMS, family="torch_layer_norm",
         scalars={"eps": EPS}, oracle=layer_norm, reduces="N", values=FINITE_VALUES,
         backward=Backward(accumulate={"x": ROUNDS_TO_INPUT, "weight": ROUNDS_TO_INPUT, "bias": ROUNDS_TO_INPUT}))
def torch_layer_norm(x, weight, bias, eps):
    """F.layer_norm over the last dim, with weight and bias."""
    return layer_norm(x, weight, bias, eps)


def layer_norm_no_bias(x, weight, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, None, eps)


@subject(inputs={"x": X, "weight": ROW_PARAMETER}, dims=DIMS, family="torch_layer_norm", scalars={"eps": EPS},
         oracle=layer_norm_no_bias, reduces="N", values=FINITE_VALUES,
         backward=Backward(accumulate={"x": ROUNDS_TO_INPUT, "weight": ROUNDS_TO_INPUT}))
def torch_layer_norm_no_bias(x, weight, eps):
    """F.layer_norm over the last dim, with a weight and no bias."""
    return layer_norm_no_bias(x, weight, eps)


def rms_norm(x, weight, eps):
    """The definition, in whatever precision ``x`` has: the oracle does not depend on torch's fused kernels
    (on CUDA, F.rms_norm in float64 is a kernel of its own)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# No "inf": torch's CUDA rms_norm does not carry an infinity through as the definition does.  On an H200
# (torch 2.11, bench/gpu/torch_cuda_precision.py) a row [1, 2, inf, 3] gives [0, 0, nan, 0] in fp16 and
# fp32 but all NaN in float64, and a 3-column row with an infinity gave NaN where the definition gives -0
# (nightly seed 986109797).  The CPU's follows the definition.
@subject(inputs={"x": X, "weight": ROW_PARAMETER}, dims=DIMS, family="torch_rms_norm", scalars={"eps": EPS},
         oracle=rms_norm, reduces="N", values=FINITE_VALUES, backward=True)
def torch_rms_norm(x, weight, eps):
    """F.rms_norm over the last dim."""
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


SUBJECTS = (torch_softmax, torch_log_softmax, torch_layer_norm, torch_layer_norm_no_bias, torch_rms_norm)
