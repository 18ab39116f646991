"""Launcher shapes real kernel libraries have, each with a bug and its correct twin.

An autograd Function and an nn.Module whose weight is a drawn parameter (the
shape of liger-kernel's LigerRMSNorm), a launcher returning two outputs, one
writing into its argument (declared ``inplace``), one writing into it without
saying so, and a dropout seeded through ``torch.manual_seed``.  The correct
twins live here too (nothing in ``kernels_under_test`` has these shapes).
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Dropout, Scalar, Tensor, register

BUGS = [
    ("zoo_rms_norm_function_eps_outside", "layout:contiguous", "wrong", "mismatch"),
    ("zoo_rms_norm_module_cached_weight", "layout:contiguous", "wrong", "mismatch"),
    ("zoo_scale_pair_second_in_fp16", "layout:contiguous", "wrong", "mismatch"),
    ("zoo_scale_inplace_forgets_tail", "shape:non-pow2", "wrong", "mismatch"),
    ("zoo_scale_writes_its_input", "memory", "unsafe", "mutated-input"),
    ("zoo_torch_dropout_fixed_generator", "stochastic:seeds", "wrong", "seed-dependence"),
]

BLOCK = 128


# %%
# RMSNorm: an autograd Function around a row kernel, and a module holding the weight
# ----------------------------------------------------------------------------------

@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, EPS_OUTSIDE: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / n_cols
    if EPS_OUTSIDE:
        rstd = 1.0 / tl.sqrt(mean_square) + eps  # BUG: eps added after the root, not inside it
    else:
        rstd = 1.0 / tl.sqrt(mean_square + eps)
    tl.store(out_ptr + row * n_cols + cols, x * rstd * w, mask=mask)


def _rms_norm(x, weight, eps, eps_outside=False):
    if not (x.is_contiguous() and weight.is_contiguous()):
        raise ValueError("rms_norm: expected contiguous x and weight")
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"rms_norm: x has {x.shape[-1]} columns, weight {weight.shape[0]}")
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    rms_norm_kernel[(x.numel() // n_cols,)](x, weight, out, n_cols, eps, EPS_OUTSIDE=eps_outside,
                                            BLOCK_N=triton.next_power_of_2(n_cols))
    return out


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        out = _rms_norm(x, weight, eps)
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        return out


class RMSNormFunctionEpsOutside(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        out = _rms_norm(x, weight, eps, eps_outside=True)
        ctx.save_for_backward(x, weight)
        return out


class RMSNorm(torch.nn.Module):
    """LigerRMSNorm's shape: ``weight`` is a parameter of size (hidden_size,)."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        return RMSNormFunction.apply(x, self.weight, self.eps)


class RMSNormCachedWeight(RMSNorm):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__(hidden_size, eps)
        self._weight = self.weight.detach().clone()  # BUG: a copy made at construction, stale once weight changes

    def forward(self, x):
        return RMSNormFunction.apply(x, self._weight.to(x.device), self.eps)


def rms_norm_oracle(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


RMS = dict(inputs={"x": Tensor(("M", "N")), "weight": Tensor(("N",))}, dims={"M": Dim(1, 64), "N": Dim(1, 1024)},
           reduces="N")

register(RMSNormFunction, name="zoo_rms_norm_function", family="zoo_rms_norm_function",
         scalars={"eps": Scalar(1e-6, 1e-2)}, oracle=rms_norm_oracle, **RMS)
register(RMSNormFunctionEpsOutside, name="zoo_rms_norm_function_eps_outside", family="zoo_rms_norm_function",
         scalars={"eps": Scalar(1e-6, 1e-2)}, oracle=rms_norm_oracle, **RMS,
         xfail="eps is added to 1/rms instead of inside the square root")
register(lambda N: RMSNorm(N), name="zoo_rms_norm_module", family="zoo_rms_norm_module",
         parameters={"weight": "weight"}, oracle=rms_norm_oracle, **RMS)
register(lambda N: RMSNormCachedWeight(N), name="zoo_rms_norm_module_cached_weight", family="zoo_rms_norm_module",
         parameters={"weight": "weight"}, oracle=rms_norm_oracle, **RMS,
         xfail="forward uses a copy of the weight made in __init__, not the module's weight")


# %%
# Elementwise scale: two outputs, in place, and an undeclared write into the input
# --------------------------------------------------------------------------------

@triton.jit
def scale_kernel(x_ptr, out_ptr, second_ptr, n, HAS_SECOND: tl.constexpr, SECOND_FP16: tl.constexpr,
                 BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * 2, mask=mask)
    if HAS_SECOND:
        second = x + 1
        if SECOND_FP16:
            second = second.to(tl.float16).to(tl.float32)  # BUG: the second output goes through fp16
        tl.store(second_ptr + offsets, second, mask=mask)


def _check(x, name):
    if not x.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous x")


def _scale(x, out, second=None, second_fp16=False, grid=None):
    n = x.numel()
    if n:
        scale_kernel[grid or (triton.cdiv(n, BLOCK),)](x, out, out if second is None else second, n,
                                                       HAS_SECOND=second is not None, SECOND_FP16=second_fp16,
                                                       BLOCK=BLOCK)


VECTOR = dict(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 4096)})


def pair_oracle(x):
    return x * 2, x + 1


def scale_pair(x):
    """``(2 x, x + 1)``, both from one kernel."""
    _check(x, "scale_pair")
    out, second = torch.empty_like(x), torch.empty_like(x)
    _scale(x, out, second)
    return out, second


def scale_pair_second_in_fp16(x):
    _check(x, "scale_pair")
    out, second = torch.empty_like(x), torch.empty_like(x)
    _scale(x, out, second, second_fp16=True)
    return out, second


register(scale_pair, name="zoo_scale_pair", family="zoo_scale_pair", oracle=pair_oracle, **VECTOR)
register(scale_pair_second_in_fp16, name="zoo_scale_pair_second_in_fp16", family="zoo_scale_pair",
         oracle=pair_oracle, **VECTOR, xfail="the second output is rounded through fp16")


def scale_inplace_(x):
    """``x *= 2`` in place; returns nothing."""
    _check(x, "scale_inplace_")
    _scale(x, x)


def scale_inplace_forgets_tail_(x):
    _check(x, "scale_inplace_")
    _scale(x, x, grid=(max(1, x.numel() // BLOCK),))  # BUG: floor, not cdiv: the last partial block is skipped


register(scale_inplace_, name="zoo_scale_inplace", family="zoo_scale_inplace", inplace=("x",),
         oracle=lambda x: x * 2, **VECTOR)
register(scale_inplace_forgets_tail_, name="zoo_scale_inplace_forgets_tail", family="zoo_scale_inplace",
         inplace=("x",), oracle=lambda x: x * 2, **VECTOR,
         xfail="the grid is n // BLOCK: elements past the last whole block keep their old values")


def scale(x):
    """``2 x`` into a new tensor."""
    _check(x, "scale")
    out = torch.empty_like(x)
    _scale(x, out)
    return out


def scale_writes_its_input(x):
    _check(x, "scale")
    _scale(x, x)  # BUG: the result goes into x (saves an allocation) and x is returned
    return x


register(scale, name="zoo_scale", family="zoo_scale", oracle=lambda x: x * 2, **VECTOR)
register(scale_writes_its_input, name="zoo_scale_writes_its_input", family="zoo_scale", oracle=lambda x: x * 2,
         **VECTOR, xfail="writes its result into its input without declaring it in place")


# %%
# Dropout seeded through torch.manual_seed
# ----------------------------------------

def torch_seeded_dropout(x, p):
    """``torch.nn.functional.dropout``: its mask comes from torch's global generator."""
    return torch.nn.functional.dropout(x, p)


def torch_dropout_fixed_generator(x, p):
    fixed = torch.Generator(device=x.device).manual_seed(1234)  # BUG: its own fixed seed
    keep = torch.rand(x.shape, generator=fixed, device=x.device) >= p  # (on x's device: a CPU mask crashed on CUDA)
    return torch.where(keep, x / (1 - p), 0.0) if p < 1 else torch.zeros_like(x)


TORCH_DROPOUT = dict(family="zoo_torch_dropout", inputs={"x": Tensor(("M", "N"), layouts="any")},
                     dims={"M": Dim(0, 1 << 20), "N": Dim(0, 1 << 20)}, scalars={"p": Scalar(0.0, 1.0)},
                     model=Dropout(p="p", seed=None), oracle=lambda x, p: x, deterministic=False,
                     max_elements=1 << 22)

register(torch_seeded_dropout, name="zoo_torch_dropout", **TORCH_DROPOUT)
register(torch_dropout_fixed_generator, name="zoo_torch_dropout_fixed_generator", **TORCH_DROPOUT,
         xfail="draws its mask from a generator seeded with a constant: torch.manual_seed does not reach it")
