"""Backward bugs (the ``grad`` cells): RMS norm's Triton backward, mutated.

Each claims the contract of ``kernels_under_test.rms_norm`` (its correct twin),
forward unchanged; only the backward is wrong:

- grad_output indexed as if contiguous (its strides ignored): right for a
  plain ``y.backward(g)``, wrong for a transposed or sliced ``g``;
- the dW partial sums kept in fp16: fine for fp16 weights at small M, off by
  far more than fp32's rounding for fp32 ones;
- dx written into the saved input's storage to save memory: the caller's x
  is destroyed (a gradient cell's ``memory`` check of saved tensors).
"""

import torch

from kernels_under_test.rms_norm import (
    RMS_NORM_CONTRACT,
    _block,
    rms_norm_backward,
    rms_norm_bwd_kernel,
    rms_norm_dw_kernel,
    rms_norm_forward,
    check_rms_norm_args,
)
from triton_conformance import register

import triton

BUGS = [
    ("zoo_rms_norm_grad_output_as_contiguous", "grad:layout:transposed", "wrong", "mismatch"),
    ("zoo_rms_norm_dw_in_fp16", "grad:dtype:float32", "wrong", "mismatch"),
    ("zoo_rms_norm_dx_into_saved_x", "grad:memory", "unsafe", "mutated-input"),
]


def _backward_contiguous_grad(x, weight, rstd, g):
    M, N = x.shape
    programs = min(M, 32)
    rows = triton.cdiv(M, programs)
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    partial = torch.zeros((programs, N), dtype=torch.float32, device=x.device)
    rms_norm_bwd_kernel[(programs,)](x, weight, g, rstd, dx, partial, x.stride(0), x.stride(1), weight.stride(0),
                                     N, 1,  # BUG: grad_output's strides assumed to be those of a contiguous (M, N)
                                     dx.stride(0), dx.stride(1), M, N, rows, BLOCK_N=_block(N))
    dw = torch.empty((N,), dtype=weight.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(N))
    rms_norm_dw_kernel[(triton.cdiv(N, BLOCK),)](partial, dw, programs, N, BLOCK_P=triton.next_power_of_2(programs),
                                                 BLOCK_N=BLOCK)
    return dx, dw


def _backward_dx_into_x(x, weight, rstd, g):
    M, N = x.shape
    programs = min(M, 32)
    rows = triton.cdiv(M, programs)
    dx = x  # BUG: "x is not needed after the backward": dx overwrites the saved input in place
    partial = torch.zeros((programs, N), dtype=torch.float32, device=x.device)
    rms_norm_bwd_kernel[(programs,)](x, weight, g, rstd, dx, partial, x.stride(0), x.stride(1), weight.stride(0),
                                     g.stride(0), g.stride(1), dx.stride(0), dx.stride(1), M, N, rows,
                                     BLOCK_N=_block(N))
    dw = torch.empty((N,), dtype=weight.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(N))
    rms_norm_dw_kernel[(triton.cdiv(N, BLOCK),)](partial, dw, programs, N, BLOCK_P=triton.next_power_of_2(programs),
                                                 BLOCK_N=BLOCK)
    return dx.detach().clone(), dw


def _function(backward_impl):
    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps):
            check_rms_norm_args(x, weight, eps)
            y, rstd = rms_norm_forward(x, weight, eps)
            ctx.save_for_backward(x, weight, rstd)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, weight, rstd = ctx.saved_tensors
            dx, dw = backward_impl(x, weight, rstd, grad_output)
            return dx, dw, None

    return Function


class RMSNormGradOutputAsContiguous(_function(_backward_contiguous_grad)):
    pass


class RMSNormDwInFp16(_function(lambda x, w, r, g: rms_norm_backward(x, w, r, g, partial_dtype=torch.float16))):
    pass  # BUG: each program's dW partial sums are stored in fp16 between rows


class RMSNormDxIntoSavedX(_function(_backward_dx_into_x)):
    pass


register(RMSNormGradOutputAsContiguous, name="zoo_rms_norm_grad_output_as_contiguous", **RMS_NORM_CONTRACT,
         xfail="the backward indexes grad_output with a contiguous (M, N)'s strides, not its own")
register(RMSNormDwInFp16, name="zoo_rms_norm_dw_in_fp16", **RMS_NORM_CONTRACT,
         xfail="dW's per-program partial sums are kept in fp16")
register(RMSNormDxIntoSavedX, name="zoo_rms_norm_dx_into_saved_x", **RMS_NORM_CONTRACT,
         xfail="the backward writes dx into the saved input x's storage")
