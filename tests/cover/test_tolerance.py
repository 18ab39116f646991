"""The tolerance policy (oracles/tolerance.py) and the comparison (oracles/comparison.py)."""

import math
import os
from types import SimpleNamespace

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the @triton.jit below is defined

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import triton_conformance as tc  # noqa: E402
from triton_conformance import Dim, InvalidContract, Scalar, Tensor, Tolerance
from triton_conformance.conformance.judge import Judge
from triton_conformance.oracles import (
    ROUNDING_FACTOR,
    SAFETY_FACTOR,
    UNIT_ROUNDOFF,
    Bound,
    default_bound,
)
from triton_conformance.oracles.comparison import compare
from triton_conformance.oracles.tolerance import TF32_UNIT_ROUNDOFF
from triton_conformance.strategies import Spec

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
    assert b.rtol == pytest.approx(4 * u_out + 8 * u_acc * math.sqrt(k), rel=1e-12)
    assert b.atol == pytest.approx(8 * u_acc * math.sqrt(k) * scale + finfo(out).tiny, rel=1e-12)
    assert b.reference_k is None and b.source == "dtype"
    assert SAFETY_FACTOR == 8 and ROUNDING_FACTOR == 4


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
    expected = 8 * u * 2 * scale + 32 * finfo("float32").tiny  # the underflow floor
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
    # Powers of two: the limit, the reference and the error are all exact in float64, so the
    # error equals the limit itself (decimal figures round it below, and then '>=' passed too).
    exact = Bound(rtol=2.0 ** -10, atol=2.0 ** -20)
    ref = f64(1024.0, -1024.0)
    limit = exact.atol + exact.rtol * 1024.0  # 1 + 2^-20
    at_limit = ref + torch.sign(ref) * limit
    assert ((at_limit - ref).abs() == limit).all()  # no rounding anywhere
    assert compare(at_limit, ref, exact) is None
    just_past = ref + torch.sign(ref) * (limit + 2.0 ** -30)
    assert compare(just_past, ref, exact).mismatched == 2


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


# -- tf32 dots on CUDA (dot_precision) ------------------------------------------


def to_tf32(x):
    """Round fp32 values to tf32 (10 mantissa bits, nearest even), as a tensor-core dot does, in float64."""
    bits = x.to(torch.float32).contiguous().view(torch.int32)
    bits = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~0x1FFF
    return bits.view(torch.float32).to(torch.float64)


def attention(q, k, v, sm_scale, rounding=lambda t: t):
    s = rounding(q) @ rounding(k).transpose(-1, -2) * sm_scale
    return rounding(torch.softmax(s, dim=-1)) @ rounding(v)


def test_tf32_rounding_helper_keeps_ten_mantissa_bits():
    assert TF32_UNIT_ROUNDOFF == 2.0**-11
    x = torch.tensor([1 + 2.0**-10, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-12], dtype=torch.float32)
    assert to_tf32(x).tolist() == [1 + 2.0**-10, 1.0, 1 + 2.0**-9, 1.0]  # ties to even


@pytest.mark.parametrize("k, scale", [(1, 1.0), (2048, 3.0)])
def test_tf32_widens_the_bound_by_the_documented_term(k, scale):
    plain = default_bound(out_dtype="float32", reduction=k, scale=scale)
    wide = default_bound(out_dtype="float32", reduction=k, scale=scale, tf32=True)
    assert wide.rtol == pytest.approx(plain.rtol + SAFETY_FACTOR * 2 * 2.0**-11, rel=1e-12)
    assert wide.atol == pytest.approx(plain.atol + SAFETY_FACTOR * 2 * 2.0**-11 * scale, rel=1e-12)
    assert "tf32" in wide.describe() and "tf32" not in plain.describe()


FLASH_DIMS = {"B": Dim(1, 4), "M": Dim(1, 2048), "N": Dim(1, 2048), "D": Dim(1, 128)}


FLASH_RULE = Tolerance(reference_k=4.0)


def flash_like(dot_precision, tolerance=FLASH_RULE):
    qkv = {n: Tensor(("B", "M" if n == "q" else "N", "D"), dtypes=("float16", "float32"), layouts="any")
           for n in ("q", "k", "v")}
    return tc.Contract(inputs=qkv, dims=FLASH_DIMS, scalars={"sm_scale": Scalar(0.05, 1.0)},
                       oracle=lambda q, k, v, sm_scale: attention(q, k, v, sm_scale), reduces="N",
                       tolerance=tolerance, dot_precision=dot_precision)


def spec(dtype, n=64):
    return Spec(dims={"B": 1, "M": 64, "N": n, "D": 64}, dtypes={"q": dtype, "k": dtype, "v": dtype}, layouts={})


CUDA_OUT = SimpleNamespace(dtype=torch.float32, device=SimpleNamespace(type="cuda"))
CPU_OUT = torch.zeros(1, dtype=torch.float32)


@pytest.mark.parametrize("precision, out, dtype, widened", [
    ("tf32", CUDA_OUT, "float32", True),
    ("tf32", CPU_OUT, "float32", False),  # the interpreter has no tf32
    ("tf32", CUDA_OUT, "float16", False),  # fp16 dots are not rounded to tf32
    ("ieee", CUDA_OUT, "float32", False),
    (None, CUDA_OUT, "float32", False),
])
def test_the_battery_widens_only_for_declared_tf32_on_cuda_with_fp32_inputs(precision, out, dtype, widened):
    subject = SimpleNamespace(contract=flash_like(precision))
    ref = torch.ones(3, dtype=torch.float64)
    s = spec(dtype)
    bound = Judge(subject).bound(s.dims, s.dtypes, out, ref, 2.0)
    plain = default_bound(out_dtype="float32", reduction=64, scale=2.0)
    assert (bound.rtol > plain.rtol) == widened
    assert bound.reference_k == 4.0 and ("tf32" in bound.source) == widened


@pytest.mark.parametrize("bad", ["fp32", "TF32", 32, "tf32x3"])
def test_dot_precision_is_validated(bad):
    with pytest.raises(InvalidContract, match=r"dot_precision=.*expected one of \('tf32', 'ieee', 'fp8-fast-accumulate', None\)"):
        flash_like(bad)


@pytest.mark.parametrize("n, d, sm_scale", [(64, 40, 1.0), (300, 128, 1.0), (2048, 128, 1.0), (2048, 128, 0.3),
                                            (17, 16, 0.05), (1, 1, 1.0)])
def test_tf32_flash_attention_passes_on_cuda_terms_and_would_fail_without_them(n, d, sm_scale):
    """A tf32 FlashAttention's error (emulated: q, k, P and V rounded to tf32) fits the widened bound.

    The same error breaks the fp32 bound, so without ``dot_precision="tf32"`` a
    correct kernel would fail on the H200; an error of 5% of the scale on one row still fails.
    """
    gen = torch.Generator().manual_seed(n * 1000 + d)
    q, k, v = (torch.randn(4, m, d, generator=gen, dtype=torch.float64).float().double()
               for m in (256, n, n))
    ref = attention(q, k, v, sm_scale)
    got = attention(q, k, v, sm_scale, rounding=to_tf32).float()
    scale = float(ref.abs().max())
    wide = default_bound(out_dtype="float32", reduction=n, scale=scale, tf32=True)
    assert compare(got, ref, wide) is None
    if d > 1:  # (a 1x1 head has almost no rounding to catch)
        assert compare(got, ref, default_bound(out_dtype="float32", reduction=n, scale=scale)) is not None
    wrong = got.clone()
    wrong[0, 3] += 0.05 * scale
    assert compare(wrong, ref, wide) is not None


# -- float scalars reach the oracle as the kernel received them ----------------------

@triton.jit
def second_moment_kernel(v_ptr, g_ptr, out_ptr, n, beta2, BLOCK: tl.constexpr):
    """Adam's second moment, ``beta2 * v + (1 - beta2) * g^2``, with ``1 - beta2`` formed on the device."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(v_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, beta2 * v + (1 - beta2) * g * g, mask=mask)


def second_moment(v, g, beta2):
    out = torch.empty_like(v)
    second_moment_kernel[(triton.cdiv(v.numel(), 64),)](v, g, out, v.numel(), beta2, BLOCK=64)
    return out


@pytest.fixture
def float_scalars():
    """Python floats reach the kernel as fp32 scalars, as the compiler gives them (the run installs it)."""
    from triton_conformance import compat

    added = compat.install(["float_scalars"]) if "float_scalars" not in compat.installed() else ()
    yield
    compat.uninstall(added)


def test_the_oracle_sees_a_float_scalar_rounded_to_fp32_as_the_kernel_does(float_scalars):
    beta2 = 0.9999  # 1 - fp32(beta2) is 1.2e-4 relative off 1 - beta2
    s = tc.register(second_moment, name="second_moment", scalars={"beta2": Scalar(0.99, 0.99999)},
                    inputs={"v": Tensor(("N",)), "g": Tensor(("N",))}, dims={"N": Dim(1, 4096)},
                    oracle=lambda v, g, beta2: beta2 * v + (1 - beta2) * g * g)
    v = torch.zeros(300)  # the first step: the output is (1 - beta2) g^2 alone
    g = torch.randn(300, generator=torch.Generator().manual_seed(0))
    out = second_moment(v, g, beta2)
    judge = Judge(s)
    assert judge.launched_scalars({"beta2": beta2}) == {"beta2": float(torch.tensor(beta2, dtype=torch.float32))}
    assert judge.compare({"v": v, "g": g}, {"N": 300}, {"v": "float32", "g": "float32"}, {"beta2": beta2},
                         (out,)) is None
    # The float64 beta2 the oracle used to get: the correct kernel failed by the scalar's rounding alone.
    unrounded = (1 - beta2) * g.double() ** 2
    assert compare(out, unrounded, judge.bound({"N": 300}, {"v": "float32"}, out, unrounded)).kind == "mismatch"


def test_int_and_bool_scalars_and_undeclared_names_pass_unchanged():
    s = SimpleNamespace(contract=SimpleNamespace(scalars={"k": Scalar(1, 9, kind="int"), "flag": Scalar(kind="bool"),
                                                          "p": Scalar(0.0, 1.0)}))
    got = Judge(s).launched_scalars({"k": 3, "flag": True, "p": 0.1, "other": 0.1})
    assert got == {"k": 3, "flag": True, "p": float(torch.tensor(0.1, dtype=torch.float32)), "other": 0.1}
    assert type(got["k"]) is int and got["p"] != 0.1


def test_a_result_fp32_math_flushes_near_zero_passes_and_a_larger_one_fails():
    # torch's bf16 silu(-89): exp(89) overflows fp32, sigmoid is 0, the result -0.0 where float64 has -7.4e-38.
    ref = torch.tensor([-7.374611361591464e-38], dtype=torch.float64)
    flushed = torch.tensor([-0.0], dtype=torch.float64)
    for out in ("bfloat16", "float32"):  # the scale is the largest |ref|, as the judge passes it
        assert compare(flushed, ref, default_bound(out_dtype=out, scale=7.4e-38)) is None, out
        past = ref * 2**6  # past 2^5 smallest normals
        assert compare(flushed, past, default_bound(out_dtype=out, scale=4.8e-36)) is not None, out
    assert default_bound(out_dtype="float16", scale=0.0).atol == 2.0**-14  # fp16's own floor is the larger
    assert default_bound(out_dtype="float64", scale=0.0).atol == 2.0**-1022  # float64 keeps its own


@pytest.mark.parametrize("ref, scale", [
    (torch.tensor([[-3.0, 2.0], [float("nan"), float("-inf")]], dtype=torch.float64), 3.0),  # |x| of finite ones
    (torch.tensor([float("inf"), -0.5, float("nan")]), 0.5),
    (torch.zeros(4, dtype=torch.float64), 0.0),  # finite zeros: the scale is 0, not the default
    (torch.full((2, 2), float("nan")), 1.0),  # no finite element: the default
    (torch.zeros(3, 0), 1.0),  # empty
])
def test_the_default_error_scale_is_the_largest_finite_magnitude_of_the_reference(ref, scale):
    from triton_conformance.conformance.judge import largest_finite_magnitude

    assert largest_finite_magnitude(ref) == scale
