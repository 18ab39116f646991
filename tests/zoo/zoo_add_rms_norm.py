"""A fused add+RMSNorm whose backward drops the residual stream's gradient (the ``grad`` cells).

It claims the contract of ``kernels_under_test.add_rms_norm`` (its correct twin),
forward unchanged: ``(y, h)`` with ``h = x + residual``.  Its backward reads only
``dy``: the gradient flowing into ``h`` from the rest of the network is ignored, so
``dx`` lacks ``dh`` (0 where 1 is right, for a loss on ``h`` alone).  A check that
backpropagates only the first output cannot see it.
"""

from kernels_under_test.add_rms_norm import ADD_RMS_NORM_CONTRACT, AddRMSNormFunction, add_rms_norm_backward
from triton_conformance import register

BUGS = [
    ("zoo_add_rms_norm_drops_residual_grad", "grad:layout:contiguous", "wrong", "mismatch"),
]


class AddRMSNormDropsResidualGrad(AddRMSNormFunction):
    @staticmethod
    def backward(ctx, grad_y, grad_h):
        dh, dw = add_rms_norm_backward(*ctx.saved_tensors, grad_y)  # BUG: grad_h never added: dx = d(norm) only
        dh = dh.to(grad_y.dtype)
        return dh, dh, dw, None


register(AddRMSNormDropsResidualGrad, name="zoo_add_rms_norm_drops_residual_grad", **ADD_RMS_NORM_CONTRACT,
         xfail="the backward ignores the gradient flowing into the residual output h")
