"""Fused AdamW steps beside ``kernels_under_test.adamw``: a correct twin in the other scalar
convention, and a bug in beta2 that the bound must still see.

- ``adamw_device_scalars`` (correct): the kernel takes lr, beta1, beta2 and weight_decay as
  the fp32 values Triton passes and forms ``1 - beta1``, ``1 - beta2`` and
  ``1 - lr * weight_decay`` on the device.  Its ``1 - beta2`` is ``1 - fp32(beta2)``, where
  the host convention has ``fp32(1 - beta2)``: 1e-4 relative apart at beta2 = 0.9999, both
  correct (:data:`CORRECT` lists it; ``tests/quality/test_adamw.py`` runs it);
- ``zoo_adamw_beta2_in_bf16`` (bug): the same kernel holding beta2 in bf16, as one written for
  a bf16 optimizer state would, kept for fp32 states.  bf16's beta2 is 2^-9 relative off
  (0.999 becomes 0.9990234375, 0.9999 becomes 1.0), which moves ``1 - beta2`` by far more
  than fp32's rounding of beta2, the only allowance a scalar gets.
"""

import math

import torch
import triton
import triton.language as tl

from kernels_under_test.adamw import ADAMW_CONTRACT, check_adamw_args
from triton_conformance import subject

BUGS = [
    ("zoo_adamw_beta2_in_bf16", "dtype:float32", "wrong", "mismatch"),
]
# Correct kernels declared here, with the cells they must pass.
CORRECT = [
    ("adamw_device_scalars", "dtype:float32"),
    ("adamw_device_scalars", "layout:contiguous"),
]


@triton.jit
def adamw_device_scalars_kernel(
    p_ptr, g_ptr, m_ptr, v_ptr,  # *Pointers* to the parameter, its gradient and the two moments
    p_out_ptr, m_out_ptr, v_out_ptr,  # *Pointers* to the updated parameter and moments
    n_elements,  # Number of elements of each
    lr, weight_decay,  # As given, in fp32
    beta1, beta2,  # As given, in fp32
    step_size,  # lr / (1 - beta1^step), formed on the host
    bias2_sqrt,  # sqrt(1 - beta2^step), formed on the host
    eps,  # Added to the denominator
    BETA2_DTYPE: tl.constexpr,  # The dtype beta2 is held in: fp32 (correct) or bf16 (the bug)
    BLOCK_SIZE: tl.constexpr,  # Elements per program
):
    pid = tl.program_id(axis=0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    b2 = tl.full((BLOCK_SIZE,), beta2, tl.float32).to(BETA2_DTYPE).to(tl.float32)
    m = beta1 * m + (1.0 - beta1) * g
    v = b2 * v + (1.0 - b2) * g * g
    denom = tl.sqrt(v) / bias2_sqrt + eps
    p = p * (1.0 - lr * weight_decay) - step_size * (m / denom)
    tl.store(p_out_ptr + offs, p, mask=mask)
    tl.store(m_out_ptr + offs, m, mask=mask)
    tl.store(v_out_ptr + offs, v, mask=mask)


def _adamw_device(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, beta2_dtype, fn):
    check_adamw_args(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, fn)
    p_out, m_out, v_out = torch.empty_like(p), torch.empty_like(m), torch.empty_like(v)
    n = p.shape[0]
    adamw_device_scalars_kernel[(triton.cdiv(n, 1024),)](
        p, g, m, v, p_out, m_out, v_out, n, lr, weight_decay, beta1, beta2,
        lr / (1 - beta1**step), math.sqrt(1 - beta2**step), eps, BETA2_DTYPE=beta2_dtype, BLOCK_SIZE=1024)
    return p_out, m_out, v_out


@subject(**ADAMW_CONTRACT, name="adamw_device_scalars")
def adamw_device_scalars(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
    """Correct: ``1 - beta1``, ``1 - beta2`` and the decay formed on the device from the fp32 scalars."""
    return _adamw_device(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, tl.float32, "adamw_device_scalars")


@subject(**ADAMW_CONTRACT, name="zoo_adamw_beta2_in_bf16",
         xfail="beta2 is held in bf16 (2^-9 relative off), not fp32")
def zoo_adamw_beta2_in_bf16(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
    """Bug: beta2 rounded to bf16 on the device, from a kernel written for bf16 optimizer states."""
    return _adamw_device(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, tl.bfloat16,
                         "zoo_adamw_beta2_in_bf16")
