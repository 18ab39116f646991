"""The precision verdict (issue 28, item 2): a failing output says which precision it achieved, and every
judged output reports its worst error in ulps and as a share of its bound."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the zoo's @triton.jit kernels are defined
import pytest
import torch

from triton_conformance.oracles.comparison import compare
from triton_conformance.oracles.magnitude import output_magnitudes
from triton_conformance.oracles.precision import errors_of
from triton_conformance.oracles.tolerance import default_bound


def _row(n=256, seed=0, dtype=torch.float16):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(dtype)  # positive: no cancellation


def _judge(got, x, claimed="float32"):
    """``compare`` as the judge calls it for ``sum(x)``: the claimed bound, the magnitudes, the input-dtype
    bound; returns the mismatch and what ``observe`` was told."""
    ref = x.double().sum().reshape(1)
    bound = lambda acc: default_bound(out_dtype=str(got.dtype)[6:], accumulate=acc, reduction=x.numel(),  # noqa: E731
                                      scale=float(ref.abs().max()))
    seen = []
    mismatch = compare(got.reshape(1), ref, bound(claimed),
                       magnitude=lambda: output_magnitudes(lambda x: x.sum().reshape(1), {"x": x.double()}, {})[0],
                       input_bound=lambda: bound(str(x.dtype)[6:]), observe=seen.append)
    return mismatch, seen


def test_a_sum_kept_in_fp16_under_an_fp32_claim_is_within_the_fp16_bound():
    x = _row(2048)  # partial sums up to 2048, each rounded to fp16's ulp of 1 or 2 there
    acc = torch.zeros((), dtype=torch.float16)
    for v in x:  # a sequential fp16 accumulator: every partial sum rounded to fp16
        acc = (acc + v).to(torch.float16)
    mismatch, seen = _judge(acc, x)
    verdict = mismatch.to_dict()["precision"]
    assert verdict["achieved"] == "input-dtype" and verdict["claimed"] == "float32" and verdict["input"] == "float16"
    assert verdict["ratio_input"] <= 1.0 < verdict["ratio_claimed"]
    assert "precision: within the bound for float16 intermediates" in mismatch.message
    assert "declare `accumulate=` if that is by design" in mismatch.message
    assert seen[-1].used == pytest.approx(verdict["ratio_claimed"])


def test_an_output_worse_than_input_dtype_intermediates_is_called_wrong():
    x = _row(16)
    got = (x.double().sum() * 1.05).to(torch.float16)  # 5% off: no fp16 computation of a sum of 16 is
    mismatch, _ = _judge(got, x)
    verdict = mismatch.to_dict()["precision"]
    assert verdict["achieved"] == "worse" and 1.0 < verdict["ratio_input"] < verdict["ratio_claimed"]
    assert mismatch.message.endswith("past the float32 one it claims): wrong")


def test_a_claim_no_more_precise_than_the_inputs_has_nothing_to_fall_back_to():
    x = _row(dtype=torch.float32)
    got = (x.double().sum() * (1 + 1e-4)).to(torch.float32)
    verdict = _judge(got, x)[0].to_dict()["precision"]
    assert verdict["achieved"] == "worse" and verdict["input"] == "float32"
    assert verdict["ratio_input"] == verdict["ratio_claimed"] > 1.0


def test_a_passing_output_reports_its_worst_error_in_ulps_and_its_share_of_the_bound():
    x = _row()
    mismatch, seen = _judge(x.double().sum().to(torch.float16), x)  # correctly rounded once
    assert mismatch is None and len(seen) == 1
    assert seen[0].ulps <= 0.5 and 0.0 < seen[0].used < 1.0


def test_error_ulps_count_the_output_dtype_spacing_at_the_oracle():
    e = torch.tensor([1.0, 1024.0, 2.0**-20, -3.0], dtype=torch.float64)
    spacing = torch.tensor([2.0**-10, 1.0, 2.0**-24, 2.0**-9], dtype=torch.float64)  # fp16's at each (subnormal)
    for i in range(4):
        err = torch.zeros(4, dtype=torch.float64)
        err[i] = 3 * spacing[i]
        errors = errors_of(err, e, 1.0, torch.float16)
        assert errors.ulps == pytest.approx(3.0), i
    assert errors_of(torch.ones(2), torch.ones(2), 0.0, torch.float32).used == float("inf")  # an exact bound
    assert errors_of(torch.zeros(2), torch.ones(2), 0.0, torch.float32).used == 0.0
    assert errors_of(torch.zeros(2), torch.ones(2), 1.0, torch.int32) is None


@pytest.mark.parametrize("seed", range(5))
def test_the_output_rounding_term_fails_a_value_rounded_through_bf16_and_passes_two_roundings(seed):
    """R = 4 (``docs/tolerance.md``): two roundings in the output dtype pass, a bf16 rounding of an fp16 output
    (up to 4 fp16 ulps, 8 u) does not."""
    g = torch.Generator().manual_seed(seed)
    exact = torch.randn(512, generator=g, dtype=torch.float64) * 10
    bound = default_bound(out_dtype="float16", reduction=64, scale=float(exact.abs().max()))
    twice = (exact.to(torch.float16).double() / 3).to(torch.float16)  # a sum rounded, then divided
    assert compare(twice, exact / 3, bound) is None
    through_bf16 = exact.to(torch.bfloat16).to(torch.float16)
    assert compare(through_bf16, exact, bound).kind == "mismatch"


def test_a_cell_result_carries_the_verdict_and_its_worst_error():
    """Through the judge and the runner: the zoo's bf16 residual under an fp16 claim, and its correct twin."""
    import tests.zoo.zoo_precision  # noqa: F401 - registers both
    from triton_conformance import get_subject
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    config = run_config(profile="ci")
    buggy = run_cell(get_subject("zoo_add_rms_norm_residual_through_bf16"), "dtype:float16", config=config)
    assert buggy.outcome == "wrong" and buggy.details["output"] == "output[1]"
    assert buggy.details["precision"]["achieved"] == "input-dtype"
    assert buggy.details["error_ulps"] > 2 and buggy.details["allowance_used"] > 1
    twin = run_cell(get_subject("add_rms_norm_forward"), "dtype:float16", config=config)
    assert twin.outcome == "honoured" and "precision" not in twin.details
    assert twin.details["error_ulps"] < 1 and twin.details["allowance_used"] < 1
