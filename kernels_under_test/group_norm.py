"""
Group normalization
===================

``out[n, c, :] = (x[n, c, :] - mean_ng) / sqrt(var_ng + eps) * weight[c] + bias[c]``, where the
statistics of group ``g`` run over its ``Cg = C / G`` channels and every spatial position.  One program
per (sample, group) walks the group in tiles of ``BLOCK_C`` channels (the group's channels, padded to a
power of two) by ``BLOCK_HW`` positions, three times: the mean, the variance around it (two passes, as
``layer_norm.py``), then normalise and store.

The contract relates the dims: ``C % G == 0`` (``Divisible("C", by="G")``).  ``G`` is in no input's
shape, so the launcher gets it by keyword, as ``torch.nn.functional.group_norm`` gets ``num_groups``.
A tile's padded channels are masked at the end of the group, not of the tensor: masked at ``C``, a group
whose ``Cg`` is no power of two reads the next group's first channels into its statistics.
"""

import math
import numbers

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Divisible, Scalar, Tensor, subject

# %%
# Compute kernel
# --------------


@triton.jit
def group_norm_kernel(
    x_ptr,  # *Pointer* to the input (N, C, HW)
    w_ptr,  # *Pointer* to the weight (C,)
    b_ptr,  # *Pointer* to the bias (C,)
    out_ptr,  # *Pointer* to the contiguous output (N, C, HW)
    stride_xn, stride_xc, stride_xhw,  # Strides of x
    stride_w,  # Stride of weight
    stride_b,  # Stride of bias
    C,  # Channels
    HW,  # Spatial positions per channel
    G,  # Groups; C % G == 0
    eps,  # Added to the variance before the square root
    BLOCK_C: tl.constexpr,  # The group's channels, padded to a power of two
    BLOCK_HW: tl.constexpr,  # Positions per step
    MASK_AT_GROUP_END: tl.constexpr,  # True; False is the zoo's bug (the mask at C)
):
    pid = tl.program_id(axis=0)
    n = pid // G
    g = pid % G
    cg = C // G
    chans = g * cg + tl.arange(0, BLOCK_C)
    end = (g + 1) * cg if MASK_AT_GROUP_END else C
    chan_mask = chans < end
    x_base = x_ptr + n.to(tl.int64) * stride_xn
    out_base = out_ptr + n.to(tl.int64) * C * HW
    count = cg * HW

    # Pass 1: the mean.  Masked lanes load 0 and add nothing.
    acc = tl.zeros((BLOCK_C, BLOCK_HW), dtype=tl.float32)
    for start in range(0, HW, BLOCK_HW):
        pos = start + tl.arange(0, BLOCK_HW)
        mask = chan_mask[:, None] & (pos < HW)[None, :]
        x = tl.load(x_base + chans[:, None] * stride_xc + pos[None, :] * stride_xhw, mask=mask, other=0.0)
        acc += x.to(tl.float32)
    mean = tl.sum(tl.sum(acc, axis=1), axis=0) / count

    # Pass 2: the variance around the mean.  A masked lane would add mean^2.
    acc = tl.zeros((BLOCK_C, BLOCK_HW), dtype=tl.float32)
    for start in range(0, HW, BLOCK_HW):
        pos = start + tl.arange(0, BLOCK_HW)
        mask = chan_mask[:, None] & (pos < HW)[None, :]
        x = tl.load(x_base + chans[:, None] * stride_xc + pos[None, :] * stride_xhw, mask=mask, other=0.0)
        diff = tl.where(mask, x.to(tl.float32) - mean, 0.0)
        acc += diff * diff
    var = tl.sum(tl.sum(acc, axis=1), axis=0) / count
    rstd = 1.0 / tl.sqrt(var + eps)

    # Pass 3: normalise, scale, shift; only this group's channels are stored.
    store_mask = chans < (g + 1) * cg
    w = tl.load(w_ptr + chans * stride_w, mask=store_mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + chans * stride_b, mask=store_mask, other=0.0).to(tl.float32)
    for start in range(0, HW, BLOCK_HW):
        pos = start + tl.arange(0, BLOCK_HW)
        mask = store_mask[:, None] & (pos < HW)[None, :]
        x = tl.load(x_base + chans[:, None] * stride_xc + pos[None, :] * stride_xhw, mask=mask, other=0.0)
        y = (x.to(tl.float32) - mean) * rstd * w[:, None] + b[:, None]
        tl.store(out_base + chans[:, None] * HW + pos[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


# %%
# Launcher and contract
# ---------------------

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DIMS = {"N": Dim(1, 8), "C": Dim(1, 256), "G": Dim(1, 64), "HW": Dim(1, 256)}
EPS = Scalar(1e-6, 1e-3)


def group_norm_error_scale(x, weight, bias, eps, G):
    """What fp32 rounding errors scale with: x - mean loses about one ulp of the group's max|x|, which
    1/sqrt(var + eps) then amplifies (a nearly constant group is ill-conditioned)."""
    groups = x.reshape(x.shape[0], G, -1)
    rstd = torch.rsqrt(groups.var(-1, unbiased=False, keepdim=True) + eps)
    spread = (groups.abs().amax(-1, keepdim=True) * rstd).expand_as(groups).reshape(x.shape)
    return spread * weight.abs()[:, None] + bias.abs()[:, None]


def group_norm_reference(x, weight, bias, eps, G):
    """torch's group norm, written out: F.group_norm refuses a group of one value (Cg = HW = 1), which the
    contract admits (its output is the bias)."""
    groups = x.reshape(x.shape[0], G, -1)
    mean = groups.mean(-1, keepdim=True)
    var = groups.var(-1, unbiased=False, keepdim=True)
    y = ((groups - mean) * torch.rsqrt(var + eps)).reshape(x.shape)
    return y * weight[:, None] + bias[:, None]


GROUP_NORM_CONTRACT = dict(
    family="group_norm",
    inputs={
        "x": Tensor(("N", "C", "HW"), dtypes=("float16", "bfloat16", "float32"), layouts="any"),
        "weight": Tensor(("C",), dtypes=("float16", "bfloat16", "float32"), layouts="any", same_dtype_as="x"),
        "bias": Tensor(("C",), dtypes=("float16", "bfloat16", "float32"), layouts="any", same_dtype_as="x"),
    },
    dims=DIMS,
    relations=(Divisible("C", by="G"),),
    scalars={"eps": EPS},
    oracle=group_norm_reference,
    reduces="HW",
    error_scale=group_norm_error_scale,
)


def check_group_norm_args(x, weight, bias, eps, G, fn="group_norm"):
    """Raise TypeError/ValueError unless the arguments are inside the contract."""
    for name, t, ndim in (("x", x, 3), ("weight", weight, 1), ("bias", bias, 1)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype != x.dtype or t.dtype not in DTYPES:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected x's dtype, one of float16, bfloat16, float32")
        if t.dim() != ndim:
            raise ValueError(f"{fn}: {name}.dim()={t.dim()}, expected a {ndim}-D tensor")
    N, C, HW = x.shape
    if not isinstance(G, numbers.Integral) or not DIMS["G"].admits(G):
        raise ValueError(f"{fn}: G={G!r}, expected an int, {DIMS['G'].min} <= G <= {DIMS['G'].max}")
    for axis, sym, n in ((0, "N", N), (1, "C", C), (2, "HW", HW)):
        if not DIMS[sym].admits(n):
            raise ValueError(f"{fn}: x.shape[{axis}]={n}, expected {DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")
    if C % G:
        raise ValueError(f"{fn}: C={C} channels in G={G} groups, expected C % G == 0")
    for name, t in (("weight", weight), ("bias", bias)):
        if t.shape[0] != C:
            raise ValueError(f"{fn}: {name}.shape[0]={t.shape[0]}, expected C={C} (x.shape[1])")
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not (
            math.isfinite(eps) and EPS.low <= eps <= EPS.high):
        raise ValueError(f"{fn}: eps={eps!r}, expected a float, {EPS.low} <= eps <= {EPS.high}")


def launch_group_norm(x, weight, bias, eps, G, *, mask_at_group_end=True):
    N, C, HW = x.shape
    out = torch.empty((N, C, HW), dtype=x.dtype, device=x.device)
    BLOCK_C = triton.next_power_of_2(C // G)
    BLOCK_HW = max(1, min(triton.next_power_of_2(HW), 1024 // BLOCK_C))
    group_norm_kernel[(N * G,)](
        x, weight, bias, out,
        x.stride(0), x.stride(1), x.stride(2),
        weight.stride(0), bias.stride(0),
        C, HW, G, float(eps),
        BLOCK_C=BLOCK_C, BLOCK_HW=BLOCK_HW, MASK_AT_GROUP_END=mask_at_group_end,
    )
    return out


@subject(**GROUP_NORM_CONTRACT)
def group_norm(x, weight, bias, eps, G):
    """Group norm of an (N, C, HW) tensor in G groups (C % G == 0), any layout, fp16/bf16/fp32."""
    check_group_norm_args(x, weight, bias, eps, G)
    return launch_group_norm(x, weight, bias, eps, G)


# %%
# Demo
# ----

if __name__ == "__main__":
    x = torch.randn(2, 12, 2 * 50)[:, :, ::2]  # (2, 12, 50), position stride 2
    w, b = torch.randn(12), torch.randn(12)
    ref = torch.nn.functional.group_norm(x, 4, w, b, 1e-5)
    print("strided:", (group_norm(x=x, weight=w, bias=b, eps=1e-5, G=4) - ref).abs().max().item())
