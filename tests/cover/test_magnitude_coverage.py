"""The magnitude pass never gives up silently (issue 28, item 3).

- a survey names every aten op without a rule that an oracle reaches, forward and backward
  (``oracles/magnitude_coverage.py``; ``bench/opdb_calibration.py --coverage`` prints it for op_db);
- the rules added for op_db's float ops give the magnitudes their definitions say: products
  (a pairwise tree), picked elements (medians, running maxima, max poolings), ``as_strided`` views of
  the storage, window sums (average pooling), ``_trilinear`` (``F.bilinear``);
- an in-place reshape inside a composite op (quantile's ``squeeze_``) reshapes the magnitudes with the
  values; one that sets strides (``as_strided_``) is named.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from triton_conformance.oracles import magnitude
from triton_conformance.oracles import magnitude_selections as selections
from triton_conformance.oracles.magnitude import Unavailable, gradient_magnitudes, output_magnitudes
from triton_conformance.oracles.magnitude_coverage import survey


def magnitudes(oracle, **inputs):
    got = output_magnitudes(oracle, inputs, {})
    assert not isinstance(got, Unavailable), got
    return got


def magnitude_of(oracle, **inputs):
    return magnitudes(oracle, **inputs)[0]


class _LogCumSumExpInBackward(torch.autograd.Function):
    """Forward: x * 2 (covered); backward: a logcumsumexp of the gradient (no rule)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return torch.logcumsumexp(g, 0)


# -- the survey ----------------------------------------------------------------------


def test_survey_names_every_missing_op_forward_where_the_pass_names_only_the_first():
    x = torch.randn(6, 6, dtype=torch.float64)

    def oracle(x):
        return torch.histc(x, 4).sum() + torch.logcumsumexp(x, 0).sum()

    first = output_magnitudes(oracle, {"x": x}, {})
    assert isinstance(first, Unavailable) and first.reason == "no magnitude rule for aten.histc.default"
    got = survey(oracle, {"x": x})
    assert got.forward == ("aten.histc.default", "aten.logcumsumexp.default")
    assert got.backward == () and got.failure is None and not got.complete
    assert not magnitude._SURVEY  # the survey leaves the pass as it found it: a later pass gives up again
    assert isinstance(output_magnitudes(oracle, {"x": x}, {}), Unavailable)


def test_survey_names_an_op_reached_only_by_the_backward():
    x = torch.randn(5, dtype=torch.float64)
    got = survey(_LogCumSumExpInBackward.apply, {"x": x}, grads=("x",), grad_output=torch.ones(5, dtype=torch.float64))
    assert got.forward == () and got.backward == ("aten.logcumsumexp.default",)
    assert survey(lambda x: (x * 2).exp(), {"x": x}, grads=("x",), grad_output=torch.ones(5)).complete


def test_survey_says_which_argument_is_wrong():
    with pytest.raises(TypeError, match=r"inputs=list, expected a mapping"):
        survey(lambda x: x, [torch.ones(2)])
    with pytest.raises(ValueError, match=r"grad_output=None with grads named"):
        survey(lambda x: x, {"x": torch.ones(2)}, grads=("x",))


def test_a_gradient_without_a_rule_is_unavailable_and_named():
    x = torch.randn(5, dtype=torch.float64)
    got = gradient_magnitudes(_LogCumSumExpInBackward.apply, {"x": x}, {}, ("x",), torch.ones(5, dtype=torch.float64))
    assert got == Unavailable("no magnitude rule for aten.logcumsumexp.default")


def test_an_in_place_reshape_reshapes_value_magnitude_and_wrapper():
    x = torch.randn(3, 8, dtype=torch.float64)
    (whole,) = magnitudes(lambda x: torch.quantile(x, 0.5), x=x)  # quantile squeezes its result in place
    assert whole.shape == () and float(whole) >= abs(float(torch.quantile(x, 0.5)))
    (rows,) = magnitudes(lambda x: (x * 1).unsqueeze_(0).transpose_(0, 1), x=x)
    assert rows.shape == (3, 1, 8) and torch.allclose(rows[:, 0], 2 * x.abs(), rtol=1e-12)

    def flat(x):  # reads the shape the wrapper has after the in-place reshape
        y = (x * 1).unsqueeze_(0)
        return y.reshape(y.shape[0], -1)

    assert magnitudes(flat, x=x)[0].shape == (1, 24)
    got = gradient_magnitudes(lambda x: torch.quantile(x, 0.5), {"x": x}, {}, ("x",),
                              torch.tensor(1.0, dtype=torch.float64))
    assert not isinstance(got, Unavailable) and got[0].shape == (3, 8) and bool((got[0] > 0).any())


def test_an_in_place_restride_is_named():
    x = torch.randn(3, 8, dtype=torch.float64)
    got = output_magnitudes(lambda x: (x * 1).as_strided_((4,), (2,)), {"x": x}, {})
    assert got == Unavailable("no magnitude rule for aten.as_strided_.default")


def test_a_declined_decomposition_is_named(monkeypatch):
    monkeypatch.setattr(magnitude, "_decomposition", lambda func: (lambda *a, **k: NotImplemented))
    got = output_magnitudes(lambda x: x.prod(), {"x": torch.rand(4, dtype=torch.float64)}, {})
    assert got == Unavailable("no magnitude rule for aten.prod.default")


# -- the rules -----------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_a_product_of_n_terms_allows_n_input_roundings_and_n_minus_1_products(n):
    x = torch.rand(3, n, dtype=torch.float64) + 0.5
    m = magnitude_of(lambda x: x.prod(1), x=x)
    assert torch.allclose(m, (2 * n - 1) * x.prod(1), rtol=1e-5)
    whole = magnitude_of(lambda x: torch.prod(x), x=x)
    assert torch.allclose(whole, (2 * 3 * n - 1) * x.prod(), rtol=1e-2)  # second order: (383 u)^2 at n = 64


def test_a_running_product_and_a_product_with_keepdim_have_their_values_shape():
    x = torch.rand(4, 5, dtype=torch.float64) + 0.5
    assert magnitude_of(lambda x: x.prod(0, keepdim=True), x=x).shape == (1, 5)
    m = magnitude_of(lambda x: torch.cumprod(x, 1), x=x)
    assert m.shape == (4, 5) and bool((m >= x.cumprod(1)).all())


def test_a_picked_element_carries_the_magnitude_of_the_element_it_picked():
    x = torch.randn(4, 9, dtype=torch.float64)
    y = torch.randn(4, 9, dtype=torch.float64)

    def oracle(x, y):  # each element's magnitude differs from its value's: |x * y| + |x| |y| + |x| |y|
        p = x * y
        return (p.median(1).values, torch.cummax(p, 1).values, p.kthvalue(3, 1).values, torch.median(p))

    median, cummax, kth, whole = magnitudes(oracle, x=x, y=y)
    p, mp = x * y, 3 * (x * y).abs()
    assert torch.allclose(median, mp.gather(1, p.median(1).indices[:, None])[:, 0], rtol=1e-5)
    assert torch.allclose(cummax, mp.gather(1, torch.cummax(p, 1).indices), rtol=1e-5)
    assert torch.allclose(kth, mp.gather(1, p.kthvalue(3, 1).indices[:, None])[:, 0], rtol=1e-5)
    assert torch.allclose(whole, mp.flatten()[(p.flatten() == torch.median(p)).nonzero()[0, 0]], rtol=1e-5)


def test_a_max_pooling_carries_the_magnitude_of_the_element_it_picked():
    x = torch.randn(2, 3, 9, dtype=torch.float64)
    m = magnitude_of(lambda x: F.adaptive_max_pool1d(x * 3, 4), x=x)
    _, where = F.adaptive_max_pool1d(x * 3, 4, return_indices=True)
    assert torch.allclose(m, 6 * x.abs().gather(-1, where), rtol=1e-5)


def test_as_strided_views_the_magnitudes_laid_out_as_the_values_are():
    base = torch.randn(6, 8, dtype=torch.float64)
    x = base[:, ::2]  # the value a view of base's storage; its magnitude laid out otherwise, contiguous
    mag = torch.arange(24, dtype=torch.float64).reshape(6, 4)
    got = selections.apply("strided", "as_strided", (x, (3, 4), (4, 2), 2), {}, mag, None)
    storage = base.abs().flatten()
    storage[torch.arange(48).reshape(6, 8)[:, ::2].flatten()] = mag.flatten()
    assert torch.equal(got, storage.as_strided((3, 4), (4, 2), 2))
    xt = base.t()  # through the pass: a dense, transposed input
    same = magnitude_of(lambda x: x.as_strided((4, 3), (1, 8), 1), x=xt)
    assert torch.equal(same, base.abs().flatten().as_strided((4, 3), (1, 8), 1))


def test_an_average_pooling_allows_sqrt_k_roundings_of_the_windows_terms():
    x = torch.randn(2, 3, 16, dtype=torch.float64)
    m = magnitude_of(lambda x: F.avg_pool1d(x, 4), x=x)
    assert torch.allclose(m, (1 + math.sqrt(4)) * F.avg_pool1d(x.abs(), 4), rtol=1e-5)


def test_a_bilinear_form_allows_each_products_roundings_and_the_sum_of_its_terms():
    x1, x2 = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    w = torch.randn(2, 3, 4, dtype=torch.float64)
    m = magnitude_of(lambda x1, x2, w: F.bilinear(x1, x2, w), x1=x1, x2=x2, w=w)
    terms = torch.einsum("bi,kij,bj->bk", x1.abs(), w.abs(), x2.abs())
    # three inputs and two products each: 5 |x1 w x2|; the sum over 12 terms: sqrt(12) more
    assert torch.allclose(m, (5 + math.sqrt(12)) * terms, rtol=1e-6)


def test_a_shrink_backward_passes_the_gradient_where_the_input_is_outside_lambda():
    x = torch.tensor([-2.0, -0.25, 0.5, 0.75, 3.0], dtype=torch.float64)
    got = gradient_magnitudes(lambda x: F.softshrink(x, 0.5), {"x": x}, {}, ("x",),
                              torch.full((5,), 2.0, dtype=torch.float64))
    assert not isinstance(got, Unavailable), got
    # where the input is outside [-lambda, lambda]: |g| and the where's own rounding (1 unit); 0 inside
    assert torch.equal(got[0], torch.tensor([4.0, 0.0, 0.0, 4.0, 4.0], dtype=torch.float64))


def test_a_distinct_value_carries_the_largest_magnitude_of_the_elements_equal_to_it():
    x = torch.tensor([3.0, 1.0, 3.0, 2.0, 1.0], dtype=torch.float64)
    c = torch.tensor([1.0, 2.0, 1.0, 1.0, 2.0], dtype=torch.float64)
    # x * c = [3, 2, 3, 2, 2]: each product's magnitude |c| |x| + |x c| = 2 |x c|, 3's and 2's alike
    (m,) = magnitudes(lambda x: torch.unique(x * c), x=x)
    assert torch.equal(m, torch.tensor([4.0, 6.0], dtype=torch.float64))
    (rows,) = magnitudes(lambda x: torch.unique(x[[0, 3, 1, 0]].reshape(4, 1).expand(4, 2) * 1, dim=0), x=x)
    assert torch.equal(rows, torch.tensor([[2.0, 2.0], [4.0, 4.0], [6.0, 6.0]], dtype=torch.float64))


def test_a_run_of_equal_neighbours_carries_the_largest_magnitude_in_it():
    x = torch.tensor([1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 1.0], dtype=torch.float64)
    c = torch.tensor([1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 1.0], dtype=torch.float64)
    # x * c = [1, 2, 2, 2, 6, 3, 1]: runs [1], [2, 2, 2], [6], [3], [1]; each product's magnitude 2 |x c|
    (m,) = magnitudes(lambda x: torch.unique_consecutive(x * c), x=x)
    assert torch.equal(m, torch.tensor([2.0, 4.0, 12.0, 6.0, 2.0], dtype=torch.float64))
    rows = torch.tensor([[1.0, 2.0], [1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    (by_row,) = magnitudes(lambda x: torch.unique_consecutive(x * torch.tensor([[1.0], [2.0], [1.0]],
                                                                                dtype=torch.float64), dim=1), x=rows)
    assert torch.equal(by_row, 2 * (rows * torch.tensor([[1.0], [2.0], [1.0]], dtype=torch.float64)))  # no run
    (by_col,) = magnitudes(lambda x: torch.unique_consecutive(x * 1, dim=0), x=rows)
    assert torch.equal(by_col, torch.tensor([[2.0, 4.0], [6.0, 8.0]], dtype=torch.float64))  # rows 0 and 1: one run


def test_a_rounded_quotient_near_a_step_allows_one_step_and_nowhere_else():
    # fp16's trunc(a / b) is 21 where float64's is 20 when a / b = 20.999 rounds to 21 in fp16
    a = torch.tensor([20.999, 20.5, -3.0001], dtype=torch.float64)
    b = torch.ones(3, dtype=torch.float64)
    fp16 = 2.0**-11
    for mode in ("trunc", "floor"):
        got = output_magnitudes(lambda a, b, mode=mode: torch.div(a, b, rounding_mode=mode), {"a": a, "b": b}, {},
                                fp16)
        assert not isinstance(got, Unavailable), got
        allowance = 8 * fp16 * got[0]  # the judge's C * u * m
        assert float(allowance[0]) >= 1.0 and float(allowance[2]) >= 1.0  # a step within reach
        assert float(allowance[1]) < 0.5  # 20.5: no step within reach of fp16's roundings
    fp32 = output_magnitudes(lambda a, b: torch.div(a, b, rounding_mode="trunc"), {"a": a, "b": b}, {})[0]
    assert float(8 * 2.0**-24 * fp32[0]) < 0.5  # at fp32, 20.999 is far from a step


def test_the_precision_verdict_judges_a_step_at_the_input_dtypes_roundings():
    # torch's fp16 trunc(a / b) under the generic fp32 claim: a quotient that fp16 rounds onto the next
    # integer is 1 off; within the bound for fp16 intermediates (the step is within their reach), not worse
    import triton_conformance as tc
    from tests._subjects import as_subject
    from triton_conformance import Dim, Tensor
    from triton_conformance.conformance.judge import Judge

    contract = tc.Contract(inputs={"a": Tensor(("N",), dtypes=("float16",)), "b": Tensor(("N",), same_dtype_as="a")},
                           dims={"N": Dim(1, 4096)}, oracle=lambda a, b: torch.div(a, b, rounding_mode="trunc"))
    a = torch.tensor([21.296875, 10.0], dtype=torch.float16)
    b = torch.tensor([-0.9683, 3.0], dtype=torch.float16)
    out = torch.div(a, b, rounding_mode="trunc")
    assert out[0] == -22  # float64: -21 (a / b = -21.995, -22.0 in fp16)
    found = Judge(as_subject(contract)).compare({"a": a, "b": b}, {"N": 2}, {"a": "float16", "b": "float16"}, {},
                                                (out,))
    assert found is not None and found.details["precision"]["achieved"] == "input-dtype", found
    off = out.clone()
    off[1] = 4.0  # 10 / 3 is far from a step: 1 off there is worse than any fp16 computation
    found = Judge(as_subject(contract)).compare({"a": a, "b": b}, {"N": 2}, {"a": "float16", "b": "float16"}, {},
                                                (off,))
    assert found is not None and found.details["precision"]["achieved"] == "worse", found


def test_the_closed_form_derivatives_give_what_forward_mode_ad_gives(monkeypatch):
    # add/sub/mul/div/neg take their derivatives in closed form (cheaper); the magnitudes are forward-mode AD's
    from triton_conformance.oracles import magnitude_rules

    g = torch.Generator().manual_seed(3)
    a, b = (torch.randn(4, 5, generator=g, dtype=torch.float64) for _ in range(2))
    c = torch.randn(5, generator=g, dtype=torch.float64) + 3

    def oracle(a, b, c):
        return (-(a * b) + torch.add(a, c, alpha=2) - torch.sub(b, 0.5, alpha=3) * 1.5) / c - (a / 4 + b).neg() * b

    inputs = {"a": a, "b": b, "c": c}
    go = torch.randn(4, 5, generator=g, dtype=torch.float64)
    closed = output_magnitudes(oracle, inputs, {})[0], gradient_magnitudes(oracle, inputs, {}, ("a", "b", "c"), go)
    monkeypatch.setattr(magnitude_rules, "_CLOSED", set())
    monkeypatch.setattr(magnitude_rules, "_product_second_order", lambda *args: None)
    by_ad = output_magnitudes(oracle, inputs, {})[0], gradient_magnitudes(oracle, inputs, {}, ("a", "b", "c"), go)
    assert not isinstance(closed[0], Unavailable) and not isinstance(closed[1], Unavailable), closed
    # equal but for the finite second difference's own rounding (the closed form has none)
    torch.testing.assert_close(closed[0], by_ad[0], rtol=1e-8, atol=0)
    for x, y in zip(closed[1], by_ad[1]):
        torch.testing.assert_close(x, y, rtol=1e-8, atol=0)
