"""Safety of the searched cells (issue 12 section 4): a per-example memory cap, and a second
search so that a cheap failure (a crash on an empty input) does not hide another bug."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import itertools
from dataclasses import replace

import torch

import triton_conformance as tc
from triton_conformance import Dim, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.search.allowance import example_bytes
from triton_conformance.conformance.search.policy import MEMORY_FRACTION, memory_cap
from triton_conformance.conformance.search.engine import FindingClass
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.spec import Layout, Spec

_ids = itertools.count()
VECTOR = {"x": Tensor(("N",), dtypes=("float32",))}


def register(launcher, dims, **kw):
    return tc.register(launcher, name=f"cover_safety_{next(_ids)}", inputs=kw.pop("inputs", VECTOR), dims=dims,
                       oracle=kw.pop("oracle", lambda x: x * 2), **kw)


# -- the memory cap -----------------------------------------------------------------

def test_an_example_s_bytes_follow_its_layout_span_and_the_default_cap_is_a_quarter_of_memory():
    c = tc.Contract(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 1 << 20), "N": Dim(1, 1 << 20)},
                    oracle=lambda x: x)
    plain = Spec(dims={"M": 1000, "N": 1000}, dtypes={"x": "float32"}, layouts={})
    padded = replace(plain, layouts={"x": Layout("padded", pad=1000)})
    assert 16e6 <= example_bytes(c, plain) < 64e6  # 4 MB of input, with copies, outputs and float64 oracle
    assert example_bytes(c, padded) > example_bytes(c, plain)  # the span, not the element count
    huge = replace(plain, dims={"M": 1 << 20, "N": 1 << 12})  # a beyond-range draw of 4G elements
    assert example_bytes(c, huge) > memory_cap(RunConfig().memory_cap)
    assert RunConfig().memory_cap == MEMORY_FRACTION and memory_cap(None) == float("inf")
    assert memory_cap(1 << 30) == 1 << 30


def test_draws_over_the_cap_are_discarded_unrun():
    ran = []

    def doubles(x):
        ran.append(x.numel())
        return x * 2

    subject = register(doubles, {"N": Dim(1, 4096)})
    cap = example_bytes(subject.contract, Spec(dims={"N": 600}, dtypes={"x": "float32"}, layouts={}))
    result = run_cell(subject, "shape:beyond-block", backend=Backend(), config=RunConfig(memory_cap=cap))
    assert result.outcome == "skipped" and "memory cap" in result.message, result.message
    assert not ran, "nothing over the cap was built or run"
    result = run_cell(subject, "layout:contiguous", backend=Backend(), config=RunConfig(memory_cap=cap))
    assert result.outcome == "honoured", result.message
    assert ran and max(ran) <= 600
    assert result.details.get("over_memory_discarded"), result.details


# -- the second search --------------------------------------------------------------

def crashes_when_empty_and_wrong_when_long(x):
    if x.numel() == 0:
        raise IndexError("x[0] of an empty tensor")  # the cheap bug
    out = x * 2
    if x.numel() >= 40:
        out[39] += 1.0  # the real one: wrong from 40 elements on
    return out


def test_a_crash_on_an_empty_input_does_not_hide_a_wrong_answer_at_ordinary_sizes():
    subject = register(crashes_when_empty_and_wrong_when_long, {"N": Dim(0, 4096)})
    result = run_cell(subject, "layout:contiguous", backend=Backend())
    assert (result.outcome, result.finding) == ("crash", "exception"), result.message
    assert result.counterexample["dims"] == {"N": 0}
    second = result.details["second_finding"]
    assert (second["outcome"], second["kind"]) == ("wrong", "mismatch"), second
    assert second["counterexample"]["dims"] == {"N": 40}, "shrunk, and never back to an empty size"
    assert "replay(" in second["reproducer"] and "'N': 40" in second["reproducer"]
    assert "and a second bug" in result.message and "wrong/mismatch" in result.message


def test_one_bug_everywhere_is_reported_once():
    subject = register(lambda x: x * 3, {"N": Dim(1, 4096)})
    result = run_cell(subject, "layout:contiguous", backend=Backend())
    assert (result.outcome, result.finding) == ("wrong", "mismatch")
    assert "second_finding" not in result.details and "second bug" not in result.message


def test_a_passing_cell_runs_no_second_search():
    calls = []
    subject = register(lambda x: calls.append(1) or x * 2, {"N": Dim(1, 64)})
    result = run_cell(subject, "layout:contiguous", backend=Backend())
    assert result.outcome == "honoured" and result.examples == RunConfig().examples
    assert len(calls) == 2 * result.examples  # two calls per example (the two sentinels), no more


def test_the_class_of_a_finding_and_what_a_search_for_a_second_one_leaves_out():
    f = Finding("crash", "exception", "boom")
    empty = Spec(dims={"M": 0, "N": 5}, dtypes={}, layouts={})
    first = FindingClass.of(f, empty)
    assert first.excludes(replace(empty, dims={"M": 3, "N": 0})) and not first.excludes(replace(empty, dims={"M": 3, "N": 5}))
    assert first.same_bug(f, replace(empty, dims={"M": 0, "N": 9}))
    assert not first.same_bug(f, replace(empty, dims={"M": 1, "N": 5}))  # the same crash at a real size: a second bug
    at_one = FindingClass.of(f, replace(empty, dims={"M": 1, "N": 5}))
    assert at_one.excludes(replace(empty, dims={"M": 1, "N": 9})) and not at_one.excludes(replace(empty, dims={"M": 2, "N": 5}))
    assert at_one.same_bug(f, replace(empty, dims={"M": 2, "N": 5}))  # the same crash, sized: the same bug


# -- running out of memory ------------------------------------------------------------

def _oom():
    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB")


def test_an_example_that_runs_the_device_out_of_memory_is_discarded_not_blamed_on_the_kernel():
    # Several workers share a GPU, or the cap follows a host larger than the GPU: a draw can fit the cap and
    # still not fit the device.  The launcher's (or the inputs') allocation failing is the machine's limit.
    def double_until_the_device_is_full(x):
        if x.shape[0] > 48:
            raise _oom()
        return x * 2

    subject = register(double_until_the_device_is_full, {"N": Dim(1, 256)})
    r = run_cell(subject, "layout:contiguous", backend=Backend(), config=RunConfig(max_examples=30))
    assert r.outcome == "honoured", r.message
    assert r.details["device-memory_discarded"] > 0 and "discarded for running the machine out of memory" in r.message
    # The same exception for any other reason than memory is still the kernel's crash.
    def raises_a_runtime_error(x):
        if x.shape[0] > 48:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return x * 2

    crash = run_cell(register(raises_a_runtime_error, {"N": Dim(1, 256)}), "layout:contiguous", backend=Backend(),
                     config=RunConfig(max_examples=30))
    assert (crash.outcome, crash.finding) == ("crash", "exception")


def test_an_oracle_out_of_memory_is_a_discard_not_an_oracle_error():
    def oracle(x):
        if x.shape[0] > 48:
            raise _oom()
        return x * 2

    subject = register(lambda x: x * 2, {"N": Dim(1, 256)}, oracle=oracle)
    r = run_cell(subject, "layout:contiguous", backend=Backend(), config=RunConfig(max_examples=30))
    assert r.outcome == "honoured" and r.details["device-memory_discarded"] > 0, r.message


def test_a_gradient_example_out_of_memory_is_a_discard():
    class DoubleOutOfMemoryInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            if g.shape[0] > 48:
                raise _oom()
            return g * 2

    subject = register(DoubleOutOfMemoryInBackward, {"N": Dim(1, 256)}, backward=True)
    r = run_cell(subject, "grad:layout:contiguous", backend=Backend(), config=RunConfig(max_examples=30))
    assert r.outcome == "honoured", r.message
    assert "discarded for running the machine out of memory" in r.message and r.details["device-memory_discarded"] > 0


def test_inputs_that_do_not_fit_the_device_are_a_discard(monkeypatch):
    from triton_conformance.conformance.battery import forward as checks

    build = checks.build_inputs

    def build_until_the_device_is_full(contract, spec, **kw):
        if spec.dims["N"] > 48:
            raise _oom()
        return build(contract, spec, **kw)

    monkeypatch.setattr(checks, "build_inputs", build_until_the_device_is_full)
    r = run_cell(register(lambda x: x * 2, {"N": Dim(1, 256)}), "layout:contiguous", backend=Backend(),
                 config=RunConfig(max_examples=30))
    assert r.outcome == "honoured" and r.details["device-memory_discarded"] > 0, r.message
