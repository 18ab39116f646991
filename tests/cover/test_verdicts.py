"""Verdicts that hold on code nobody calibrated (issue 28): overflow by rounding, findings grouped only
when they are one finding, findings outside the contract said so first."""

from __future__ import annotations

import torch

from triton_conformance.oracles.comparison import compare
from triton_conformance.oracles.tolerance import default_bound

# -- inf positions are the oracle's as rounded to the output dtype -------------------------


def _fp16_judged(got: torch.Tensor, ref: torch.Tensor):
    finite = ref[torch.isfinite(ref)]
    return compare(got, ref, default_bound(out_dtype="float16", reduction=4, scale=float(finite.abs().max())))


def test_an_overflow_that_the_rounding_itself_makes_is_honoured():
    # issue 28: an fp16 gradient whose float64 value is -709,961 (past fp16's 65,504) is -inf in fp16
    x = torch.tensor([[-1000.0, 700.0, 1.5, 2.0]], dtype=torch.float64)
    w = torch.tensor([[709.961, 1.0, 3.0, -1.0]], dtype=torch.float64)
    ref = x * w
    got = x.half() * w.half()  # torch's own fp16 product: a correct kernel
    assert torch.isinf(got[0, 0]) and torch.isfinite(ref).all()
    assert _fp16_judged(got, ref) is None


def test_an_infinity_where_the_rounded_oracle_is_finite_still_fails():
    ref = torch.tensor([-60000.0, 700.0, 1.5, 2.0], dtype=torch.float64)  # every value fits in fp16
    got = ref.half().clone()
    got[0] = -float("inf")
    found = _fp16_judged(got, ref)
    assert found is not None and found.kind == "nan-mismatch", found
    wrong_sign = ref.clone()
    wrong_sign[0] = -709961.0  # rounds to -inf: +inf is still wrong
    flipped = wrong_sign.half()
    flipped[0] = float("inf")
    assert _fp16_judged(flipped, wrong_sign).kind == "nan-mismatch"


def test_an_e4m3fn_result_past_its_range_is_the_saturated_value():
    # Tutorial 09's fp8 GEMM stores its fp32 accumulator as e4m3fn: a float64 result of 597.7 is 448 (e4m3fn has no
    # infinity; torch's cast and the GPU's cvt.rn.satfinite saturate), and only that.
    ref = torch.tensor([597.65625, -1000.0, 3.0], dtype=torch.float64)
    bound = default_bound(out_dtype="float8_e4m3fn", reduction=255, scale=3.0)
    assert compare(ref.to(torch.float8_e4m3fn), ref, bound) is None
    wrong = ref.to(torch.float8_e4m3fn).float()
    wrong[0] = 256.0  # finite and in range, but not what rounding makes of 597.7
    assert compare(wrong.to(torch.float8_e4m3fn), ref, bound).kind == "mismatch"


def test_a_mismatch_names_its_output_as_data():
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    found = compare(ref.float() + 1, ref, default_bound(out_dtype="float32"), name="grad x")
    assert found.to_dict()["output"] == "grad x"
