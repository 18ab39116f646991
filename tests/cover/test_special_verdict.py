"""The precision verdict for NaN/inf positions (issue 28, item 2): an inf that the oracle's own steps make
when each is rounded to the input dtype (an fp16 product underflowing to 0 before a division) is explained;
an inf that no such evaluation makes is worse."""

from __future__ import annotations

import torch

import triton_conformance as tc
from tests._subjects import as_subject
from triton_conformance import Dim, Tensor
from triton_conformance.conformance.judge import Judge
from triton_conformance.oracles.rounded_steps import rounded_gradients, rounded_outputs

FP16 = {"x": "float16", "t1": "float16", "t2": "float16"}


def _addcdiv(x, t1, t2):
    return torch.addcdiv(x, t1, t2, value=0.5)


def _judge(oracle, backward=None):
    contract = tc.Contract(inputs={"x": Tensor(("N",), dtypes=("float16",)), "t1": Tensor(("N",), same_dtype_as="x"),
                                   "t2": Tensor(("N",), same_dtype_as="x")},
                           dims={"N": Dim(1, 64)}, oracle=oracle, backward=backward)
    return Judge(as_subject(contract))


def _inputs():
    # element 0: t2 = 1e-4, so fp16's t2 * t2 is 0 (below its smallest subnormal) where float64's is 1e-8
    return {"x": torch.tensor([1.0, 2.0], dtype=torch.float16),
            "t1": torch.tensor([2.03e-4, 0.75], dtype=torch.float16),
            "t2": torch.tensor([1e-4, 1.5], dtype=torch.float16)}


def _torch_fp16_gradients(inputs, go):
    leaves = {n: t.clone().requires_grad_(True) for n, t in inputs.items()}
    return torch.autograd.grad(_addcdiv(**leaves), list(leaves.values()), go)


def test_the_oracles_steps_rounded_to_fp16_underflow_as_torchs_fp16_backward_does():
    inputs = {n: t.double() for n, t in _inputs().items()}
    go = {0: torch.ones(2, dtype=torch.float64)}
    dt2 = rounded_gradients(_addcdiv, inputs, {}, ("x", "t1", "t2"), go, torch.float16)[2]
    assert dt2[0] == float("-inf") and torch.isfinite(dt2[1])
    float64 = torch.autograd.grad(_addcdiv(**{n: t.requires_grad_() for n, t in inputs.items()}), inputs["t2"],
                                  go[0])[0]
    assert -1.1e4 < float(float64[0]) < -1e4  # float64's is finite: -10139
    # in place and through views: each result rounded where it lies
    y = rounded_outputs(lambda x: x.clone().mul_(1e-4).view(-1)[:1] * 1e-4, {"x": torch.ones(3).double()}, {},
                        torch.float16)[0]
    assert float(y[0]) == 0.0  # 1e-8: below fp16's smallest subnormal


def test_an_inf_gradient_from_fp16_intermediates_is_explained():
    inputs = _inputs()
    go = torch.ones(2, dtype=torch.float16)
    grads = _torch_fp16_gradients(inputs, go)
    assert grads[2][0] == float("-inf")  # torch's fp16 formula forms t2 * t2 in fp16
    found = _judge(_addcdiv, backward=("x", "t1", "t2")).compare_gradients(
        inputs, go.double(), {"N": 2}, FP16, {}, grads)
    assert found is not None and found.kind == "nan-mismatch", found
    verdict = found.details["precision"]
    assert verdict["achieved"] == "input-dtype" and verdict["special_positions"] == verdict["special_explained"] == 1
    assert "where float16 intermediates overflow, underflow or cancel" in found.message


def test_an_inf_gradient_that_no_fp16_evaluation_makes_is_worse():
    inputs = _inputs()
    go = torch.ones(2, dtype=torch.float16)
    for position, value in ((1, float("inf")), (0, float("inf"))):  # an inf from nothing; the wrong sign
        grads = list(_torch_fp16_gradients(inputs, go))
        grads[2] = grads[2].clone()
        grads[2][position] = value
        found = _judge(_addcdiv, backward=("x", "t1", "t2")).compare_gradients(
            inputs, go.double(), {"N": 2}, FP16, {}, tuple(grads))
        assert found is not None and found.details["precision"]["achieved"] == "worse", found
        assert "such elements), where the oracle's steps each rounded to float16 give" in found.message


def test_an_inf_output_from_fp16_intermediates_is_explained_and_one_from_nothing_is_worse():
    def oracle(x, t1, t2):
        return x + t1 / (t2 * t2)

    inputs = _inputs()
    steps = inputs["x"] + inputs["t1"] / (inputs["t2"] * inputs["t2"])  # a kernel in fp16: t2 * t2 is 0
    assert steps[0] == float("inf")
    found = _judge(oracle).compare(inputs, {"N": 2}, FP16, {}, (steps,))
    assert found.kind == "nan-mismatch" and found.details["precision"]["achieved"] == "input-dtype", found
    made_up = oracle(**{n: t.float() for n, t in inputs.items()}).half()  # correct in fp32: 20302 is finite
    made_up[1] = float("inf")
    found = _judge(oracle).compare(inputs, {"N": 2}, FP16, {}, (made_up,))
    assert found.kind == "nan-mismatch" and found.details["precision"]["achieved"] == "worse", found
    wrong_rest = steps.clone()
    wrong_rest[1] = 500.0  # the inf explained, the other element (2.33) far off: the verdict is the other's
    found = _judge(oracle).compare(inputs, {"N": 2}, FP16, {}, (wrong_rest,))
    assert found.details["precision"]["achieved"] == "worse", found


def test_an_fp16_gradient_past_its_range_is_inf_as_the_oracle_rounded_to_fp16_is():
    def oracle(x, t1, t2):
        return 300.0 * x * x + t1 + t2

    inputs = _inputs()
    inputs["x"] = torch.tensor([200.0, 1.0], dtype=torch.float16)  # dx = 600 x = 120000 past fp16's 65504
    go = torch.ones(2, dtype=torch.float16)
    dx = (600.0 * inputs["x"].double()).half()
    assert dx[0] == float("inf")
    found = _judge(oracle, backward=("x",)).compare_gradients(inputs, go.double(), {"N": 2}, FP16, {}, (dx,))
    assert found is None, found


def test_an_inf_where_the_value_is_within_the_fp16_bound_of_overflow_is_explained_and_one_far_from_it_is_worse():
    def oracle(x):
        return torch.cumprod(x, 0)

    contract = tc.Contract(inputs={"x": Tensor(("N",), dtypes=("float16",))}, dims={"N": Dim(1, 64)}, oracle=oracle)
    judge = Judge(as_subject(contract))
    x = torch.tensor([255.0, 256.0, 1.0], dtype=torch.float16)  # float64: 255, 65280, 65280, finite in fp16
    # the H200's fp16 cumprod gives inf where float64's is 65,312: a rounding of the running product overflows
    near = torch.tensor([255.0, float("inf"), float("inf")], dtype=torch.float16)
    found = judge.compare({"x": x}, {"N": 3}, {"x": "float16"}, {}, (near,))
    assert found.kind == "nan-mismatch" and found.details["precision"]["achieved"] == "input-dtype", found
    far = near.clone()
    far[0] = float("inf")  # 255, far below 65,504: no fp16 rounding of this product overflows
    found = judge.compare({"x": x}, {"N": 3}, {"x": "float16"}, {}, (far,))
    assert found.details["precision"]["achieved"] == "worse", found
    flipped = near.clone()
    flipped[1] = float("-inf")  # the overflow's sign wrong
    found = judge.compare({"x": x}, {"N": 3}, {"x": "float16"}, {}, (flipped,))
    assert found.details["precision"]["achieved"] == "worse", found


def test_a_nan_where_the_value_is_past_the_fp16_range_is_explained_and_one_at_a_finite_value_is_worse():
    def oracle(x):
        return torch.cumprod(x, 0)

    contract = tc.Contract(inputs={"x": Tensor(("N",), dtypes=("float16",))}, dims={"N": Dim(1, 64)}, oracle=oracle)
    judge = Judge(as_subject(contract))
    x = torch.tensor([300.0, 300.0, 1.0], dtype=torch.float16)  # float64: 300, 90000, 90000: past 65,504
    overflowed = torch.tensor([300.0, float("nan"), float("nan")], dtype=torch.float16)  # inf - inf inside
    found = judge.compare({"x": x}, {"N": 3}, {"x": "float16"}, {}, (overflowed,))
    assert found.kind == "nan-mismatch" and found.details["precision"]["achieved"] == "input-dtype", found
    overflowed[0] = float("nan")  # 300 is finite: a NaN there is no overflow
    found = judge.compare({"x": x}, {"N": 3}, {"x": "float16"}, {}, (overflowed,))
    assert found.details["precision"]["achieved"] == "worse", found


def test_a_nan_where_the_fp16_steps_overflow_to_inf_is_explained():
    def oracle(x, t1, t2):
        return x + t1 / (t2 * t2)

    inputs = _inputs()
    steps = inputs["x"] + inputs["t1"] / (inputs["t2"] * inputs["t2"])
    assert steps[0] == float("inf")
    other_order = steps.clone()
    other_order[0] = float("nan")  # the same overflow, met as inf - inf by a kernel that orders it otherwise
    found = _judge(oracle).compare(inputs, {"N": 2}, FP16, {}, (other_order,))
    assert found.kind == "nan-mismatch" and found.details["precision"]["achieved"] == "input-dtype", found
