"""Tutorial 05, layer norm: ``LayerNorm`` (an autograd Function; ``layer_norm = LayerNorm.apply``), forward and
backward, as the tutorial writes and tests it.

Claims, from the tutorial: ``x`` of any rows and a feature dim "less than 64KB"
(it raises RuntimeError past ``65536 // x.element_size()``), fp16 (its test and
benchmark), ``weight`` and ``bias`` of the feature dim; ``x.reshape(-1, N)``
and ``x_arg.stride(0)``: row-major rows (nothing checks it).  The backward
returns dx, dw and db; dw and db are summed in per-group buffers of x's dtype
behind a lock (``tl.atomic_cas``), in the order the programs take it: not
deterministic on a GPU.
"""

import torch

from sources.tutorial_05_layer_norm import layer_norm

from triton_conformance import Dim, Scalar, Tensor, subject
from triton_conformance.model.contract import Backward


def _grad_scale(x, weight, bias, eps, grad_output):
    # dx = rstd (w dy - (xhat c1 + c2)): terms that cancel; dw and db: sums over rows of |dy xhat|, |dy|
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    xhat = (x - x.mean(-1, keepdim=True)) * rstd
    wdy = (weight * grad_output).abs()
    dx = rstd * (wdy + xhat.abs() * (xhat.abs() * wdy).mean(-1, keepdim=True) + wdy.mean(-1, keepdim=True))
    return {"x": dx, "weight": (grad_output * xhat).abs().sum(0), "bias": grad_output.abs().sum(0)}


@subject(
    family="layer_norm",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16",)),
            "weight": Tensor(("N",), same_dtype_as="x"),
            "bias": Tensor(("N",), same_dtype_as="x")},
    dims={"M": Dim(1, 1 << 24), "N": Dim(1, 32768)},
    scalars={"eps": Scalar(1e-6, 1e-4)},
    oracle=lambda x, weight, bias, eps: torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps),
    reduces="N",
    backward=Backward(grads=("x", "weight", "bias"), deterministic=False,
                      accumulate={"weight": "input", "bias": "input"}, error_scale=_grad_scale),
    max_elements=1 << 12,  # a cost cap for the interpreter (not a claim)
)
def tutorial_layer_norm(x, weight, bias, eps):
    """``layer_norm(x, w_shape, weight, bias, eps)`` as the tutorial's test calls it (w_shape = (N,))."""
    return layer_norm(x, x.shape[-1:], weight, bias, eps)
