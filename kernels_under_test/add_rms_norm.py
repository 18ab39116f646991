"""
Fused residual add and RMS normalization, forward and backward
==============================================================

``h = x + residual``, ``y = h / sqrt(mean(h^2) + eps) * weight``, one program per
row, returning ``(y, h)``: the pre-norm block of a transformer, where ``h`` is the
residual stream the next block adds to.  Both outputs carry a gradient in
training, so the backward gets two: ``dy`` (through the norm) and ``dh`` (from
the rest of the residual stream), and

- ``dx = dresidual = rms_norm_backward(dy) + dh``;
- ``dweight = sum_i dy[i, :] * h[i, :] * rstd_i``.

The backward reuses :mod:`.rms_norm`'s Triton kernels, on ``h`` formed again in fp32.
"""

import torch
import triton
import triton.language as tl

from kernels_under_test.rms_norm import EPS, _block, check_rms_norm_args, rms_norm_backward, rms_norm_grad_scale
from triton_conformance import Dim, Tensor, register
from triton_conformance.model.contract import Backward

# %%
# Forward kernel
# --------------


@triton.jit
def add_rms_norm_fwd_kernel(
    x_ptr, r_ptr, w_ptr,  # x, residual (M, N) and weight (N,)
    y_ptr, h_ptr, rstd_ptr,  # y and h = x + residual (M, N); rstd (M,) saved for the backward
    stride_xm, stride_xn, stride_rm, stride_rn, stride_w, stride_ym, stride_yn, stride_hm, stride_hn,
    N, eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(axis=0)
    # Pass 1: h = x + residual, stored, and its mean square accumulated in fp32.
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row * stride_rm + cols * stride_rn, mask=mask, other=0.0).to(tl.float32)
        h = x + r
        tl.store(h_ptr + row * stride_hm + cols * stride_hn, h.to(h_ptr.dtype.element_ty), mask=mask)
        acc += h * h
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(rstd_ptr + row, rstd)
    # Pass 2: normalise and scale (h recomputed in fp32, not reloaded rounded).
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row * stride_rm + cols * stride_rn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_ym + cols * stride_yn, ((x + r) * rstd * w).to(y_ptr.dtype.element_ty),
                 mask=mask)


# %%
# Launcher and the autograd Function
# ----------------------------------

DIMS = {"M": Dim(1, 64), "N": Dim(1, 512)}


def check_add_rms_norm_args(x, residual, weight, eps):
    """Raise TypeError/ValueError unless the arguments are inside the contract."""
    check_rms_norm_args(x, weight, eps, fn="add_rms_norm")
    for name, t in (("x", x), ("weight", weight)):
        if t.dtype not in (torch.float16, torch.float32):
            raise TypeError(f"add_rms_norm: {name}.dtype={t.dtype}, expected float16 or float32")
    if not isinstance(residual, torch.Tensor):
        raise TypeError(f"add_rms_norm: residual is a {type(residual).__name__}, expected a torch.Tensor")
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise ValueError(f"add_rms_norm: residual has shape {tuple(residual.shape)} and dtype {residual.dtype}, "
                         f"expected x's {tuple(x.shape)} and {x.dtype}")
    M, N = x.shape
    for axis, sym, n in ((0, "M", M), (1, "N", N)):
        if not DIMS[sym].admits(n):
            raise ValueError(f"add_rms_norm: x.shape[{axis}]={n}, expected {DIMS[sym].min} <= {sym} <= "
                             f"{DIMS[sym].max}")


def add_rms_norm_forward(x, residual, weight, eps):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    h = torch.empty((M, N), dtype=x.dtype, device=x.device)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    add_rms_norm_fwd_kernel[(M,)](x, residual, weight, y, h, rstd, x.stride(0), x.stride(1), residual.stride(0),
                                  residual.stride(1), weight.stride(0), y.stride(0), y.stride(1), h.stride(0),
                                  h.stride(1), N, float(eps), BLOCK_N=_block(N))
    return y, h, rstd


def add_rms_norm_backward(x, residual, weight, rstd, grad_y):
    """The norm's part of dh, in fp32, and dweight: :func:`.rms_norm.rms_norm_backward` at h = x + residual
    formed in fp32 (h rounded to x's dtype, as the forward returns it, would cost the norm's backward its
    accuracy where a row's terms cancel)."""
    return rms_norm_backward(x.float() + residual.float(), weight, rstd, grad_y)


class AddRMSNormFunction(torch.autograd.Function):
    """``(rms_norm(x + residual) * weight, x + residual)`` over the last dim of 2-D tensors."""

    @staticmethod
    def forward(ctx, x, residual, weight, eps):
        check_add_rms_norm_args(x, residual, weight, eps)
        y, h, rstd = add_rms_norm_forward(x, residual, weight, eps)
        ctx.save_for_backward(x, residual, weight, rstd)
        return y, h

    @staticmethod
    def backward(ctx, grad_y, grad_h):
        dh, dw = add_rms_norm_backward(*ctx.saved_tensors, grad_y)
        if grad_h is not None:  # the residual stream's own gradient flows straight through the add
            dh = dh + grad_h.float()
        dh = dh.to(grad_y.dtype)
        return dh, dh, dw, None


def add_rms_norm_oracle(x, residual, weight, eps):
    h = x + residual
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight, h


def add_rms_norm_grad_scale(x, residual, weight, eps, grad_output):
    """The terms each gradient sums, in absolute value: the norm's (:func:`.rms_norm.rms_norm_grad_scale` at
    h) plus, for dx and dresidual, the residual stream's own gradient."""
    norm = rms_norm_grad_scale(x + residual, weight, eps, grad_output[0])
    through = norm["x"] + grad_output[1].abs()
    return {"x": through, "residual": through, "weight": norm["weight"]}


ADD_RMS_NORM_CONTRACT = dict(
    family="add_rms_norm",
    inputs={
        "x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any"),
        "residual": Tensor(("M", "N"), same_dtype_as="x", layouts="any"),
        "weight": Tensor(("N",), dtypes=("float16", "float32"), layouts="any"),
    },
    dims=DIMS,
    scalars={"eps": EPS},
    oracle=add_rms_norm_oracle,
    reduces="N",
    # Both outputs, y and h, carry a gradient (every float output does by default; said here to be read).
    backward=Backward(grads=("x", "residual", "weight"), outputs=(0, 1), error_scale=add_rms_norm_grad_scale),
)

register(AddRMSNormFunction, name="add_rms_norm", **ADD_RMS_NORM_CONTRACT)


# %%
# Demo
# ----

if __name__ == "__main__":
    x, r = torch.randn(8, 300, requires_grad=True), torch.randn(8, 300, requires_grad=True)
    w = torch.randn(300, requires_grad=True)
    gy, gh = torch.randn(8, 300), torch.randn(8, 300)
    y, h = AddRMSNormFunction.apply(x, r, w, 1e-5)
    torch.autograd.backward((y, h), (gy, gh))
    x64, r64, w64 = (t.detach().double().requires_grad_() for t in (x, r, w))
    torch.autograd.backward(add_rms_norm_oracle(x64, r64, w64, 1e-5), (gy.double(), gh.double()))
    print("dx:", (x.grad - x64.grad).abs().max().item(), "dw:", (w.grad - w64.grad).abs().max().item())
