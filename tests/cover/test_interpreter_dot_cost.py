"""The interpreter's meter charges a ``tl.dot`` for its multiply-adds (M x N x K), not its result's M x N.

A dot's ``np.matmul`` grows with K, which its result's elements do not show;
a K loop of dots in one program is what ran ``gems_mm[shape:beyond-range]``'s
pool out.  So the meter charges one unit per ``2**DOT_SHIFT`` multiply-adds
before the dot runs, and the cut stops such a loop once the pool is spent.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

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
from triton_conformance.conformance.search.interpreter_cost import (CUT_FINDING, DOT_SHIFT, HANDLE_COST, ProgramCut,
                                                                    metering_cost)
from triton_conformance.model.config import PROFILES, RunConfig


@triton.jit
def _dot_loop_kernel(a_ptr, b_ptr, c_ptr, ITERS, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(ITERS):  # one program: ITERS dots of the same blocks
        acc += tl.dot(a, b, allow_tf32=False)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def _units(bm: int, bn: int, bk: int, iters: int) -> tuple[int, torch.Tensor]:
    a, b, c = torch.rand(bm, bk), torch.rand(bk, bn), torch.empty(bm, bn)
    with metering_cost(pool=1 << 40, share=1 << 36, examples=1) as meter:
        meter.start_example()
        _dot_loop_kernel[(1,)](a, b, c, iters, BM=bm, BN=bn, BK=bk)
        spent = meter.spent
    torch.testing.assert_close(c, iters * (a @ b), rtol=1e-4, atol=1e-3)  # the metered dot still computes
    return spent, c


def test_each_dot_is_charged_its_multiply_adds_before_it_runs(monkeypatch):
    iters, (bm, bn, bk) = 12, (32, 32, 256)
    with_dots, _ = _units(bm, bn, bk, iters)
    monkeypatch.setattr(interpreter_cost, "DOT_SHIFT", 62)  # the same launch, its dots charged nothing more
    without, _ = _units(bm, bn, bk, iters)
    assert with_dots - without == iters * ((bm * bn * bk) >> DOT_SHIFT), (with_dots, without)


def test_a_small_dot_costs_what_it_did():
    # 16 x 16 x 16 = 4,096 multiply-adds, under one unit's 2**DOT_SHIFT: the small kernels the suite
    # already judged spend what they did before the dot was charged
    assert (16 * 16 * 16) >> DOT_SHIFT == 0
    small, _ = _units(16, 16, 16, 5)
    assert small < 5 * 4 * HANDLE_COST + 4_000, small


def _cut_after(pool: int) -> int:
    """The operations one program of 64 x 64 x 256 dots ran before ``pool`` units ran out inside it."""
    bm, bn, bk = 64, 64, 256  # 1M multiply-adds a dot: 64 units of it, besides its handles' 16 + 4 each
    a, b, c = torch.rand(bm, bk), torch.rand(bk, bn), torch.empty(bm, bn)
    with metering_cost(pool=pool, share=2_000, examples=10) as meter:
        meter.start_example()
        with pytest.raises(ProgramCut) as cut:
            _dot_loop_kernel[(1,)](a, b, c, 100_000, BM=bm, BN=bn, BK=bk)
        assert meter.spent <= pool + (bm * bn * bk >> interpreter_cost.DOT_SHIFT) + 64, meter.spent
    assert "of _dot_loop_kernel (a grid of 1 programs)" in str(cut.value)
    return int(str(cut.value).split("cut after ")[1].split(" operations")[0].replace(",", ""))


def test_a_long_dot_loop_in_one_program_is_cut_within_the_pool_after_fewer_dots(monkeypatch):
    counted = _cut_after(60_000)
    monkeypatch.setattr(interpreter_cost, "DOT_SHIFT", 62)
    uncounted = _cut_after(60_000)  # a meter blind to K would let the loop run about twice as many dots
    assert counted * 3 < uncounted * 2, (counted, uncounted)


def _matmul_loop(a, b):
    c = torch.empty(a.shape[0], b.shape[1])
    _dot_loop_kernel[(1,)](a.contiguous(), b.contiguous(), c, 20_000, BM=a.shape[0], BN=b.shape[1], BK=a.shape[1])
    return c / 20_000


TIGHT = replace(PROFILES["ci"], interpreter_cost=400_000, interpreter_example_cost=8_000)


def test_a_cell_whose_every_draw_loops_past_the_pool_is_a_timeout_that_says_where():
    subject = tc.register(_matmul_loop, name="cover_interpreter_dot_loop", family="cover_interpreter_dot_cost",
                          inputs={"a": Tensor(("M", "K"), dtypes=("float32",)),
                                  "b": Tensor(("K", "N"), dtypes=("float32",))},
                          dims={"M": Dim(64, 64), "N": Dim(64, 64), "K": Dim(256, 256)}, reduces="K",
                          oracle=lambda a, b: a @ b)
    result = run_cell(subject, "layout:contiguous", backend=Backend(),
                      config=RunConfig(profile=TIGHT, isolation="none"))
    assert result.outcome == "timeout" and result.finding == CUT_FINDING, (result.outcome, result.message)
    assert "of _dot_loop_kernel" in result.message, result.message
    assert result.details["interpreter_cost"]["spent"] <= TIGHT.interpreter_cost + 1_000, result.details
