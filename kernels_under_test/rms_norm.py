"""
RMS normalization, forward and backward
=======================================

``y[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight`` with one program
per row, and its backward as a ``torch.autograd.Function``:

- ``dx[i, :] = rstd_i * (w * g[i, :] - x[i, :] * rstd_i^2 * mean(x[i, :] * w * g[i, :]))``,
  one program per block of rows;
- ``dw = sum_i g[i, :] * x[i, :] * rstd_i``, a reduction over the rows.  Each
  program of the backward accumulates its rows' share of ``dw`` in fp32, in a
  row of its own of a ``(programs, N)`` buffer (no atomics, so the result is
  deterministic), and a second kernel sums that buffer's rows.

Every tensor is addressed through its strides, grad_output included: autograd
hands the backward whatever layout the caller's gradient has (a ``.t()``, a
slice, or the stride-0 ones of ``y.sum().backward()``).
"""

import math
import numbers

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Scalar, Tensor, register
from triton_conformance.model.contract import Backward

# %%
# Forward kernel
# --------------


@triton.jit
def rms_norm_fwd_kernel(
    x_ptr, w_ptr, y_ptr, rstd_ptr,  # x, weight and y; rstd (M,) saved for the backward
    stride_xm, stride_xn, stride_w, stride_ym, stride_yn,
    N, eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(axis=0)
    # Pass 1: the mean square, accumulated in fp32.  Masked lanes load 0 and add nothing.
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(rstd_ptr + row, rstd)
    # Pass 2: normalise and scale.
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_ym + cols * stride_yn, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


# %%
# Backward kernels
# ----------------
# Program ``pid`` takes rows ``pid * ROWS ... pid * ROWS + ROWS - 1``.  For each row,
# pass 1 computes ``c = mean(x * w * g) * rstd^2``, pass 2 writes ``dx`` and adds the
# row's ``g * x * rstd`` to the program's own row of the partial-dw buffer.


@triton.jit
def rms_norm_bwd_kernel(
    x_ptr, w_ptr, g_ptr, rstd_ptr, dx_ptr, dw_partial_ptr,
    stride_xm, stride_xn, stride_w, stride_gm, stride_gn, stride_dxm, stride_dxn,
    M, N, ROWS,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    partial_row = dw_partial_ptr + pid * N
    for r in range(0, ROWS):
        row = pid * ROWS + r
        if row < M:
            rstd = tl.load(rstd_ptr + row)
            acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                mask = cols < N
                x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
                g = tl.load(g_ptr + row * stride_gm + cols * stride_gn, mask=mask, other=0.0).to(tl.float32)
                acc += x * w * g
            c = tl.sum(acc, axis=0) / N * rstd * rstd
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                mask = cols < N
                x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
                g = tl.load(g_ptr + row * stride_gm + cols * stride_gn, mask=mask, other=0.0).to(tl.float32)
                dx = rstd * (w * g - x * c)
                tl.store(dx_ptr + row * stride_dxm + cols * stride_dxn, dx.to(dx_ptr.dtype.element_ty), mask=mask)
                dw = tl.load(partial_row + cols, mask=mask, other=0.0)
                tl.store(partial_row + cols, dw + g * x * rstd, mask=mask)


@triton.jit
def rms_norm_dw_kernel(dw_partial_ptr, dw_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    """dw[cols] = the sum over the P rows of the partial buffer, in fp32."""
    cols = tl.program_id(axis=0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows[:, None] < P) & (cols[None, :] < N)
        acc += tl.sum(tl.load(dw_partial_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0), axis=0)
    tl.store(dw_ptr + cols, acc.to(dw_ptr.dtype.element_ty), mask=cols < N)


# %%
# Launchers and the autograd Function
# -----------------------------------

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DIMS = {"M": Dim(1, 4096), "N": Dim(1, 8192)}
EPS = Scalar(1e-6, 1e-3)
MAX_PROGRAMS = 32  # backward programs: each owns a row of the partial-dw buffer


def check_rms_norm_args(x, weight, eps, fn="rms_norm"):
    """Raise TypeError/ValueError unless the arguments are inside the contract."""
    for name, t, ndim in (("x", x, 2), ("weight", weight, 1)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype not in DTYPES:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected one of float16, bfloat16, float32")
        if t.dim() != ndim:
            raise ValueError(f"{fn}: {name}.dim()={t.dim()}, expected a {ndim}-D tensor")
    M, N = x.shape
    for axis, sym, n in ((0, "M", M), (1, "N", N)):
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: x.shape[{axis}]={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")
    if weight.shape[0] != N:
        raise ValueError(f"{fn}: weight.shape[0]={weight.shape[0]}, expected N={N} (x.shape[1])")
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not math.isfinite(eps) \
            or not EPS.low <= eps <= EPS.high:
        raise ValueError(f"{fn}: eps={eps!r}, expected a float in [{EPS.low}, {EPS.high}]")


def _block(N):
    return min(1024, triton.next_power_of_2(N))


def rms_norm_forward(x, weight, eps):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    rms_norm_fwd_kernel[(M,)](x, weight, y, rstd, x.stride(0), x.stride(1), weight.stride(0),
                              y.stride(0), y.stride(1), N, float(eps), BLOCK_N=_block(N))
    return y, rstd


def rms_norm_backward(x, weight, rstd, g, partial_dtype=torch.float32):
    M, N = x.shape
    programs = min(M, MAX_PROGRAMS)
    rows = triton.cdiv(M, programs)
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    partial = torch.zeros((programs, N), dtype=partial_dtype, device=x.device)
    rms_norm_bwd_kernel[(programs,)](x, weight, g, rstd, dx, partial, x.stride(0), x.stride(1), weight.stride(0),
                                     g.stride(0), g.stride(1), dx.stride(0), dx.stride(1), M, N, rows,
                                     BLOCK_N=_block(N))
    dw = torch.empty((N,), dtype=weight.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(N))
    rms_norm_dw_kernel[(triton.cdiv(N, BLOCK),)](partial, dw, programs, N, BLOCK_P=triton.next_power_of_2(programs),
                                                 BLOCK_N=BLOCK)
    return dx, dw


class RMSNormFunction(torch.autograd.Function):
    """RMS norm over the last dim of a 2-D tensor, with its Triton backward."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        check_rms_norm_args(x, weight, eps)
        y, rstd = rms_norm_forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, rstd = ctx.saved_tensors
        dx, dw = rms_norm_backward(x, weight, rstd, grad_output)
        return dx, dw, None


def rms_norm_oracle(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_norm_grad_scale(x, weight, eps, grad_output):
    """What the gradients' rounding errors scale with: the terms each one sums, in absolute value.
    dx's two terms cancel (a row of one element has dx near 0 but terms near rstd * |w * g|)."""
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    wg = (weight * grad_output).abs()
    dx = rstd * (wg + x.abs() * rstd * rstd * (x.abs() * wg).mean(-1, keepdim=True))
    return {"x": dx.amax(-1, keepdim=True), "weight": (grad_output * x * rstd).abs().sum(0)}


RMS_NORM_CONTRACT = dict(
    family="rms_norm",
    inputs={
        "x": Tensor(("M", "N"), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
        "weight": Tensor(("N",), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
    },
    dims=DIMS,
    scalars={"eps": EPS},
    oracle=rms_norm_oracle,
    reduces="N",
    # dx reduces over the row (N), dw over the rows (M): the grad cells scale each bound with its own.
    backward=Backward(grads=("x", "weight"), error_scale=rms_norm_grad_scale),
)

register(RMSNormFunction, name="rms_norm", **RMS_NORM_CONTRACT)


# %%
# Demo
# ----

if __name__ == "__main__":
    x = torch.randn(64, 1000, requires_grad=True)
    w = torch.randn(1000, requires_grad=True)
    g = torch.randn(1000, 64).t()  # a transposed grad_output
    RMSNormFunction.apply(x, w, 1e-5).backward(g)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    rms_norm_oracle(x64, w64, 1e-5).backward(g.double())
    print("dx:", (x.grad - x64.grad).abs().max().item(), "dw:", (w.grad - w64.grad).abs().max().item())
