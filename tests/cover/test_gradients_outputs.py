"""Gradients of every output (issue 29 item 1): each output that carries a gradient is backpropagated with a
grad_output of its own, in the backward and in the float64 oracle, and the contract says which outputs do.

Pure-torch autograd Functions returning ``(x * weight, x + weight)``, so these run fast.
"""

import itertools

import pytest
import torch

import triton_conformance as tc
from triton_conformance import Dim, InvalidContract, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.battery.backward import grad_output, grad_output_key
from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.replay import replay
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config
from triton_conformance.model.contract import Backward
from triton_conformance.model.spec import Spec

_ids = itertools.count()
INPUTS = {"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any"),
          "weight": Tensor(("N",), dtypes=("float32",), layouts="any")}
DIMS = {"M": Dim(1, 16), "N": Dim(1, 16)}


def oracle(x, weight):
    return x * weight, x + weight


class ScaleAndShift(torch.autograd.Function):
    """``(x * w, x + w)``: dx = g0 * w + g1, dw = sum over rows of g0 * x + g1."""

    drops_second = False

    @classmethod
    def forward(cls, ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x * weight, x + weight

    @classmethod
    def backward(cls, ctx, g0, g1):
        x, w = ctx.saved_tensors
        dx, dw = g0 * w, (g0 * x).sum(0)
        if not cls.drops_second and g1 is not None:  # the bug: the second output's gradient ignored
            dx, dw = dx + g1, dw + g1.sum(0)
        return dx, dw


def declare(drops_second=False, backward=True, launcher=None, **kw):
    fn = launcher or type("ScaleAndShift", (ScaleAndShift,), {"drops_second": drops_second})
    return tc.register(fn, name=f"cover_grad_outputs_{drops_second}_{next(_ids)}", inputs=INPUTS, dims=DIMS,
                       oracle=kw.pop("oracle", oracle), backward=backward, **kw)


def cell(subject, name="grad:layout:contiguous"):
    return run_cell(subject, name, backend=Backend(), config=run_config(profile="ci"))


def test_a_backward_that_drops_the_second_outputs_gradient_is_wrong_and_its_twin_is_honoured():
    result = cell(declare(drops_second=True))
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message
    assert cell(declare()).outcome == "honoured"


def test_the_counterexample_and_the_reproducer_carry_every_outputs_grad_output():
    subject = declare(drops_second=True, backward=Backward(outputs=(0, 1)))
    result = cell(subject, "grad:layout:transposed")
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message
    views = result.counterexample.tensors
    assert {"grad_output", "grad_output[1]"} <= set(views)
    layouts = result.counterexample.spec["layouts"]
    assert layouts["grad_output[1]"]["kind"] == "transposed"  # each output's grad_output drawn in the cell's class
    assert "'grad_output[1]': Layout('transposed'" in result.reproducer
    # The replay rebuilds both grad_outputs from the spec, so the example still fails.
    verdict = replay(subject.module, subject.name, "grad:layout:transposed", result.counterexample.spec,
                     check=False)
    assert (verdict.outcome, verdict.kind) == ("wrong", "mismatch")


def test_by_default_every_float_output_is_backpropagated_and_the_counterexample_shows_each():
    result = cell(declare(drops_second=True))
    assert {"grad_output", "grad_output[1]"} <= set(result.counterexample.tensors)


def test_an_output_declared_without_a_gradient_is_not_backpropagated():
    assert cell(declare(drops_second=True, backward=Backward(outputs=(0,)))).outcome == "honoured"


def test_each_output_gets_grad_output_values_of_its_own():
    spec = Spec(dims={"M": 3, "N": 4}, dtypes={"x": "float32", "weight": "float32"}, layouts={}, seed=5)
    first, second = (grad_output(spec, (3, 4), torch.float32, "nan", "cpu", p).values for p in (0, 1))
    assert not torch.equal(first, second)
    assert grad_output_key(0) == "grad_output" and grad_output_key(2) == "grad_output[2]"


def test_the_oracle_backpropagates_the_sum_of_every_outputs_inner_product():
    subject = declare()
    x, w = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    g0, g1 = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    dx, dw = Judge(subject).oracle_gradients({"x": x, "weight": w}, {0: g0, 1: g1}, {})
    torch.testing.assert_close(dx, g0 * w + g1)
    torch.testing.assert_close(dw, (g0 * x + g1).sum(0))
    only_first, _ = Judge(subject).oracle_gradients({"x": x, "weight": w}, g0, {})  # one tensor: output 0's
    torch.testing.assert_close(only_first, g0 * w)


def test_a_declared_output_the_oracle_does_not_return_is_an_oracle_error():
    one = lambda x, weight: x * weight  # noqa: E731
    launcher = type("One", (ScaleAndShift,), {})
    result = cell(declare(launcher=launcher, oracle=one, backward=Backward(outputs=(0, 1))))
    assert (result.outcome, result.finding) == ("oracle-error", "oracle-raised"), result.message


def test_a_declared_output_without_a_grad_fn_has_no_backward():
    result = cell(declare(launcher=lambda x, weight: (x * weight, (x + weight).detach()),
                          backward=Backward(outputs=(0, 1))))
    assert (result.outcome, result.finding) == ("wrong", "no-backward"), result.message
    assert result.details["output"] == 1


def test_outputs_shaped_otherwise_are_declared_by_position():
    def row_sums(x, weight):
        return x * weight, (x * weight).sum(-1)

    s = tc.register(lambda x, weight: row_sums(x, weight), name=f"cover_grad_outputs_rows_{next(_ids)}",
                    inputs=INPUTS, dims=DIMS, oracle=row_sums, backward=Backward(outputs={0: ("M", "N"), 1: "M"}))
    assert s.contract.backward.outputs == {0: ("M", "N"), 1: ("M",)}
    assert cell(s, "grad:layout:transposed").outcome == "honoured"


@pytest.mark.parametrize(("outputs", "match"), [
    ("out", r"backward.outputs='out'"),
    ((0, 0), r"backward.outputs=\(0, 0\), expected .*distinct positions"),
    ((), r"backward.outputs=\(\), expected"),
    ((-1,), r"backward.outputs=\(-1,\)"),
    ((True,), r"backward.outputs=\(True,\)"),
    ({1: ("K",)}, r"backward.outputs\[1\]=\('K',\), expected a tuple of dims declared in dims=\['M', 'N'\]"),
])
def test_a_bad_outputs_declaration_names_the_argument(outputs, match):
    with pytest.raises(InvalidContract, match=match):
        declare(backward=Backward(outputs=outputs))
    assert declare(backward=Backward(outputs=1)).contract.backward.outputs == {1: ("M", "N")}
    assert declare().contract.backward.outputs is None


def test_a_gradient_summed_from_two_outputs_in_its_own_dtype_is_allowed_each_shares_rounding():
    # torch's autograd adds dx's two parts (g0 * y, rounded to fp16, and g1) in fp16: where they cancel, the
    # error is fp16's rounding of the parts, not of their sum.  A part dropped is still far outside.
    half = {"x": Tensor(("M", "N"), dtypes=("float16",)), "y": Tensor(("M", "N"), dtypes=("float16",))}

    def two(x, y):
        return x * y, x + y

    def dropped(x, y):
        return x * y, x.detach() + y  # x's gradient through the second output is lost

    honest = tc.register(two, name=f"cover_grad_outputs_fp16_{next(_ids)}", inputs=half, dims=DIMS, oracle=two,
                         backward=True)
    assert cell(honest, "grad:dtype:float16").outcome == "honoured"
    bug = tc.register(dropped, name=f"cover_grad_outputs_fp16_dropped_{next(_ids)}", inputs=half, dims=DIMS,
                      oracle=two, backward=True)
    result = cell(bug, "grad:dtype:float16")
    assert (result.outcome, result.details.get("gradient")) == ("wrong", "x"), result.message
