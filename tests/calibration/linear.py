"""Products: ``matmul`` and ``scaled_dot_product_attention``."""

import torch
import torch.nn.functional as F

from tests.calibration.common import DTYPES, VALUES
from triton_conformance import Backward, Dim, Scalar, Tensor, subject

# The matmul subject claims float32 accumulation.  torch's CUDA GEMMs in fp16 and bf16 may reduce split-K
# partial sums in the input's precision unless told not to (a gradient 2% off at K=396 on an H200, nightly
# seed 3528446281): ask torch for what the subject claims.  No effect on the CPU.
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


@subject(inputs={"a": Tensor(("M", "K"), dtypes=DTYPES, layouts="any"),
                 "b": Tensor(("K", "N"), layouts="any", same_dtype_as="a")},
         dims={"M": Dim(1, 512), "K": Dim(1, 2048), "N": Dim(1, 512)}, family="torch_matmul",
         oracle=lambda a, b: a @ b, reduces="K", values=VALUES, backward=Backward(output=("M", "N")))
def torch_matmul(a, b):
    """a @ b (for bf16: fp32 products rounded to bf16, see below)."""
    if a.dtype == torch.bfloat16:
        # torch 2.13's CPU bf16 GEMM reads the row padding of an `a` whose rows are not adjacent (NaN
        # there turns the output NaN: layout:sliced and padded, nightly seed 1175205643), and lets a NaN
        # leak into other columns (2 of 200 random products with NaNs).  Defects of torch's, not of the
        # tolerance this module calibrates: bf16 runs the fp32 GEMM and rounds, which is what it intends.
        return (a.float() @ b.float()).to(a.dtype)
    return a @ b


def attention(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


@subject(inputs={"q": Tensor(("B", "M", "D"), dtypes=DTYPES, layouts="any"),
                 "k": Tensor(("B", "N", "D"), layouts="any", same_dtype_as="q"),
                 "v": Tensor(("B", "N", "D"), layouts="any", same_dtype_as="q")},
         dims={"B": Dim(1, 8), "M": Dim(1, 1024), "N": Dim(1, 1024), "D": Dim(1, 128)}, family="torch_attention",
         scalars={"causal": Scalar(kind="bool")}, oracle=attention, reduces="N", values=VALUES, backward=True)
def torch_sdpa(q, k, v, causal):
    """F.scaled_dot_product_attention, causal or not."""
    return attention(q, k, v, causal)


SUBJECTS = (torch_matmul, torch_sdpa)
