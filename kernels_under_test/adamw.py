"""
Fused AdamW step
================

One step of AdamW (Loshchilov and Hutter's decoupled weight decay) over a flat
fp32 parameter, in one pass over memory:

* ``p <- p * (1 - lr * weight_decay)``
* ``m <- beta1 * m + (1 - beta1) * g``
* ``v <- beta2 * v + (1 - beta2) * g^2``
* ``p <- p - lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)``

The scalars are formed on the host in float64, as ``torch.optim.AdamW`` forms
them, and Triton passes each to the kernel as fp32.  ``1 - beta2`` is then the
fp32 rounding of the float64 difference, not ``1 - fp32(beta2)``: for
``beta2 = 0.9999`` the two differ by about 1e-4 relative, and both are correct
kernels.  The suite's magnitude pass gives each float scalar its own rounding
to fp32, so either convention is inside the bound (``docs/tolerance.md``).

The launcher returns the new ``(p, m, v)`` and leaves its inputs as they were.
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
# Each program updates ``BLOCK_SIZE`` consecutive elements; everything is fp32.


@triton.jit
def adamw_kernel(
    p_ptr, g_ptr, m_ptr, v_ptr,  # *Pointers* to the parameter, its gradient and the two moments
    p_out_ptr, m_out_ptr, v_out_ptr,  # *Pointers* to the updated parameter and moments
    n_elements,  # Number of elements of each
    decay,  # 1 - lr * weight_decay
    beta1, one_minus_beta1,  # The first moment's decay, and 1 - beta1 formed on the host
    beta2, one_minus_beta2,  # The second moment's decay, and 1 - beta2 formed on the host
    step_size,  # lr / (1 - beta1^step)
    bias2_sqrt,  # sqrt(1 - beta2^step)
    eps,  # Added to the denominator
    BLOCK_SIZE: tl.constexpr,  # Elements per program; a power of two
):
    pid = tl.program_id(axis=0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    m = beta1 * m + one_minus_beta1 * g
    v = beta2 * v + one_minus_beta2 * g * g
    denom = tl.sqrt(v) / bias2_sqrt + eps
    p = p * decay - step_size * (m / denom)
    tl.store(p_out_ptr + offs, p, mask=mask)
    tl.store(m_out_ptr + offs, m, mask=mask)
    tl.store(v_out_ptr + offs, v, mask=mask)


# %%
# Oracle and contract
# -------------------
# The oracle is AdamW's definition, in float64.  It takes the scalars as numbers
# or 0-d tensors alike (``** 0.5``, not ``math.sqrt``), so the magnitude pass can
# follow each scalar's rounding through it.

DIMS = {"N": Dim(1, 1 << 24)}
SCALARS = {
    "lr": Scalar(1e-5, 1e-2),
    "beta1": Scalar(0.8, 0.95),
    "beta2": Scalar(0.99, 0.9999),
    "eps": Scalar(1e-8, 1e-6),
    "weight_decay": Scalar(0.0, 0.1),
    "step": Scalar(1, 10000, kind="int"),
}


def adamw_oracle(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    bias1 = 1 - beta1**step
    bias2 = 1 - beta2**step
    denom = v**0.5 / bias2**0.5 + eps
    p = p * (1 - lr * weight_decay) - (lr / bias1) * (m / denom)
    return p, m, v


ADAMW_CONTRACT = dict(
    family="adamw",
    inputs={
        "p": Tensor(("N",)),
        "g": Tensor(("N",)),
        "m": Tensor(("N",)),
        # The second moment is a running mean of squares: never negative.
        "v": Tensor(("N",), value_range=(0.0, 4.0)),
    },
    dims=DIMS,
    scalars=SCALARS,
    oracle=adamw_oracle,
)


def check_adamw_args(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, fn="adamw"):
    """Raise TypeError/ValueError unless the tensors and scalars are inside the contract."""
    for name, t in (("p", p), ("g", g), ("m", m), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} is a {type(t).__name__}, expected a torch.Tensor")
        if t.dtype != torch.float32:
            raise TypeError(f"{fn}: {name}.dtype={t.dtype}, expected float32")
        if t.dim() != 1 or t.shape != p.shape:
            raise ValueError(f"{fn}: {name}.shape={tuple(t.shape)}, expected a 1-D tensor of p's shape")
        if not t.is_contiguous():
            raise ValueError(f"{fn}: {name}.stride()={t.stride()}, expected a contiguous tensor")
        if t.device != p.device:
            raise ValueError(f"{fn}: {name}.device={t.device}, expected p's device ({p.device})")
    if not DIMS["N"].admits(p.shape[0]):
        raise ValueError(f"{fn}: p.shape[0]={p.shape[0]}, expected {DIMS['N'].min} <= N <= {DIMS['N'].max}")
    for name, value in (("lr", lr), ("beta1", beta1), ("beta2", beta2), ("eps", eps),
                        ("weight_decay", weight_decay), ("step", step)):
        spec = SCALARS[name]
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"{fn}: {name}={value!r}, expected a Python number")
        if spec.kind == "int" and not isinstance(value, numbers.Integral):
            raise TypeError(f"{fn}: {name}={value!r}, expected an int")
        if not (math.isfinite(value) and spec.low <= value <= spec.high):
            raise ValueError(f"{fn}: {name}={value!r}, expected {spec.low} <= {name} <= {spec.high}")


# %%
# Launcher
# --------
# The host forms every derived scalar in float64, as torch.optim does.


@subject(**ADAMW_CONTRACT)
def adamw(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
    """One AdamW step on 1-D contiguous fp32 tensors; returns the new ``(p, m, v)``."""
    check_adamw_args(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step)
    p_out, m_out, v_out = torch.empty_like(p), torch.empty_like(m), torch.empty_like(v)
    n = p.shape[0]
    BLOCK_SIZE = 1024
    adamw_kernel[(triton.cdiv(n, BLOCK_SIZE),)](
        p, g, m, v, p_out, m_out, v_out, n,
        1 - lr * weight_decay,
        beta1, 1 - beta1,
        beta2, 1 - beta2,
        lr / (1 - beta1**step),
        math.sqrt(1 - beta2**step),
        eps,
        BLOCK_SIZE=BLOCK_SIZE,
    )
    return p_out, m_out, v_out


# %%
# Demo
# ----
# A step against torch.optim.AdamW on the same parameter.

if __name__ == "__main__":
    torch.manual_seed(0)
    p, g = torch.randn(3000), torch.randn(3000)
    m, v = torch.zeros(3000), torch.zeros(3000)
    new_p, _, _ = adamw(p=p, g=g, m=m, v=v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1)
    ref = p.clone().requires_grad_(True)
    opt = torch.optim.AdamW([ref], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    ref.grad = g.clone()
    opt.step()
    print("max |p - torch.optim|:", (new_p - ref.detach()).abs().max().item())
