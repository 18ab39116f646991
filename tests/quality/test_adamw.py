"""A fused AdamW step in both scalar conventions passes the judge; one with a wrong beta2 does not.

The first step of an optimizer (``m = v = 0``) at ``beta2 = 0.9999`` is where the conventions part:
``v`` is ``(1 - beta2) * g^2`` alone, and the host's ``fp32(1 - beta2)`` is 1.7e-4 relative from the
device's ``1 - fp32(beta2)``, some 3000 times fp32's rounding of the result.  Only the fp32 rounding
each float scalar carries in the magnitude pass lets both through.
"""

from __future__ import annotations

import pytest
import torch

from triton_conformance import get_subject
from triton_conformance.conformance.judge import Judge

N = 4096
SCALARS = dict(lr=1e-3, beta1=0.9, beta2=0.9999, eps=1e-8, weight_decay=0.01, step=1)


def first_step():
    gen = torch.Generator().manual_seed(5)
    return dict(p=torch.randn(N, generator=gen), g=torch.randn(N, generator=gen), m=torch.zeros(N), v=torch.zeros(N))


def judged(name):
    import tests.zoo.zoo_adamw  # noqa: F401 - registers the device-side twin and the bug

    subject = get_subject(name)
    inputs = first_step()
    outputs = subject.launcher(**inputs, **SCALARS)
    return Judge(subject).compare(inputs, {"N": N}, {n: "float32" for n in inputs}, SCALARS, outputs)


@pytest.mark.parametrize("name", ["adamw", "adamw_device_scalars"])
def test_both_scalar_conventions_pass_the_first_step(name, backend, kernels):
    assert judged(name) is None


def test_the_conventions_differ_by_more_than_the_results_rounding(backend, kernels):
    import tests.zoo.zoo_adamw  # noqa: F401

    inputs = first_step()
    host = get_subject("adamw").launcher(**inputs, **SCALARS)[2]
    device = get_subject("adamw_device_scalars").launcher(**inputs, **SCALARS)[2]
    gap = ((host.double() - device.double()).abs() / device.double().abs()).max()
    assert gap > 1e-4  # so the oracle's one value of beta2 cannot be exact for both


def test_beta2_held_in_bf16_fails_the_first_step(backend, kernels):
    found = judged("zoo_adamw_beta2_in_bf16")
    assert found is not None and (found.outcome, found.kind) == ("wrong", "mismatch")
    # bf16 holds 0.9999 as 1.0: v stays 0, and p's step is divided by eps alone.
    assert found.details["output"] in ("output[0]", "output[2]")
