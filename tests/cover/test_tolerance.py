"""The tolerance policy (oracles/tolerance.py) and the comparison (oracles/comparison.py)."""

import math

import pytest
import torch

from triton_conformance.oracles import SAFETY_FACTOR, UNIT_ROUNDOFF, Bound, default_bound
from triton_conformance.oracles.comparison import compare

FLOAT_NAMES = ["float16", "bfloat16", "float32", "float64"]


def finfo(name):
    return torch.finfo(getattr(torch, name))


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_unit_roundoff_is_half_an_ulp_of_one(name):
    assert UNIT_ROUNDOFF[name] == finfo(name).eps / 2


@pytest.mark.parametrize("out", FLOAT_NAMES)
@pytest.mark.parametrize("acc", ["float32", "float64", "float16"])
@pytest.mark.parametrize("k, scale", [(1, 1.0), (100, 3.0), (4096, 0.25)], ids=["K1", "K100", "K4096"])
def test_default_bound_follows_the_documented_policy(out, acc, k, scale):
    u_out, u_acc = finfo(out).eps / 2, finfo(acc).eps / 2
    b = default_bound(out_dtype=out, accumulate=acc, reduction=k, scale=scale)
    assert b.rtol == pytest.approx(8 * (u_out + u_acc * math.sqrt(k)), rel=1e-12)
    assert b.atol == pytest.approx(8 * u_acc * math.sqrt(k) * scale + finfo(out).tiny, rel=1e-12)
    assert b.reference_k is None and b.source == "dtype"
    assert SAFETY_FACTOR == 8


def test_bounds_grow_with_reduction_depth_and_lower_precision():
    small = default_bound(out_dtype="float32", reduction=16)
    deep = default_bound(out_dtype="float32", reduction=4096)
    assert deep.rtol > small.rtol and deep.atol > small.atol
    halves = default_bound(out_dtype="float16", reduction=16)
    assert halves.rtol > small.rtol
    assert default_bound(out_dtype="bfloat16").rtol > default_bound(out_dtype="float16").rtol


@pytest.mark.parametrize("k", [0, -3], ids=["zero", "negative"])
def test_a_degenerate_reduction_counts_as_one(k):
    assert default_bound(out_dtype="float32", reduction=k) == default_bound(out_dtype="float32", reduction=1)


@pytest.mark.parametrize("out", ["int8", "int32", "int64", "bool", "uint8"])
def test_integer_outputs_are_exact(out):
    assert default_bound(out_dtype=out, reduction=1000, scale=5.0) == Bound(rtol=0.0, atol=0.0)


def test_an_unknown_accumulate_dtype_falls_back_to_fp32():
    assert default_bound(out_dtype="float16", accumulate="int32") == default_bound(out_dtype="float16")


def test_describe_names_the_rule_and_its_source():
    assert "(dtype)" in default_bound(out_dtype="float32").describe()
    assert default_bound(out_dtype="float32").describe().startswith("|err| <= ")
    ref = Bound(rtol=0.5, atol=0.25, reference_k=2.0, floor=1e-5, source="subject")
    assert ref.describe() == ("|err| <= 0.25 + 0.5 * |ref| + 2 * max|oracle_in_input_dtype - oracle| + 1e-05 "
                              "(subject)")


def test_an_elementwise_scale_gives_an_elementwise_atol():
    scale = torch.tensor([1.0, 10.0, 0.0], dtype=torch.float64)
    b = default_bound(out_dtype="float32", reduction=4, scale=scale)
    u = finfo("float32").eps / 2
    expected = 8 * u * 2 * scale + finfo("float32").tiny
    assert torch.allclose(b.atol, expected, rtol=1e-12, atol=0)
    assert b.rtol == default_bound(out_dtype="float32", reduction=4).rtol
    assert b.describe().startswith(f"|err| <= max {float(expected.max()):.3g} + ")


# -- compare -------------------------------------------------------------

BOUND = Bound(rtol=1e-3, atol=1e-6)


def f64(*values):
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize("actual, expected", [
    (f64(1.0, 2.0, 3.0), f64(1.0, 2.0, 3.0)),
    (f64(1.0009, -2.0019, 0.0), f64(1.0, -2.0, 1e-7)),          # inside atol + rtol*|ref|
    (f64(math.nan, 1.0), f64(math.nan, 1.0)),                     # NaN where the oracle has NaN
    (f64(math.inf, -math.inf), f64(math.inf, -math.inf)),         # matching infinities
    (f64(), f64()),                                                # empty
], ids=["equal", "within", "nan-agrees", "inf-agrees", "empty"])
def test_compare_accepts(actual, expected):
    assert compare(actual, expected, BOUND) is None


def test_the_limit_itself_passes_and_just_past_fails():
    ref = f64(1000.0)
    limit = BOUND.atol + BOUND.rtol * 1000.0
    assert compare(ref + limit, ref, BOUND) is None
    assert compare(ref + limit * (1 + 1e-9), ref, BOUND).kind == "mismatch"


def test_low_precision_actuals_are_compared_in_float64():
    expected = f64(1 / 3, 2 / 3)
    actual = expected.to(torch.float16)
    assert compare(actual, expected, default_bound(out_dtype="float16")) is None
    assert compare(actual, expected, default_bound(out_dtype="float32")).kind == "mismatch"


def test_mismatch_reports_where_and_how_much():
    expected = torch.zeros(3, 4, dtype=torch.float64)
    actual = expected.clone()
    actual[1, 2] = 0.5
    actual[2, 0] = -0.25
    m = compare(actual.float(), expected, BOUND, name="y")
    assert m.kind == "mismatch"
    assert m.first_index == (1, 2)
    assert (m.mismatched, m.total) == (2, 12)
    assert m.max_abs_err == 0.5
    assert m.tolerance == BOUND.describe()
    assert m.message.startswith("y: 2 of 12 elements outside tolerance; first at (1, 2)")
    assert m.to_dict()["first_index"] == (1, 2) and m.to_dict()["kind"] == "mismatch"


@pytest.mark.parametrize("actual, expected, first", [
    (f64(1.0, math.nan), f64(1.0, 2.0), (1,)),        # NaN where the oracle is finite
    (f64(1.0, 2.0), f64(math.nan, 2.0), (0,)),        # finite where the oracle is NaN
    (f64(math.inf, 0.0), f64(-math.inf, 0.0), (0,)),  # wrong sign of infinity
    (f64(0.0, math.inf), f64(0.0, 1e300), (1,)),      # overflowed
    (f64(0.0, 5.0), f64(0.0, math.inf), (1,)),        # missed an overflow
], ids=["nan-for-finite", "finite-for-nan", "inf-sign", "spurious-inf", "missing-inf"])
def test_special_values_must_match_exactly(actual, expected, first):
    m = compare(actual, expected, Bound(rtol=1.0, atol=1e300))  # huge bounds do not excuse them
    assert m.kind == "nan-mismatch"
    assert m.first_index == first and m.mismatched == 1 and m.total == 2


def test_nan_mismatch_outranks_numeric_mismatch():
    m = compare(f64(5.0, math.nan), f64(1.0, 1.0), BOUND)
    assert m.kind == "nan-mismatch" and m.first_index == (1,)


def test_shape_mismatch():
    m = compare(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float64), BOUND, name="out")
    assert m.kind == "bad-shape"
    assert "(2, 3)" in m.message and "(3, 2)" in m.message


def test_scalar_outputs():
    assert compare(torch.tensor(1.0), torch.tensor(1.0, dtype=torch.float64), BOUND) is None
    m = compare(torch.tensor(2.0), torch.tensor(1.0, dtype=torch.float64), BOUND)
    assert m.kind == "mismatch" and m.first_index == ()


REF_RULE = Bound(rtol=0.0, atol=0.0, reference_k=2.0, floor=1e-4)


@pytest.mark.parametrize("err, lowp_errs, ok", [
    (0.0, (0.0, 0.0), True),
    (0.9e-4, (0.0, 0.0), True),       # the floor alone
    (1.1e-4, (0.0, 0.0), False),
    (0.0200, (0.01, 0.0), True),      # k * the worst low-precision error, + floor
    (0.0202, (0.01, 0.0), False),
    (0.0200, (0.0, 0.01), True),      # the worst error anywhere counts for every element
], ids=["exact", "floor", "past-floor", "within-k", "past-k", "worst-elsewhere"])
def test_the_reference_rule_scales_with_the_low_precision_oracle(err, lowp_errs, ok):
    expected = f64(1.0, -2.0)
    actual = expected + f64(err, -err)
    lowp = expected + f64(*lowp_errs)
    m = compare(actual, expected, REF_RULE, lowp=lowp)
    assert (m is None) is ok
    if not ok:
        assert m.kind == "mismatch" and m.tolerance == REF_RULE.describe()


def test_the_reference_rule_adds_to_atol_and_rtol():
    b = Bound(rtol=0.1, atol=0.0, reference_k=1.0, floor=0.0)
    expected, lowp = f64(1.0), f64(1.05)
    assert compare(f64(1.149), expected, b, lowp=lowp) is None   # 0.1 * 1 + 1 * 0.05
    assert compare(f64(1.151), expected, b, lowp=lowp).kind == "mismatch"


def test_non_finite_low_precision_errors_are_ignored():
    b = Bound(rtol=0.0, atol=0.0, reference_k=1.0, floor=0.0)
    m = compare(f64(1.5, 2.0), f64(1.0, 2.0), b, lowp=f64(1.0, math.inf))
    assert m is not None and m.kind == "mismatch"


def test_an_elementwise_atol_judges_each_element_by_its_own_bound():
    b = Bound(rtol=0.0, atol=torch.tensor([1e-6, 1e-1], dtype=torch.float64))
    assert compare(f64(1.0, 1.05), f64(1.0, 1.0), b) is None
    m = compare(f64(1.05, 1.0), f64(1.0, 1.0), b)
    assert m.kind == "mismatch" and m.first_index == (0,)


def test_the_reference_rule_without_a_low_precision_oracle_uses_rtol_atol():
    b = Bound(rtol=0.1, atol=0.0, reference_k=2.0)
    assert compare(f64(1.05), f64(1.0), b) is None
    assert compare(f64(1.2), f64(1.0), b).kind == "mismatch"
