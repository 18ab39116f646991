"""Every rounding a correct kernel may do is in the magnitudes (issue 28, item 1).

- a float scalar carries its rounding to fp32 (``oracles/magnitude.py``, ``_tracked_scalars``);
- a cast to a coarser dtype inside an oracle rounds there (``magnitude_rules._cast``), so an
  attention oracle can say that P is rounded to bf16 before the P @ V dot;
- a product keeps its second-order term, so ``(x - mean)^2`` of a constant row is not exact.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import triton_conformance as tc
from tests._subjects import as_subject
from triton_conformance import Dim, Tensor, Tolerance
from triton_conformance.conformance.judge import Judge
from triton_conformance.oracles.magnitude import FP32_UNIT, Unavailable, output_magnitudes
from triton_conformance.oracles.rounding import input_dtype, rounded_to, widened

BF16_UNIT, FP16_UNIT = 2.0**-8, 2.0**-11


def magnitude(oracle, unit=FP32_UNIT, **inputs_and_scalars):
    inputs = {n: v for n, v in inputs_and_scalars.items() if isinstance(v, torch.Tensor)}
    scalars = {n: v for n, v in inputs_and_scalars.items() if not isinstance(v, torch.Tensor)}
    got = output_magnitudes(oracle, inputs, scalars, unit)
    assert not isinstance(got, Unavailable), got
    return got[0]


# -- scalars ---------------------------------------------------------------------------


def test_a_float_scalar_carries_its_rounding_to_fp32():
    x = torch.rand(16, dtype=torch.float64) + 0.5
    beta2 = 0.9999
    m = magnitude(lambda x, beta2: (1 - beta2) * x, x=x, beta2=beta2)
    # 1 - beta2 is off by up to u_fp32 * beta2 where beta2 was rounded (host or device): in units of
    # u_fp32, |x| * beta2, some 5000 times the |1 - beta2| * |x| of an exact scalar.
    assert torch.all(m >= beta2 * x.abs())
    assert torch.all(m <= (beta2 + 4 * (1 - beta2)) * x.abs())


def test_a_scalar_s_rounding_is_counted_in_the_kernel_s_unit():
    x = torch.rand(16, dtype=torch.float64) + 0.5
    fp32 = magnitude(lambda x, b: (1 - b) * x, x=x, b=0.9999)
    bf16 = magnitude(lambda x, b: (1 - b) * x, unit=BF16_UNIT, x=x, b=0.9999)
    # In bf16 units the scalar's fp32 rounding is 2^-16 of what it is in fp32 units.
    assert torch.all(bf16 < 1e-3 * fp32)


def test_an_oracle_that_needs_a_python_float_still_gets_magnitudes():
    def oracle(x, s):
        if not isinstance(s, float):
            raise TypeError(f"s={s!r}, expected a float")
        return x * s

    x = torch.rand(8, dtype=torch.float64)
    assert torch.allclose(magnitude(oracle, x=x, s=0.5), 0.5 * x + 0.5 * x)  # |s| m_x + its own rounding


# -- casts -----------------------------------------------------------------------------


@pytest.mark.parametrize("cast, u", [(lambda p: p.to(torch.bfloat16), BF16_UNIT), (lambda p: p.half(), FP16_UNIT),
                                     (lambda p: p.to(torch.float32), FP32_UNIT)])
def test_a_cast_to_a_coarser_dtype_inside_an_oracle_rounds(cast, u):
    p = torch.rand(64, dtype=torch.float64) + 0.25
    m = magnitude(lambda p: cast(p).to(torch.float64), p=p)
    rounded = cast(p).to(torch.float64)
    assert torch.allclose(m, p + (u / FP32_UNIT) * rounded)  # the input's own |p|, and the cast's rounding


def test_a_cast_to_a_finer_dtype_is_exact():
    p = torch.rand(64, dtype=torch.float64) + 0.25
    once = p + (BF16_UNIT / FP32_UNIT) * p.to(torch.bfloat16).double()  # the one rounding, to bf16
    for widen in (torch.float32, torch.float64):
        assert torch.allclose(magnitude(lambda p, widen=widen: p.to(torch.bfloat16).to(widen), p=p), once)
    assert torch.equal(magnitude(lambda p: p.clone(), p=p), p)


def test_the_oracle_sees_the_dtype_the_kernel_held_its_input_in():
    v = torch.randn(5, dtype=torch.bfloat16)
    assert input_dtype(widened(v)) == torch.bfloat16 and widened(v).dtype == torch.float64
    assert input_dtype(v) == torch.bfloat16  # the oracle run in the input dtype: the tensor's own
    assert torch.equal(rounded_to(widened(v) / 3, input_dtype(v)), (widened(v) / 3).to(torch.bfloat16).double())
    with pytest.raises(TypeError, match=r"rounded_to: dtype=torch.int32, expected a torch float dtype"):
        rounded_to(widened(v), torch.int32)
    with pytest.raises(TypeError, match=r"input_dtype: x is a float, expected one of the oracle's input tensors"):
        input_dtype(1.0)


# -- flash attention: the nightly's bf16 cells, one query, D = 1 --------------------------


def flash_arithmetic(q, k, v, sm_scale):
    """FlashAttention's arithmetic, emulated on the CPU: scores, exp and sums in fp32, P rounded to the
    input dtype before the P @ V dot, the output rounded last."""
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    p = torch.exp(s - s.amax(-1, keepdim=True))
    acc = p.to(v.dtype).float() @ v.float()
    return (acc / p.sum(-1, keepdim=True)).to(v.dtype)


@pytest.mark.parametrize("n, seed", [(1056, 175), (1040, 48)])
def test_flash_attention_with_p_rounded_to_bf16_passes_where_the_reference_rule_failed(n, seed):
    import kernels_under_test.flash_attention as flash

    subject = flash.flash_attention
    gen = torch.Generator().manual_seed(seed)
    qkv = {x: torch.randn(1, 1 if x == "q" else n, 1, generator=gen).to(torch.bfloat16) for x in "qkv"}
    dims, dtypes, scalars = {"B": 1, "M": 1, "N": n, "D": 1}, {x: "bfloat16" for x in "qkv"}, {"sm_scale": 1.0}
    out = (flash_arithmetic(**qkv, sm_scale=1.0),)
    assert Judge(subject).compare(qkv, dims, dtypes, scalars, out) is None
    # The declaration it replaces (the unrounded oracle, FlashAttention's 4x rule) raised the alarm.
    before = dataclasses.replace(subject, contract=dataclasses.replace(
        subject.contract, tolerance=Tolerance(reference_k=4.0),
        oracle=lambda q, k, v, sm_scale: flash.attention_weights(q, k, sm_scale) @ v))
    found = Judge(before).compare(qkv, dims, dtypes, scalars, out)
    assert found is not None and found.kind == "mismatch"


# -- the second-order term ---------------------------------------------------------------


VARIANCE = tc.Contract(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 8), "N": Dim(2, 4096)},
                       oracle=lambda x: x.var(-1), reduces="N")


def sequential_fp32_variance(x):
    """A kernel's two-pass variance in fp32, its mean the sum times the fp32 reciprocal of N: the mean of
    a constant row is then off by that reciprocal's rounding, and ``x - mean`` is not 0."""
    total = torch.cumsum(x, -1, dtype=torch.float32)[..., -1]
    d = x - (total * torch.tensor(1 / x.shape[-1], dtype=torch.float32))[..., None]
    return torch.cumsum(d * d, -1, dtype=torch.float32)[..., -1] / (x.shape[-1] - 1)


def test_the_variance_of_a_constant_row_allows_the_kernel_s_rounding():
    x = torch.full((2, 1000), 3.7, dtype=torch.float32)
    out = sequential_fp32_variance(x)
    assert bool((out > 1e-20).all())  # what first-order magnitudes (0 at x - mean = 0) could not allow
    assert Judge(as_subject(VARIANCE)).compare({"x": x}, {"M": 2, "N": 1000}, {"x": "float32"}, {}, (out,)) is None


def test_the_second_order_term_is_the_product_of_the_factors_errors():
    d = torch.zeros(4, dtype=torch.float64)
    m = magnitude(lambda d: d * d, d=d)
    assert torch.equal(m, torch.zeros(4, dtype=torch.float64))  # |d| = 0: no error to multiply
    x = torch.full((3,), 2.0, dtype=torch.float64)
    m = magnitude(lambda x: (x - x) * (x - x), x=x)
    # x - x is 0 with magnitude |x| + |x| = 4; the product's error is (u * 4)^2, 16 u in units of u.
    assert torch.allclose(m, torch.full((3,), 16 * FP32_UNIT, dtype=torch.float64))
    mm = magnitude(lambda x: (x - x)[None] @ (x - x)[:, None], x=x)
    assert torch.allclose(mm, torch.full((1, 1), 3 * 16 * FP32_UNIT, dtype=torch.float64))


def test_an_op_the_oracle_runs_in_bf16_counts_its_rounding_once():
    x = torch.rand(32, dtype=torch.float64) + 0.5
    m = magnitude(lambda x: (x.to(torch.bfloat16) * 3).double(), x=x)
    xb = x.to(torch.bfloat16).double()
    cast = x + (BF16_UNIT / FP32_UNIT) * xb  # x's own |x| and its rounding to bf16
    # 3 times that, and the product's rounding at bf16, once (its second order is below 1e-6 of it)
    assert torch.allclose(m, 3 * cast + (BF16_UNIT / FP32_UNIT) * (xb * 3).to(torch.bfloat16).double(), rtol=1e-6)
