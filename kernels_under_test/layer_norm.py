"""
Layer normalization
===================

``out[i, :] = (x[i, :] - mean_i) / sqrt(var_i + eps) * weight + bias`` with one
program per row.  The row is walked in chunks of ``BLOCK_N`` columns three
times: once for the mean, once for the variance around that mean (the
two-pass formula, which does not cancel catastrophically like
``E[x^2] - E[x]^2``), and once to normalise and store.

Masked lanes are excluded from both sums explicitly.  For the mean a masked
load of 0 is enough, but for the variance a padded lane would contribute
``(0 - mean)^2``, so it is zeroed after the subtraction.
"""

import math
import numbers

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Scalar, Tensor, subject

# %%
# Compute kernel
# --------------


@triton.jit
def layer_norm_kernel(
    x_ptr,  # *Pointer* to the input (M, N)
    w_ptr,  # *Pointer* to the weight (N,)
    b_ptr,  # *Pointer* to the bias (N,)
    out_ptr,  # *Pointer* to the output (M, N)
    stride_xm,  # Elements between rows of x
    stride_xn,  # Elements between columns of x
    stride_w,  # Elements between entries of weight (0 if broadcast)
    stride_b,  # Elements between entries of bias (0 if broadcast)
    stride_om,  # Elements between rows of out
    stride_on,  # Elements between columns of out
    N,  # Row length, the normalised dim
    eps,  # Added to the variance before the square root
    BLOCK_N: tl.constexpr,  # Columns per step of each pass
):
    row = tl.program_id(axis=0)
    x_row = x_ptr + row * stride_xm
    out_row = out_ptr + row * stride_om

    # Pass 1: the mean.  Masked lanes load 0 and add nothing.
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=0) / N

    # Pass 2: the variance around the mean.  A masked lane would add mean^2.
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
    var = tl.sum(acc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)

    # Pass 3: normalise, scale, shift.
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_row + cols * stride_on, y.to(out_ptr.dtype.element_ty), mask=mask)


# %%
# Launcher and contract
# ---------------------
# weight and bias may each be any of the claimed dtypes: they are upcast to
# fp32 in the kernel.  The output has x's dtype.

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DIMS = {"M": Dim(1, 4096), "N": Dim(1, 8192)}


def layer_norm_error_scale(x, weight, bias, eps):
    """What fp32 rounding errors scale with: x - mean loses about one ulp of max|x|,
    which 1/sqrt(var + eps) then amplifies (a nearly constant row is ill-conditioned)."""
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    return x.abs().amax(-1, keepdim=True) * rstd * weight.abs() + bias.abs()
EPS = Scalar(1e-6, 1e-3)

LAYER_NORM_CONTRACT = dict(
    family="layer_norm",
    inputs={
        "x": Tensor(("M", "N"), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
        "weight": Tensor(("N",), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
        "bias": Tensor(("N",), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
    },
    dims=DIMS,
    scalars={"eps": EPS},
    oracle=lambda x, weight, bias, eps: torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps),
    reduces="N",
    error_scale=lambda x, weight, bias, eps: layer_norm_error_scale(x, weight, bias, eps),
)


def check_layer_norm_args(x, weight, bias, eps, fn="layer_norm"):
    """Raise TypeError/ValueError unless the arguments are inside the contract."""
    for name, t, ndim in (("x", x, 2), ("weight", weight, 1), ("bias", bias, 1)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype not in DTYPES:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected one of float16, bfloat16, float32")
        if t.dim() != ndim:
            raise ValueError(f"{fn}: {name}.dim()={t.dim()}, expected a {ndim}-D tensor")
        if t.device != x.device:
            raise ValueError(f"{fn}: {name}.device={t.device}, expected x's device {x.device}")
    M, N = x.shape
    for axis, sym, n in ((0, "M", M), (1, "N", N)):
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: x.shape[{axis}]={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t.shape[0] != N:
            raise ValueError(f"{fn}: {name}.shape[0]={t.shape[0]}, expected N={N} (x.shape[1])")
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool):
        raise TypeError(f"{fn}: eps={eps!r}, expected a Python float")
    if not (math.isfinite(eps) and EPS.low <= eps <= EPS.high):
        raise ValueError(f"{fn}: eps={eps!r}, expected {EPS.low} <= eps <= {EPS.high}")


@subject(**LAYER_NORM_CONTRACT)
def layer_norm(x, weight, bias, eps):
    """Layer norm over the last dim of a 2-D tensor, any layout, fp16/bf16/fp32."""
    check_layer_norm_args(x, weight, bias, eps)
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    # Long rows loop; short rows get one chunk that is not mostly padding.
    BLOCK_N = min(1024, triton.next_power_of_2(N))
    grid = (M,)
    layer_norm_kernel[grid](
        x, weight, bias, out,
        x.stride(0), x.stride(1),
        weight.stride(0),
        bias.stride(0),
        out.stride(0), out.stride(1),
        N, float(eps),
        BLOCK_N=BLOCK_N,
    )
    return out


# %%
# Demo
# ----

if __name__ == "__main__":
    x = torch.randn(64, 3 * 1000)[:, ::3]  # (64, 1000), column stride 3
    w, b = torch.randn(1000), torch.randn(1000)
    ref = torch.nn.functional.layer_norm(x, (1000,), w, b, 1e-5)
    print("strided:", (layer_norm(x=x, weight=w, bias=b, eps=1e-5) - ref).abs().max().item())
