"""The conditioned bound: the terms' magnitudes (oracles/magnitude.py) and how the comparison uses them.

The rules are checked against the classic bounds they should reproduce
(Higham's ``sum |x|`` for a sum, ``|A| |B|`` for a product), and the bound is
checked on the false alarms of issue 22: torch's own fp32 ops, in batches of
ill-conditioned rows, fail the plain bound and pass the conditioned one.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from triton_conformance.oracles.comparison import compare
from triton_conformance.oracles.magnitude import gradient_magnitudes, output_magnitudes
from triton_conformance.oracles.magnitude_rules import LIBRARY_ULPS
from triton_conformance.oracles.tolerance import SAFETY_FACTOR, UNIT_ROUNDOFF, Bound, default_bound

U32 = UNIT_ROUNDOFF["float32"]


def f64(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# -- the magnitudes ---------------------------------------------------------------


def test_a_sum_carries_highams_sum_of_absolute_terms_times_its_depth():
    x = f64(5, 39)
    (m,) = output_magnitudes(lambda x: x.sum(-1), {"x": x}, {})
    expected = (1 + math.sqrt(39)) * x.abs().sum(-1)  # the terms' own |x|, and the partial sums' roundings
    assert torch.allclose(m, expected, rtol=1e-12, atol=0)


def test_a_product_carries_the_componentwise_bound_of_its_dot_products():
    a, b = f64(6, 17, seed=1), f64(17, 4, seed=2)
    (m,) = output_magnitudes(lambda a, b: a @ b, {"a": a, "b": b}, {})
    # m_A |B| + |A| m_B + sqrt(K) |A||B|, and the second-order u m_A m_B (m_A = |A|, m_B = |B|)
    assert torch.allclose(m, (2 + math.sqrt(17) + U32) * (a.abs() @ b.abs()), rtol=1e-12, atol=0)


def test_a_pointwise_op_carries_its_derivative_times_its_input_and_its_own_rounding():
    x, y = f64(3, 4), f64(3, 4, seed=5)
    (m,) = output_magnitudes(lambda x, y: x * y, {"x": x, "y": y}, {})
    # |y| m_x + |x| m_y + |xy| (rounded once), and the second order u m_x m_y (a float64 second
    # difference: to about 1e-9 of |xy|)
    assert torch.allclose(m, (3 + U32) * (x * y).abs(), rtol=1e-8, atol=0)
    (m,) = output_magnitudes(lambda x: torch.exp(x), {"x": x}, {})
    # exp is a library function: its own rounding counts LIBRARY_ULPS times (its second order,
    # u exp(x) x^2 / 2 in units of u, is below 1e-7 of that)
    assert torch.allclose(m, x.exp() * x.abs() + LIBRARY_ULPS * x.exp(), rtol=1e-7, atol=0)
    assert LIBRARY_ULPS == 4


def test_cancellation_shows_in_the_magnitude_not_in_the_value():
    x = torch.tensor([[1.0, 1.0 + 2.0**-20]], dtype=torch.float64)
    ref = F.layer_norm(x, (2,), eps=0.0)
    (m,) = output_magnitudes(lambda x: F.layer_norm(x, (2,), eps=0.0), {"x": x}, {})
    assert ref.abs().max() == pytest.approx(1.0)
    assert (m > 2.0**18).all(), "x - mean loses an ulp of |x|, which rstd = 2^21 amplifies"


def test_a_max_carries_the_magnitude_of_the_element_it_picked():
    x = torch.tensor([[3.0, -5.0, 1.0]], dtype=torch.float64)
    (picked,) = output_magnitudes(lambda x: x.amax(-1), {"x": x}, {})
    assert picked.item() == 3.0  # not 5: the max picked 3
    (scaled,) = output_magnitudes(lambda x: (x * 10).amax(-1), {"x": x}, {})
    assert scaled.item() == 60.0  # 10 * |3| + the product's rounding |30|, not 10 * |-5| + |-50|


def test_views_copies_and_in_place_ops_move_magnitudes_with_values():
    x = f64(4, 6)

    def oracle(x):
        y = x.t().contiguous().clone()
        y[1:3].mul_(2.0)
        return y.t()

    (m,) = output_magnitudes(oracle, {"x": x}, {})
    expected = x.abs().clone()
    expected[:, 1:3] = 2 * x[:, 1:3].abs() * 2  # |2| * m + |2x| (the product's rounding)
    assert torch.allclose(m, expected, rtol=1e-12, atol=0)


def test_non_finite_values_carry_no_magnitude():
    x = torch.tensor([[0.5, -math.inf, 2.0]], dtype=torch.float64)
    (m,) = output_magnitudes(lambda x: torch.softmax(x, -1), {"x": x}, {})
    assert torch.isfinite(m).all() and m[0, 1] == 0


def test_an_op_without_a_rule_gives_no_magnitudes():
    x = f64(4, 4)
    histc = output_magnitudes(lambda x: torch.histc(x, 4), {"x": x}, {})
    assert histc.reason.startswith("no magnitude rule for aten.histc"), histc
    numpy = output_magnitudes(lambda x: torch.from_numpy(x.numpy() * 2), {"x": x}, {})
    assert numpy.reason.startswith("the oracle failed under magnitude tracking: "), numpy


def test_a_mismatch_whose_magnitudes_are_unavailable_says_so_and_why():
    x = f64(4, 4)
    got = (torch.histc(x.float(), 4) + 1).double()
    mismatch = compare(got, torch.histc(x, 4), default_bound(out_dtype="float32"),
                       magnitude=lambda: output_magnitudes(lambda x: torch.histc(x, 4), {"x": x}, {}))
    assert mismatch.to_dict()["magnitudes_unavailable"].startswith("no magnitude rule for aten.histc")
    assert "magnitudes unavailable (no magnitude rule for aten.histc" in mismatch.message


@pytest.mark.parametrize("oracle", [
    lambda x, w: F.layer_norm(x, (x.shape[-1],), w, w, 1e-5),
    lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-5),
    lambda x, w: torch.log_softmax(x, -1) * w,
    lambda x, w: F.gelu(x) * w,
], ids=["layer_norm", "rms_norm", "log_softmax", "gelu"])
def test_composite_ops_and_their_backwards_are_traced(oracle):
    x, w = f64(3, 8), f64(8, seed=3)
    (m,) = output_magnitudes(oracle, {"x": x, "w": w}, {})
    assert (m >= oracle(x, w).abs()).all()
    grads = gradient_magnitudes(oracle, {"x": x, "w": w}, {}, ("x", "w"), f64(3, 8, seed=4))
    assert grads is not None and [g.shape for g in grads] == [x.shape, w.shape]
    assert all(torch.isfinite(g).all() and (g > 0).any() for g in grads)


# -- the conditioned bound ----------------------------------------------------------


def test_conditioned_widens_each_element_to_per_term_times_its_magnitude():
    plain = default_bound(out_dtype="float32", reduction=64, scale=1.0)
    assert plain.per_term == SAFETY_FACTOR * U32
    m = torch.tensor([0.0, 1e3, math.inf, math.nan], dtype=torch.float64)
    wide = plain.conditioned(m)
    assert torch.equal(wide.atol, torch.tensor([plain.atol, plain.per_term * 1e3, plain.atol, plain.atol],
                                               dtype=torch.float64))
    assert wide.rtol == plain.rtol and wide.per_term == 0.0 and "the terms' magnitude" in wide.describe()


def test_a_subjects_own_bound_is_never_widened():
    assert Bound(rtol=1e-3, atol=1e-6).per_term == 0.0
    calls = []
    m = compare(torch.tensor([1.1]), torch.tensor([1.0], dtype=torch.float64), Bound(rtol=1e-3, atol=1e-6),
                magnitude=lambda: calls.append(1) or torch.tensor([1e9], dtype=torch.float64))
    assert m.kind == "mismatch" and not calls


def test_the_magnitude_is_asked_for_only_when_the_plain_bound_fails():
    calls = []

    def magnitude():
        calls.append(1)
        return torch.tensor([1e3], dtype=torch.float64)

    bound = default_bound(out_dtype="float32")
    ref = torch.tensor([1.0], dtype=torch.float64)
    assert compare(ref.float(), ref, bound, magnitude=magnitude) is None and not calls
    assert compare(torch.tensor([1.0001]), ref, bound, magnitude=magnitude) is None and calls == [1]
    assert compare(torch.tensor([1.01]), ref, bound, magnitude=magnitude).kind == "mismatch"


def test_nan_positions_are_never_excused_by_a_magnitude():
    bound = default_bound(out_dtype="float32")
    m = compare(torch.tensor([math.nan]), torch.tensor([1.0], dtype=torch.float64), bound,
                magnitude=torch.tensor([1e30], dtype=torch.float64))
    assert m.kind == "nan-mismatch"


# -- issue 22's false alarms, on torch's own fp32 ops ------------------------------

def _judged(oracle, inputs, reduction, grads=None, grad_output=None, index=0):
    """(plain mismatch, conditioned mismatch) of torch's fp32 result against the float64 oracle."""
    low = {n: v.float() for n, v in inputs.items()}
    exact = {n: v.double() for n, v in low.items()}  # the kernel's inputs, as the oracle sees them
    if grads is None:
        got, ref = oracle(**low), oracle(**exact)
        mags = lambda: output_magnitudes(oracle, exact, {})[index]  # noqa: E731
    else:
        for n in grads:
            low[n].requires_grad_(True)
            exact[n].requires_grad_(True)
        got = torch.autograd.grad(oracle(**low), [low[n] for n in grads], grad_output.float())[index]
        ref = torch.autograd.grad(oracle(**exact), [exact[n] for n in grads], grad_output)[index]
        plain_exact = {n: v.detach() for n, v in exact.items()}
        mags = lambda: gradient_magnitudes(oracle, plain_exact, {}, grads, grad_output)[index]  # noqa: E731
    bound = default_bound(out_dtype="float32", reduction=reduction, scale=float(ref.abs().max()))
    return compare(got.detach(), ref.detach(), bound), compare(got.detach(), ref.detach(), bound, magnitude=mags)


def test_fp32_sum_of_a_transposed_row_whose_terms_cancel():
    # The issue: N=39, M=1, layout transposed: 1.48e-07 against 6.14e-08 + 3.45e-06 |ref|.  One row per
    # draw, 400 draws, read through a transposed view as the layout cell does.
    x = f64(39, 400, seed=768670918).t()
    plain_alarms = conditioned_alarms = 0
    for row in x.split(1):
        plain, conditioned = _judged(lambda x: x.sum(-1), {"x": row}, 39)
        plain_alarms += plain is not None
        conditioned_alarms += conditioned is not None
    assert conditioned_alarms == 0
    assert plain_alarms > 0, "no draw was ill-conditioned enough to show the plain bound's false alarm"


def test_fp32_layer_norm_of_rows_of_two_nearly_equal_values():
    # The issue: N=2, M=32, seed 13: 1.32e-06 against 7.11e-07 + 1.15e-06 |ref|.
    base = f64(4096, 1, seed=13)
    x = torch.cat([base, base + 1e-3 * f64(4096, 1, seed=14)], dim=1)
    oracle = lambda x, w, b: F.layer_norm(x, (2,), w, b, 1e-6)  # noqa: E731
    w, b = f64(2, seed=15), f64(2, seed=16)
    plain, conditioned = _judged(oracle, {"x": x, "w": w, "b": b}, 2)
    assert conditioned is None, conditioned.message
    assert plain is not None


def test_fp32_layer_norm_with_bias_on_ties_where_the_output_is_zero():
    # The issue (H200): values:ties, the output's fp64 value 0, the kernel's 2.1e-06.
    gen = torch.Generator().manual_seed(22)
    x = torch.randint(-2, 3, (2048, 64), generator=gen).double()
    w = torch.randint(-2, 3, (64,), generator=gen).double()
    b = -w * F.layer_norm(x, (64,), eps=1e-5)[0]  # cancels row 0 exactly in float64
    plain, conditioned = _judged(lambda x, w, b: F.layer_norm(x, (64,), w, b, 1e-5), {"x": x, "w": w, "b": b}, 64)
    assert conditioned is None, conditioned.message


def test_fp32_rms_norm_backward_at_one_column():
    # The issue: dx at N=1 is what is left of two O(1) terms; torch's fp32 backward failed the plain
    # bound on every one of 2000 draws.  One row a draw, 200 draws.
    x, w, g = f64(200, 1, seed=1), f64(1, seed=2), f64(200, 1, seed=3)
    oracle = lambda x, w: F.rms_norm(x, (1,), w, 1e-5)  # noqa: E731
    plain_alarms = 0
    for row, grad in zip(x.split(1), g.split(1)):
        plain, conditioned = _judged(oracle, {"x": row, "w": w}, 1, grads=("x", "w"), grad_output=grad)
        assert conditioned is None, conditioned.message
        plain_alarms += plain is not None
    assert plain_alarms > 100
