"""The interpreter's cost allowance (issue 15 section 2): grid-aware draws on the interpreter.

A row kernel runs one interpreted program per row, so a draw of many short
rows costs programs x work per program.  Each cell has a pool of counted work
and each example a share of it; a draw whose projected work passes what it
may spend is discarded (``over-cost``), counted, and never depends on time.
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
from triton_conformance.conformance.search import interpreter_cost
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.search.interpreter_cost import CostMeter, OverCost, metering_cost
from triton_conformance.conformance.observe import Observer
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import PROFILES, RunConfig
from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.terminal import slowest_lines


@triton.jit
def _row_scale_kernel(x_ptr, out_ptr, stride_xm, stride_xn, n, BAD_FROM, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask)
    factor = 2.0 + (row >= BAD_FROM).to(tl.float32)  # rows from BAD_FROM on are scaled by 3: a bug
    tl.store(out_ptr + row * n + cols, x * factor, mask=mask)


def _launcher(bad_from: int):
    def row_scale(x):
        if x.dtype != torch.float32 or x.dim() != 2:
            raise TypeError(f"row_scale: expected a 2-d float32 tensor, got {x.dtype} {tuple(x.shape)}")
        m, n = x.shape
        out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        if out.numel():
            _row_scale_kernel[(m,)](x, out, x.stride(0), x.stride(1), n, bad_from, BLOCK=triton.next_power_of_2(n))
        return out

    return row_scale


ROWS = Dim(1, 8192)  # shape:beyond-block pins M past 4096 in about half its draws: a long batch of short rows
WIDE = 4096


def _subject(name: str, bad_from: int = 1 << 30):
    return tc.register(_launcher(bad_from), name=name, family="cover_interpreter_cost",
                       inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
                       dims={"M": ROWS, "N": Dim(1, 64)}, reduces="N", oracle=lambda x: x * 2)


# About 900 units a row, so a call on 4097 rows (M pinned, with 2048 elements a draw) costs about 3.7M
# and an example (two calls: the contract is deterministic) 7.4M: over an example's share (200k), and
# the pool beyond the reserve of ten shares (8M) pays for one such draw a cell, not for every one (what
# is left beyond the shares of the examples still to run is less than another).
SMALL = replace(PROFILES["ci"], max_elements=2048, interpreter_cost=10_000_000, interpreter_example_cost=200_000)


class Record(Observer):
    """Every example the search ran or discarded: its dims, its verdict, and the meter's state."""

    def __init__(self):
        self.examples, self.metered = [], []

    def example_finished(self, subject, cell, spec, verdict, seconds):
        self.examples.append((dict(spec.dims), verdict if isinstance(verdict, str) else verdict.outcome))
        meter = interpreter_cost.active_meter()
        self.metered.append(meter is not None and meter.spent > 0)


def _run(subject, cell, profile=SMALL):
    record = Record()
    result = run_cell(subject, cell, backend=Backend(), config=RunConfig(profile=profile, isolation="none"),
                      observer=record)
    return result, record


@pytest.fixture(scope="module")
def wide_cell():
    subject = _subject("cover_interpreter_cost_rows")
    return subject, _run(subject, "shape:beyond-block")


def test_wide_grid_draws_over_the_allowance_are_discarded_and_counted(wide_cell):
    _, (result, record) = wide_cell
    assert result.outcome == "honoured", result.message
    over = result.details.get("over-cost_discarded", 0)
    assert over >= 1 and f"{over} discarded over the interpreter's cost allowance" in result.message, result.message
    assert result.details["interpreter_cost"]["stopped"] >= over
    # The cell never spends past its pool (by more than one program's work).
    assert result.details["interpreter_cost"]["spent"] <= SMALL.interpreter_cost + 10_000
    discarded = [dims for dims, verdict in record.examples if verdict == "over-cost"]
    assert discarded and all(dims["M"] > WIDE for dims in discarded), discarded


def test_a_wide_outer_dim_is_still_drawn_and_run_in_the_cell(wide_cell):
    _, (result, record) = wide_cell
    ran_wide = [dims for dims, verdict in record.examples if verdict == "honoured" and dims["M"] > WIDE]
    assert ran_wide, record.examples  # from the pool, beyond the example's share
    assert result.details["interpreter_cost"]["widest_launch"] > WIDE


# The wide cell's kinds of decision at a fraction of its cost (the machine-speed test runs its cell twice): an
# example's share (5k) pays for a few rows; the pool beyond the ten shares' reserve (50k) pays for larger draws
# early in the cell, and once it is spent they are discarded over the allowance.
SPEED_ROWS = Dim(1, 512)
SPEED = replace(PROFILES["ci"], interpreter_cost=100_000, interpreter_example_cost=5_000)


def test_the_decisions_do_not_depend_on_the_machine_s_speed(monkeypatch):
    subject = tc.register(_launcher(1 << 30), name="cover_interpreter_cost_speed", family="cover_interpreter_cost",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
                          dims={"M": SPEED_ROWS, "N": Dim(1, 16)}, reduces="N", oracle=lambda x: x * 2)
    result, record = _run(subject, "layout:contiguous", profile=SPEED)
    from triton.runtime import interpreter

    builder, load = interpreter.interpreter_builder, interpreter.interpreter_builder.create_masked_load
    clock = {"slept": 0}

    def slow_load(*args, **kwargs):  # a machine that is slower at every load, as a loaded one is (twice here)
        import time

        time.sleep(1e-2)
        clock["slept"] += 1
        return load(*args, **kwargs)

    monkeypatch.setattr(builder, "create_masked_load", slow_load)
    again, record_again = _run(subject, "layout:contiguous", profile=SPEED)
    # decisions to compare: draws discarded over the allowance, and one past an example's share that the
    # pool paid for (as the wide cell's draw past 4096 rows)
    assert any(verdict == "over-cost" for _, verdict in record.examples), record.examples
    assert result.details["interpreter_cost"]["largest_example"] > SPEED.interpreter_example_cost, result.details
    assert record_again.examples == record.examples
    assert (again.outcome, again.examples, again.details) == (result.outcome, result.examples, result.details)
    assert clock["slept"] > 50, "the second run was slowed down"


def test_a_cheap_kernel_loses_no_example_under_the_ci_allowance():
    subject = _subject("cover_interpreter_cost_cheap")
    result, record = _run(subject, "layout:contiguous", profile=PROFILES["ci"])
    assert result.outcome == "honoured" and result.examples == PROFILES["ci"].max_examples, result.message
    assert "over-cost" not in result.message and "interpreter_cost" not in result.details
    assert all(verdict != "over-cost" for _, verdict in record.examples)
    assert record.metered and all(record.metered), "every example ran under the meter"


def test_a_bug_that_needs_a_wide_but_affordable_outer_dim_is_still_found():
    subject = _subject("cover_interpreter_cost_bug", bad_from=WIDE)
    result, record = _run(subject, "shape:beyond-block")
    assert result.outcome == "wrong", result.message
    assert result.counterexample["dims"]["M"] > WIDE
    assert any(verdict == "wrong" and dims["M"] > WIDE for dims, verdict in record.examples)
    assert all(record.metered)


def test_the_allowance_holds_a_reserve_for_the_examples_to_come():
    meter = CostMeter(pool=1000, share=10, examples=10)
    assert meter.allowance == 900  # the first example may take all but the ten shares of the search
    meter.spent = 850
    meter.start_example()
    assert (meter.ran, meter.allowance) == (1, 60)  # 150 left, 9 shares still reserved
    meter.spent = 915
    meter.start_example()
    assert (meter.ran, meter.allowance) == (2, 10)  # 85 left, 80 reserved: its share
    meter.spent = 995
    meter.start_example()
    assert meter.allowance == 5  # never more than the pool holds
    meter.spent = 1000
    meter.start_example()
    assert meter.allowance == 0


def test_a_stopped_example_keeps_its_share_in_reserve():
    meter = CostMeter(pool=1000, share=10, examples=10)
    meter.spent = 5
    with pytest.raises(OverCost):
        meter.stop(2000)
    meter.start_example()
    assert (meter.ran, meter.allowance, meter.over) == (0, 895, 1)


def test_a_launch_is_stopped_after_its_first_program_when_its_projection_is_over():
    x, out = torch.ones(4096, 1), torch.empty(4096, 1)
    with metering_cost(pool=10_000_000, share=50_000, examples=10) as meter:
        meter.start_example()
        meter.allowance = meter.limit = 50_000  # below 4096 programs of ~900 units
        with pytest.raises(OverCost) as stopped:
            _row_scale_kernel[(4096,)](x, out, 1, 1, 1, 1 << 30, BLOCK=1)
        assert meter.done == 1, "it ran the first program only"
        assert stopped.value.reason == "over-cost" and "4,096 programs" in str(stopped.value)
        meter.start_example()
        _row_scale_kernel[(16,)](x, out, 1, 1, 1, 1 << 30, BLOCK=1)  # a new example: its own allowance
        assert meter.over == 1 and meter.summary()["widest_launch"] == 16


def test_a_triton_without_the_hook_points_is_not_metered(monkeypatch):
    from triton.runtime import interpreter

    monkeypatch.delattr(interpreter, "InterpreterBuilder")
    with metering_cost(pool=1000, share=10, examples=10) as meter:
        assert meter is None


def test_the_summary_names_the_slowest_cells():
    cells = [CellResult(subject=f"s{i}", family="f", cell="layout:contiguous", outcome="honoured", message="",
                        examples=i, duration_s=float(i)) for i in range(8)]
    cells[3] = replace(cells[3], duration_s=30.0, details={"over-cost_discarded": 4})
    lines = slowest_lines(cells)
    assert lines[1] == "slowest cells (5 of 7, 55.0 s in all):"  # s0 took no time: never started
    assert [line.split()[0] for line in lines[2:]] == ["s3[layout:contiguous]", "s7[layout:contiguous]",
                                                     "s6[layout:contiguous]", "s5[layout:contiguous]",
                                                     "s4[layout:contiguous]"]
    assert "30.0 s" in lines[2] and "3 examples" in lines[2] and "4 over the interpreter's cost" in lines[2]
    assert slowest_lines([cells[0]]) == []


class _RowScale(torch.autograd.Function):
    """y = 2x, forward and backward each one interpreted program per row."""

    @staticmethod
    def forward(ctx, x):
        return _launcher(1 << 30)(x)

    @staticmethod
    def backward(ctx, g):
        return _launcher(1 << 30)(g.contiguous())


def test_the_gradient_search_discards_an_over_cost_example_cleanly():
    subject = tc.register(_RowScale, name="cover_interpreter_cost_grad", family="cover_interpreter_cost",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
                          dims={"M": Dim(1, 64), "N": Dim(1, 16)}, oracle=lambda x: x * 2, backward=("x",))
    # ~1800 units a row (forward and backward): a share pays ~11 rows, and the pool little more at first.
    tight = replace(PROFILES["ci"], interpreter_cost=220_000, interpreter_example_cost=20_000)
    result, record = _run(subject, "grad:layout:contiguous", profile=tight)
    assert result.outcome == "honoured" and result.examples >= 1, result.message
    assert result.details["interpreter_cost"]["stopped"] >= 1
    assert any(verdict == "over-cost" for _, verdict in record.examples) and all(record.metered)


def test_a_backward_example_stops_its_forward_at_its_part_of_the_share_not_after_spending_it_all():
    # The forward and the backward pass are each a call of the example: a forward of 300 programs over half
    # the share is stopped at its first program, not run to its end to leave the backward nothing.
    from triton_conformance.conformance.battery.backward import run_gradient_example
    from triton_conformance.conformance.search.allowance import Allowance
    from triton_conformance.model.spec import Spec

    subject = tc.register(_RowScale, name="cover_interpreter_cost_grad_split", family="cover_interpreter_cost",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
                          dims={"M": Dim(1, 512), "N": Dim(1, 16)}, oracle=lambda x: x * 2, backward=("x",))
    spec = Spec(dims={"M": 300, "N": 1}, dtypes={"x": "float32"}, layouts={}, seed=1)
    with metering_cost(pool=400_000, share=400_000, examples=1) as meter:  # ~900 units a row and pass
        with pytest.raises(OverCost) as stopped:
            run_gradient_example(subject, spec, Backend(), allowance=Allowance(meter=meter))
        assert meter.spent < 10_000 and "one of 2 calls" in str(stopped.value), (meter.spent, str(stopped.value))
    small = replace(spec, dims={"M": 40, "N": 1})
    with metering_cost(pool=400_000, share=400_000, examples=1) as meter:
        assert run_gradient_example(subject, small, Backend(), allowance=Allowance(meter=meter)) == "honoured"


@triton.autotune(configs=[triton.Config({"UNROLL": 1}), triton.Config({"UNROLL": 2})], key=["n"])
@triton.jit
def _row_scale_tuned(x_ptr, out_ptr, stride_xm, stride_xn, n, UNROLL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    tl.store(out_ptr + row * n + cols, tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask) * 2.0,
             mask=mask)


def _row_scale_autotuned(x):
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if out.numel():
        _row_scale_tuned[(m,)](x, out, x.stride(0), x.stride(1), n, BLOCK=triton.next_power_of_2(n))
    return out


@pytest.mark.parametrize("cell", ["autotune:config0", "autotune:benchmark"])
def test_the_autotune_cells_discard_an_over_cost_example_cleanly(cell):
    subject = tc.register(_row_scale_autotuned, name="cover_interpreter_cost_tuned", family="cover_interpreter_cost",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
                          dims={"M": Dim(1, 64), "N": Dim(1, 16)}, oracle=lambda x: x * 2)
    tight = replace(PROFILES["ci"], interpreter_cost=110_000, interpreter_example_cost=10_000)
    result, record = _run(subject, cell, profile=tight)
    assert result.outcome == "honoured" and result.examples >= 1, result.message
    assert result.details["over-cost_discarded"] >= 1 and result.details["interpreter_cost"]["stopped"] >= 1
    assert all(record.metered)
