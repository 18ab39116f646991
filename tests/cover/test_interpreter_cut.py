"""The cut (issue 31 item 4): a program that runs the cell's interpreter pool out is stopped halfway.

A launch's first program is let run past its call's allowance, but never past
the cell's pool: there it is cut, the example discarded as ``cut`` with the
kernel, the program and the operations named, and a cell that judged no
example because of a cut is a ``timeout``, never a silent skip.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import time
from dataclasses import replace

import pytest
import torch
import triton
import triton.language as tl

import triton_conformance as tc
from triton_conformance import Dim, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.search import interpreter_cost
from triton_conformance.conformance.search.interpreter_cost import CUT_FINDING, ProgramCut, metering_cost
from triton_conformance.model.config import PROFILES, RunConfig
from triton_conformance.reports.terminal import slowest_lines


@triton.jit
def _spin_kernel(flag_ptr, x_ptr, out_ptr, n, SPINS, BLOCK: tl.constexpr):
    i = 0
    while (tl.load(flag_ptr) == 0) & (i < SPINS):  # nobody sets the flag: a hang, bounded only so that a
        i += 1  # meter without the cut fails this test in seconds instead of hanging it
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _looping_kernel(x_ptr, out_ptr, n, ITERS, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    acc = x
    for _ in range(ITERS):  # one program, ITERS iterations: long for wide rows
        acc = tl.maximum(acc, x)
    tl.store(out_ptr + offs, acc, mask=offs < n)


SPINS = 40_000  # about 200k operations (3.2M units): seconds an example, twenty times the pool below


def _spin(x):
    out, flag = torch.empty_like(x), torch.zeros(1, dtype=torch.int32)
    _spin_kernel[(1,)](flag, x, out, x.numel(), SPINS, BLOCK=triton.next_power_of_2(max(1, x.numel())))
    return out


def _looping(x):
    out = torch.empty_like(x)
    if x.numel():  # 50 iterations an element: 64 elements loop 3,200 times in the one program
        _looping_kernel[(1,)](x, out, x.numel(), 50 * x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


CONTRACT = dict(inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 64)},
                oracle=lambda x: x, family="cover_interpreter_cut")
# A pool of 150k units (~9k interpreted operations): the spin loop passes it in well under a second, a
# draw of N elements costs about 50 * N * 3 operations (one program), so draws past ~20 elements are cut.
TIGHT = replace(PROFILES["ci"], interpreter_cost=150_000, interpreter_example_cost=4_000)


def _run(subject, cell, profile=TIGHT):
    return run_cell(subject, cell, backend=Backend(), config=RunConfig(profile=profile, isolation="none"))


def test_a_program_that_never_ends_is_cut_within_the_pool_and_the_cell_is_a_timeout():
    subject = tc.register(_spin, name="cover_interpreter_cut_spin", **CONTRACT)
    started = time.perf_counter()
    result = _run(subject, "layout:contiguous")
    seconds = time.perf_counter() - started
    assert result.outcome == "timeout" and result.finding == CUT_FINDING, (result.outcome, result.message)
    assert "no example judged: cut after" in result.message and "in program (0, 0, 0) of _spin_kernel" in result.message
    cost = result.details["interpreter_cost"]
    assert cost["cut"] == 1 and cost["first_cut"] in result.message, cost
    assert cost["spent"] <= TIGHT.interpreter_cost + 1_000, cost  # never past the pool (by one operation's work)
    assert seconds < 60, seconds


def test_a_long_program_is_cut_and_the_cell_says_so_while_shorter_draws_are_judged():
    subject = tc.register(_looping, name="cover_interpreter_cut_loop", **CONTRACT)
    result = _run(subject, "layout:contiguous")
    assert result.outcome == "honoured" and result.examples >= 1, result.message
    cut = result.details["cut_discarded"]
    assert cut >= 1 and f"{cut} discarded cut halfway through one program" in result.message, result.message
    assert "(the first cut after" in result.message and "of _looping_kernel" in result.message, result.message
    assert result.details["interpreter_cost"]["cut"] == cut
    assert result.details["interpreter_cost"]["spent"] <= TIGHT.interpreter_cost + 1_000
    over = result.details["over-cost_discarded"]
    assert slowest_lines([result])[2].endswith(f"{over} over the interpreter's cost allowance (discarded), "
                                               f"{cut} cut halfway through a program (discarded)"), slowest_lines([result])


def test_the_cut_names_the_program_and_its_operations():
    x, out, flag = torch.ones(4), torch.empty(4), torch.zeros(1, dtype=torch.int32)
    with metering_cost(pool=50_000, share=2_000, examples=10) as meter:
        meter.start_example()
        with pytest.raises(ProgramCut) as cut:
            _spin_kernel[(3,)](flag, x, out, 4, SPINS, BLOCK=4)
        assert cut.value.reason == "cut" and meter.done == 1 and meter.spent <= 50_000 + 100
        assert "in program (0, 0, 0) of _spin_kernel (a grid of 3 programs)" in str(cut.value)
        ops = int(str(cut.value).split("cut after ")[1].split(" operations")[0].replace(",", ""))
        assert 50_000 // 32 < ops < 50_000 // 16, ops  # each operation 16 units, besides the loop's calls
        assert meter.first_cut in str(cut.value) and meter.cuts == 1


def test_a_pool_nearly_spent_before_the_program_is_an_over_cost_stop_not_a_cut():
    x, out = torch.ones(64), torch.empty(64)
    with metering_cost(pool=50_000, share=20_000, examples=10) as meter:
        meter.start_example()
        meter.spent = 49_000  # 1k left: less than a share, so the program is not to blame
        with pytest.raises(interpreter_cost.OverCost) as stopped:
            _looping_kernel[(1,)](x, out, 64, 3200, BLOCK=64)
        assert not isinstance(stopped.value, ProgramCut) and stopped.value.reason == "over-cost"
        assert meter.cuts == 0


@pytest.mark.parametrize("cell", ["layout:contiguous", "shape:non-pow2", "dtype:float32"])
def test_a_normal_kernel_s_cells_are_the_same_with_the_cut_as_without(cell, monkeypatch):
    from kernels_under_test.layer_norm import layer_norm

    with_cut = _run(layer_norm, cell, profile=PROFILES["ci"])
    monkeypatch.setattr(interpreter_cost.CostMeter, "cut", lambda self: None)  # the meter before the cut
    without = _run(layer_norm, cell, profile=PROFILES["ci"])
    strip = lambda r: (r.outcome, r.finding, r.examples, r.message, r.details)  # noqa: E731
    assert strip(with_cut) == strip(without)
    assert with_cut.passed and with_cut.examples > 1


def test_a_call_after_a_long_first_program_may_not_pass_the_pool_either():
    meter = interpreter_cost.CostMeter(pool=10_000, share=100, examples=1)
    meter.start_example(calls=2)
    meter.start_call()
    meter.launch(1, "k")
    meter.program((0, 0, 0))
    meter.charge(7_000)  # the first call's one program runs past its part (4,950), within the pool
    meter.start_call()
    assert meter.limit == 10_000, meter.limit  # not 7,384 + 4,950: what the pool holds is the bound
    meter.launch(2, "k")
    meter.program((0, 0, 0))
    meter.charge(1_500)
    with pytest.raises(interpreter_cost.OverCost):
        meter.program((1, 0, 0))  # projected to 10,896: past the pool, within the uncapped 12,334
