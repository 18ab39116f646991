"""The large-index cell (conformance/large_index.py) and its interpreter emulation (conformance/tail_grid.py).

The kernels here run under the interpreter on tensors of more than 2^31
elements that are never materialised: only the last programs of the grid run.
"""

import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import itertools

import pytest
import torch
import triton
import triton.language as tl

import triton_conformance as tc
from triton_conformance import Dim, InvalidArgument, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.kinds import catalogue, judge_for, kind_of
from tests._subjects import as_subject
from triton_conformance.conformance.kinds.large_index.example import (
    EXTRA,
    LARGE,
    TAIL_ELEMENTS,
    large_index_plan,
    run_large_index_example,
)
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.kinds.large_index.tail_grid import tail_programs

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="interpreter emulation")
_ids = itertools.count()


def contract(inputs, dims, **kw):
    return tc.Contract(inputs=inputs, dims=dims, oracle=lambda **t: next(iter(t.values())), **kw)


# -- which subjects the cell applies to ------------------------------------------

VECTOR = {"x": Tensor(("N",), dtypes=("float32", "float16")), "y": Tensor(("N",), dtypes=("float16",))}


def test_plan_for_a_vector_just_past_two_to_the_31():
    plan = large_index_plan(contract(VECTOR, {"N": Dim(0, 1 << 32)}))
    assert plan.dims == {"N": LARGE + EXTRA} and plan.dtype == "float16"  # the narrowest common dtype
    assert plan.fill_rows == TAIL_ELEMENTS and plan.row_dim == "N"


def test_plan_for_rows_puts_the_elements_in_the_leading_dim():
    rows = {"x": Tensor(("M", "N"), dtypes=("float32",))}
    plan = large_index_plan(contract(rows, {"M": Dim(1, 1 << 28), "N": Dim(1, 4096)}, reduces="N"))
    assert plan.dims["N"] == 33 and plan.dims["M"] * 33 >= LARGE + EXTRA > (plan.dims["M"] - 1) * 33
    assert plan.fill_rows == -(-TAIL_ELEMENTS // 33)


def test_a_row_dim_bounded_at_2_24_widens_the_inner_dim_within_its_range():
    # FINDINGS S3: liger's and fla's row kernels declare rows up to 2^24 and N up to 65536; rows of 33
    # would need 65 M rows, so the cell skipped them.  N widens to the smallest size that fits (129).
    rows = {"x": Tensor(("M", "N"), dtypes=("float16",)), "w": Tensor(("N",), dtypes=("float16",))}
    plan = large_index_plan(contract(rows, {"M": Dim(1, 1 << 24), "N": Dim(1, 65536)}, reduces="N"))
    assert not isinstance(plan, str), plan
    assert plan.dims["N"] == 129 and plan.params == ("w",)
    assert plan.dims["M"] <= 1 << 24 and plan.dims["M"] * 129 >= LARGE + EXTRA > (plan.dims["M"] - 1) * 129
    assert plan.fill_rows == -(-TAIL_ELEMENTS // 129)
    # Several inner dims: the widest declared range widens first, the others stay at 33.
    heads = {"x": Tensor(("B", "T", "H"))}
    plan = large_index_plan(contract(heads, {"B": Dim(1, 1 << 16), "T": Dim(1, 1 << 20), "H": Dim(1, 64)}))
    assert plan.dims["H"] == 33 and plan.dims["B"] <= 1 << 16 <= plan.dims["B"] * 2
    assert plan.dims["B"] * plan.dims["T"] * 33 >= LARGE + EXTRA
    # A matmul's a (M, K) with M up to 2^20: K widens, b (K, N) is a parameter built whole.
    mm = {"a": Tensor(("M", "K")), "b": Tensor(("K", "N"))}
    plan = large_index_plan(contract(mm, {d: Dim(1, 1 << 20) for d in "MKN"}))
    assert plan.dims["K"] == 2049 and plan.dims["N"] == 33 and plan.params == ("b",)


def test_rows_spread_over_two_outer_dims_grow_the_second_once_the_first_is_at_its_maximum():
    # issue 29: x (B, T, D) with B up to 64 was skipped ("B=32784 rows would be needed"); T can grow too.
    x = {"x": Tensor(("B", "T", "D"), dtypes=("float16",)), "w": Tensor(("D",), dtypes=("float16",))}
    plan = large_index_plan(contract(x, {"B": Dim(1, 64), "T": Dim(1, 1 << 20), "D": Dim(1, 4096)}, reduces="D"))
    assert not isinstance(plan, str), plan
    assert plan.outer == ("B", "T") and plan.params == ("w",)
    assert plan.dims["B"] == 64 and plan.dims["D"] == 33 and plan.rows == 64 * plan.dims["T"]
    assert plan.rows * 33 >= LARGE + EXTRA and (plan.rows - 1) * 33 >= LARGE
    assert plan.fill_rows <= plan.dims["T"], "the compared rows lie in the last b"
    # The reduced dim ends the outer dims: a sum over T keeps T in the row.
    reduced = large_index_plan(contract({"x": Tensor(("B", "T", "D"))},
                                        {"B": Dim(1, 1 << 26), "T": Dim(1, 64), "D": Dim(1, 64)}, reduces="T"))
    assert reduced.outer == ("B",) and reduced.dims["T"] == 33
    # Both outer dims bounded: skipped, naming each range.
    small = large_index_plan(contract(x, {"B": Dim(1, 64), "T": Dim(1, 64), "D": Dim(1, 1 << 20)}, reduces="D"))
    assert isinstance(small, str) and small.code == "large-index:rows-out-of-range"
    assert "B*T=" in small and "outside B in [1, 64] x T in [1, 64]" in small


def test_the_last_row_starts_past_two_to_the_31_not_only_the_last_element():
    # issue 28 item 6: 65535 rows of 32769 hold 2^31 + 32767 elements, but the last starts at 2^31 - 2.
    wide = {"x": Tensor(("M", "V"), dtypes=("float16",))}
    plan = large_index_plan(contract(wide, {"M": Dim(1, 65535), "V": Dim(1, 1 << 17)}, reduces="V"))
    offsets = plan.offsets(contract(wide, {"M": Dim(1, 65535), "V": Dim(1, 1 << 17)}, reduces="V"))
    assert offsets["last_row_start"] >= LARGE + 1024 and offsets["last_element"] >= LARGE + EXTRA
    assert plan.dims == {"M": 65534, "V": 32770}
    # Unbounded rows of 33: the element count already puts the last row start past 2^31.
    assert large_index_plan(contract(wide, {"M": Dim(1, 1 << 30), "V": Dim(1, 64)})).dims["M"] == 65075387


@pytest.mark.parametrize("inputs, dims, kw, reason", [
    (VECTOR, {"N": Dim(0, 1 << 20)}, {}, "at most 1048576 elements per input (< 2^31)"),
    ({"x": Tensor(("M", "N")), "y": Tensor(("N", "M"))}, {"M": Dim(1, 1 << 32), "N": Dim(1, 8)}, {},
     "not row-separable"),
    ({"x": Tensor(("M", "N"), rows=False)}, {"M": Dim(1, 1 << 32), "N": Dim(1, 8)}, {}, "not row-separable"),
    ({"a": Tensor(("M", "K")), "b": Tensor(("K", "N"))}, {"M": Dim(1, 1 << 10), "K": Dim(1, 1 << 20),
                                                          "N": Dim(1, 1 << 20)}, {},
     ("M=32770 rows would be needed for 2^31 elements and a row start past 2^31, outside [1, 1024] (inner dims "
      "widened within their ranges to K=65536: rows of 65536 elements")),
    ({"x": Tensor(("M", "N"))}, {"M": Dim(1, 1000), "N": Dim(1, 1 << 30)}, {}, "M=32770 rows would be needed"),
    ({"x": Tensor(("M", "N"))}, {"M": Dim(1, 1 << 24), "N": Dim(1, 128)}, {},  # 2^31 at most, 4099 short
     ("M=16777249 rows would be needed for 2^31 elements and a row start past 2^31, outside [1, 16777216] "
      "(inner dims widened within their ranges to N=128: rows of 128 elements")),
])
def test_the_cell_is_skipped_with_the_reason(inputs, dims, kw, reason):
    c = contract(inputs, dims, **kw)
    assert reason in large_index_plan(c)
    kind, value = kind_of("shape:large-index")
    assert reason in kind.skip_reason(as_subject(c), value, Backend())


def test_the_cell_sorts_last_among_shapes():
    shape = next(d for d in catalogue().dimensions if d.name == "shape")
    assert shape.classes[-1].value == "large-index"
    cells = ["shape:large-index", "values:nan", "shape:beyond-range", "layout:contiguous", "shape:tiny"]
    assert catalogue().sorted(cells) == ["layout:contiguous", "shape:tiny", "shape:beyond-range",
                                                "shape:large-index", "values:nan"]


def test_running_it_on_a_subject_it_does_not_apply_to_is_an_error():
    subject = tc.register(lambda x, y: x + y, name=f"cover_li_small_{next(_ids)}", inputs=VECTOR,
                          dims={"N": Dim(0, 100)}, oracle=lambda x, y: x + y)
    with pytest.raises(InvalidArgument, match="subject='cover_li_small_.*expected one the cell applies to"):
        run_large_index_example(subject, Backend(), judge_for(subject, Backend()))
    assert run_cell(subject, "shape:large-index", backend=Backend()).outcome == "skipped"


# -- the emulation: last programs only, real program ids, addresses checked ----------


@triton.jit
def record_ids(out_ptr, stride_r, stride_c):
    r = tl.program_id(axis=0)
    c = tl.program_id(axis=1)
    tl.store(out_ptr + r * stride_r + c * stride_c, (r * 100 + c + tl.num_programs(axis=0) * 10000).to(tl.float32))


def test_programs_run_back_from_the_grids_end_until_they_reach_every_element_past_the_mark():
    out = torch.full((10, 4), -1.0)
    with tail_programs(cover_from=31) as state:  # elements 31..39 watched: (7, 3), rows 8 and 9
        record_ids[(10, 4)](out, out.stride(0), 1)
    ran = (out != -1).reshape(-1)
    assert ran[31:].all() and int(ran.sum()) == 9, "the grid's last 9 programs, the largest axis slowest"
    assert out[9, 3].item() == 9 * 100 + 3 + 10 * 10000, "they see the real program ids and grid"
    (window,) = state.windows
    assert (window.grid, window.ran, window.programs, window.stopped) == ((10, 4, 1), 9, 40, "covered")
    assert not window.complete and window.program_id(0) == (9, 3, 0) and window.program_id(4) == (8, 3, 0)
    record_ids[(10, 4)](out, out.stride(0), 1)  # restored: the whole grid runs again
    assert (out != -1).all()


def test_the_largest_axis_is_the_slowest_so_the_small_axes_run_whole():
    # A (tiles, rows) grid: each row's tiles all run before the row above (gems_sum_dim's is (rows, tiles)).
    out = torch.full((10, 4), -1.0)
    with tail_programs(cover_from=32) as state:  # the last 2 rows: elements 32..39
        record_ids[(4, 10)](out, 1, out.stride(0))  # program (c, r) writes out[r, c]
    ran = (out != -1).reshape(-1)
    assert ran[32:].all() and int(ran.sum()) == 8
    assert state.windows[0].order[0] == 1 and state.windows[0].program_id(1) == (2, 9, 0)


def test_a_spent_allowance_stops_the_window_and_no_window_is_empty():
    out = torch.full((10, 4), -1.0)
    with tail_programs(budget=1) as state:  # no tensor past the mark: only the allowance stops it
        record_ids[(10, 4)](out, out.stride(0), 1)
        record_ids[(1,)](out, out.stride(0), 1)
    assert int((out != -1).sum()) == 2 and out[9, 3] != -1 and out[0, 0] != -1
    assert [(w.ran, w.stopped, w.complete) for w in state.windows] == [(1, "budget", False), (1, "", True)]
    assert state.describe() == "record_ids: the last 1 of 40 programs (stopped: its cost allowance was spent " \
        "before they reached every element past 2^31); record_ids: all 1 programs"


@triton.jit
def copy_at(x_ptr, out_ptr, load_offset, store_offset):
    tl.store(out_ptr + store_offset, tl.load(x_ptr + load_offset))


def test_a_load_outside_the_launch_tensors_is_masked_off_and_recorded():
    x, out = torch.ones(8), torch.full((4,), 7.0)
    with tail_programs() as state:
        copy_at[(1,)](x, out, -(1 << 20), 0)
    assert state.read_violation is not None and state.read_violation.kind == "load"
    assert "(the nearest tensor of the launch)" in str(state.read_violation)
    assert state.violation is None and out[0] == 0, "the load read nothing: it took `other` (zero)"


def test_a_store_outside_the_launch_tensors_stops_the_launch_before_it_writes():
    x, out = torch.ones(8), torch.zeros(4)
    with tail_programs() as state, pytest.raises(Exception):  # noqa: B017 - the interpreter wraps it
        copy_at[(1,)](x, out, 0, 1 << 20)
    assert state.violation is not None and state.violation.kind == "store"
    # Which tensor is nearest depends on where the heap put them: past out's end, or before x.
    assert re.search(r"\d+ bytes (past the end of|before) \w+", str(state.violation)), str(state.violation)
    assert out.sum() == 0, "nothing was stored"


def test_views_of_one_buffer_do_not_cover_each_other():
    buffer = torch.zeros(64)
    x, out = buffer[:8], buffer[32:36]
    with tail_programs() as state:
        copy_at[(1,)](x, out, 16, 0)  # inside the buffer, outside x
    assert state.read_violation is not None


def test_addresses_inside_the_tensors_pass():
    x, out = torch.arange(8.0), torch.zeros(4)
    with tail_programs() as state:
        copy_at[(1,)](x, out, 5, 3)
    assert state.violation is None and out[3] == 5


# -- end to end: row-wise kernels with int64 and int32 row offsets ------------------


@triton.jit
def double_rows(x_ptr, out_ptr, n_cols, stride_row, WIDE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    if WIDE:
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask)
    tl.store(out_ptr + row * stride_row + cols, (x.to(tl.float32) * 2).to(out_ptr.dtype.element_ty), mask=mask)


def rows_subject(wide: bool):
    def launcher(x):
        out = torch.empty_like(x)
        double_rows[(x.shape[0],)](x, out, x.shape[1], x.stride(0), WIDE=wide, BLOCK=64)
        return out

    return tc.register(launcher, name=f"cover_li_rows_{'int64' if wide else 'int32'}_{next(_ids)}",
                       inputs={"x": Tensor(("M", "N"), dtypes=("float16",))},
                       dims={"M": Dim(1, 1 << 28), "N": Dim(1, 64)}, oracle=lambda x: x * 2)


def test_a_row_wise_kernel_with_int64_offsets_honours_the_cell():
    result = run_cell(rows_subject(wide=True), "shape:large-index", backend=Backend())
    assert result.outcome == "honoured", result.message
    assert "65075387" in result.message and "emulated" in result.message


def test_a_row_wise_kernel_with_int32_offsets_is_caught():
    result = run_cell(rows_subject(wide=False), "shape:large-index", backend=Backend())
    assert (result.outcome, result.finding) == ("unsafe", "oob-write"), result.message
    assert "int32 offset that wrapped" in result.message
    assert result.counterexample["dims"] == {"M": 65075387, "N": 33}
    assert "'shape:large-index', example, device='cpu'" in result.reproducer and "example = None" in result.reproducer


def bounded_rows_subject(wide: bool):
    """Rows declared up to 2^24, as liger and fla declare theirs: the plan must widen N (FINDINGS S3)."""
    def launcher(x):
        out = torch.empty_like(x)
        double_rows[(x.shape[0],)](x, out, x.shape[1], x.stride(0), WIDE=wide,
                                   BLOCK=triton.next_power_of_2(x.shape[1]))
        return out

    return tc.register(launcher, name=f"cover_li_bounded_rows_{'int64' if wide else 'int32'}_{next(_ids)}",
                       inputs={"x": Tensor(("M", "N"), dtypes=("float16",))},
                       dims={"M": Dim(1, 1 << 24), "N": Dim(1, 4096)}, oracle=lambda x: x * 2)


def test_rows_bounded_at_2_24_are_reached_and_their_int32_offsets_caught():
    good = run_cell(bounded_rows_subject(wide=True), "shape:large-index", backend=Backend())
    assert good.outcome == "honoured", good.message
    assert "'N': 129" in good.message and "emulated" in good.message
    bad = run_cell(bounded_rows_subject(wide=False), "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "oob-write"), bad.message
    assert bad.counterexample["dims"] == {"M": 16647192, "N": 129}


@triton.jit
def cumsum_heads(x_ptr, out_ptr, T, H: tl.constexpr, BT: tl.constexpr, WIDE: tl.constexpr):
    pid = tl.program_id(axis=0)  # one program per (row, head), heads fastest, as fla's unflatten_program_id
    if WIDE:
        pid = pid.to(tl.int64)
    b, h = pid // H, pid % H
    t = tl.arange(0, BT)
    offsets = b * T * H + t * H + h
    x = tl.load(x_ptr + offsets, mask=t < T, other=0.0)
    tl.store(out_ptr + offsets, tl.cumsum(x, axis=0), mask=t < T)


def heads_subject(wide: bool):
    def launcher(x):
        out = torch.empty_like(x)
        B, T, H = x.shape
        cumsum_heads[(B * H,)](x, out, T, H=H, BT=triton.next_power_of_2(T), WIDE=wide)
        return out

    return tc.register(launcher, name=f"cover_li_heads_{'int64' if wide else 'int32'}_{next(_ids)}",
                       inputs={"x": Tensor(("B", "T", "H"), dtypes=("float32",))},
                       dims={"B": Dim(1, 1 << 24), "T": Dim(1, 64), "H": Dim(1, 64)}, reduces="T",
                       oracle=lambda x: x.cumsum(1))


def test_a_row_spread_over_several_programs_gets_more_of_them_not_a_false_unwritten():
    # fla's chunk_local_cumsum: a 1-D grid of B * H programs; the last 3 write 3 of the last row's 33 heads.
    good = run_cell(heads_subject(wide=True), "shape:large-index", backend=Backend())
    assert good.outcome == "honoured" and good.details["value_compared"], good.message
    assert "the last 5 rows compared" in good.message, "the programs ran back to whole rows (33 heads each)"
    bad = run_cell(heads_subject(wide=False), "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "oob-write"), bad.message


@triton.jit
def scale_flat_rows(x_ptr, w_ptr, out_ptr, n_cols, WIDE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)  # one program per row of x viewed as (B * T, D)
    if WIDE:
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (x * w).to(out_ptr.dtype.element_ty), mask=mask)


def rank3_subject(wide: bool):
    def launcher(x, w):
        out = torch.empty_like(x)
        B, T, D = x.shape
        scale_flat_rows[(B * T,)](x, w, out, D, WIDE=wide, BLOCK=triton.next_power_of_2(D))
        return out

    return tc.register(launcher, name=f"cover_li_rank3_{'int64' if wide else 'int32'}_{next(_ids)}",
                       inputs={"x": Tensor(("B", "T", "D"), dtypes=("float16",)), "w": Tensor(("D",),
                                                                                           dtypes=("float16",))},
                       dims={"B": Dim(1, 64), "T": Dim(1, 1 << 22), "D": Dim(1, 64)}, oracle=lambda x, w: x * w)


def test_a_rank_3_subject_grows_both_outer_dims_and_is_judged_on_its_last_rows():
    good = run_cell(rank3_subject(wide=True), "shape:large-index", backend=Backend())
    assert good.outcome == "honoured", good.message
    assert "'B': 64, 'T': 1016803" in good.message and "the last rows match the oracle" in good.message
    assert good.details["offsets"]["last_row_start"] >= LARGE
    bad = run_cell(rank3_subject(wide=False), "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "oob-write"), bad.message
    assert "last row start 2147487903 (2^31 + 4255)" in bad.message


def test_an_unwritten_tail_is_reported():
    def skips_the_last_rows(x):
        out = torch.empty_like(x)
        double_rows[(x.shape[0] - 5,)](x, out, x.shape[1], x.stride(0), WIDE=True, BLOCK=64)
        return out

    subject = tc.register(skips_the_last_rows, name=f"cover_li_short_grid_{next(_ids)}",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float16",))},
                          dims={"M": Dim(1, 1 << 28), "N": Dim(1, 64)}, oracle=lambda x: x * 2)
    result = run_cell(subject, "shape:large-index", backend=Backend())
    assert (result.outcome, result.finding) == ("unsafe", "unwritten"), result.message


def test_a_wrong_tail_is_a_mismatch():
    def triples(x):
        out = torch.empty_like(x)
        double_rows[(x.shape[0],)](x, out, x.shape[1], x.stride(0), WIDE=True, BLOCK=64)
        out[-1] *= 1.5  # the last row only: the tail comparison must see it
        return out

    subject = tc.register(triples, name=f"cover_li_wrong_{next(_ids)}",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float16",))},
                          dims={"M": Dim(1, 1 << 28), "N": Dim(1, 64)}, oracle=lambda x: x * 2)
    result = run_cell(subject, "shape:large-index", backend=Backend())
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message


# -- the arena: tensors apart, wrapped writes found in the gaps (as on CUDA) ------------

def test_arena_gaps_catch_a_write_between_tensors():
    from triton_conformance.conformance.kinds.large_index.arena import Arena

    arena = Arena(3, 4096, 2, "cpu", reserve=False, gap=8192)  # real memory, as on CUDA, but small
    x = arena.tensor((1000,), torch.float16, "input 'x'")
    out = arena.tensor((1000,), torch.float16)
    x.fill_(1.0)
    out.fill_(2.0)
    assert arena.gap_damage() is None, "writes inside the tensors are fine"
    assert out.data_ptr() - x.data_ptr() >= 8192 + 2000
    arena.buffer[arena.regions[1][0] - 100] = 0  # 100 bytes before the output, as a wrapped store would
    damage = arena.gap_damage()
    assert damage is not None and "gap before an output of the launcher" in damage and "100 bytes before" in damage


def test_arena_refuses_more_tensors_than_it_has_room_for():
    from triton_conformance.conformance.kinds.large_index.arena import Arena

    arena = Arena(1, 4096, 2, "cpu", reserve=False, gap=4096)
    assert arena.tensor((100,), torch.float16) is not None
    assert arena.tensor((100,), torch.float16) is None


# -- the CUDA path (whole grid, real memory, gaps checked), at a small scale on the CPU -----

@pytest.fixture
def small_large(monkeypatch):
    """Shrink 'large' to 4096 elements so the whole-grid path fits in a test."""
    from triton_conformance.conformance.kinds.large_index import example as large_index, plan as large_index_plan

    for module in (large_index, large_index_plan):  # the plan's sizes, and the arena's
        monkeypatch.setattr(module, "LARGE", 4096)
        monkeypatch.setattr(module, "EXTRA", 5)
        monkeypatch.setattr(large_index_plan, "ROW_MARGIN", 1)
        monkeypatch.setattr(module, "TAIL_ELEMENTS", 64)
    return large_index


def small_vector_subject(launcher):
    return tc.register(launcher, name=f"cover_li_full_{launcher.__name__.strip('<>')}_{next(_ids)}", inputs=VECTOR,
                       dims={"N": Dim(0, 1 << 20)}, oracle=lambda x, y: x + y)


def test_whole_grid_path_honours_a_correct_launcher(small_large):
    subject = small_vector_subject(lambda x, y: torch.add(x, y, out=torch.empty_like(x)))
    assert small_large.run_large_index_example(subject, Backend(), emulate=False) == "honoured"


def test_whole_grid_path_finds_a_write_in_the_gap_before_the_output(small_large):
    def writes_before_out(x, y):
        out = torch.empty_like(x)
        torch.add(x, y, out=out)
        torch.as_strided(out, (1,), (1,), out.storage_offset() - 50).fill_(0.0)  # 100 bytes before, in the gap
        return out

    found = small_large.run_large_index_example(small_vector_subject(writes_before_out), Backend(), emulate=False)
    assert (found.outcome, found.kind) == ("unsafe", "oob-write")
    assert "gap before an output of the launcher, the first 100 bytes before its start" in found.message


def test_whole_grid_path_finds_an_unwritten_and_a_wrong_tail(small_large):
    def forgets_the_end(x, y):
        out = torch.empty_like(x)
        torch.add(x[:-3], y[:-3], out=out[:-3])
        return out

    found = small_large.run_large_index_example(small_vector_subject(forgets_the_end), Backend(), emulate=False)
    assert (found.outcome, found.kind) == ("unsafe", "unwritten")
    found = small_large.run_large_index_example(small_vector_subject(lambda x, y: x - y), Backend(), emulate=False)
    assert (found.outcome, found.kind) == ("wrong", "mismatch")


def test_an_int64_index_input_does_not_size_the_gaps(small_large, monkeypatch):
    # A cross entropy's int64 targets tied to V (index_of) once sized every gap and slot for 8-byte elements:
    # 112 GiB of real memory on CUDA, and a harness error when what ran after the launch found none left.
    import torch.nn.functional as F

    arenas = []
    original = small_large.Arena

    class Recorded(original):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            arenas.append(self)

    monkeypatch.setattr(small_large, "Arena", Recorded)
    subject = tc.register(lambda logits, target: F.cross_entropy(logits.float(), target, reduction="none"),
                          name=f"cover_li_ce_{next(_ids)}",
                          inputs={"logits": Tensor(("M", "V"), dtypes=("float16",)),
                                  "target": Tensor(("M",), dtypes=("int64",), index_of="V")},
                          dims={"M": Dim(1, 1 << 20), "V": Dim(2, 64)}, reduces="V",
                          oracle=lambda logits, target: F.cross_entropy(logits, target, reduction="none"))
    assert small_large.run_large_index_example(subject, Backend(), emulate=False) == "honoured"
    (arena,) = arenas
    assert arena.gap == 4096 * 2 + (1 << 20), "a wrapped fp16 offset's reach, not an int64's"


# -- parameters broadcast over the rows, full reductions, persistent kernels (issue 12 section 2) ---------

from tests.zoo import zoo_large_index as zoo  # noqa: E402 - the kernels below


def test_a_weight_and_bias_beside_rows_are_parameters_built_whole():
    plan = large_index_plan(zoo.zoo_layer_norm_rows.contract)
    assert not isinstance(plan, str), plan
    assert plan.row_dim == "M" and plan.params == ("weight", "bias") and plan.dims["N"] == 33


def test_a_declared_row_input_wins_and_a_bad_declaration_is_refused():
    c = contract({"x": Tensor(("M", "N")), "y": Tensor(("N",)), "z": Tensor(("N",), rows=True)},
                 {"M": Dim(1, 1 << 32), "N": Dim(1, 8)})
    assert "not row-separable" in large_index_plan(c), "z leads with N, which x holds second"
    with pytest.raises(tc.InvalidContract, match="rows"):
        Tensor(("N",), rows="yes")


def test_a_layer_norm_with_parameters_is_judged_and_its_int32_row_offsets_caught():
    good = run_cell(zoo.zoo_layer_norm_rows, "shape:large-index", backend=Backend())
    assert good.outcome == "honoured" and "parameters ['weight', 'bias'] whole" in good.message, good.message
    bad = run_cell(zoo.zoo_layer_norm_rows_int32, "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "oob-write"), bad.message


def test_a_full_reduction_is_checked_for_memory_only_when_emulated():
    good = run_cell(zoo.zoo_sum_all, "shape:large-index", backend=Backend())
    assert good.outcome == "honoured", good.message  # not a false wrong/bad-shape on the 0-d output
    assert "memory only" in good.message and good.details["value_compared"] is False
    bad = run_cell(zoo.zoo_sum_all_int32, "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "poisoned-read"), bad.message


def test_a_full_reduction_on_real_tensors_is_compared_whole(small_large):
    def sums(x):
        return x.to(torch.float32).sum()

    subject = tc.register(sums, name=f"cover_li_sum_{next(_ids)}", inputs={"x": Tensor(("N",), dtypes=("float16",))},
                          dims={"N": Dim(1, 1 << 20)}, reduces="N", oracle=lambda x: x.sum())
    assert small_large.run_large_index_example(subject, Backend(), emulate=False) == "honoured"
    wrong = tc.register(lambda x: x[1:].to(torch.float32).sum(), name=f"cover_li_sum_wrong_{next(_ids)}",
                        inputs={"x": Tensor(("N",), dtypes=("float16",))}, dims={"N": Dim(1, 1 << 20)},
                        reduces="N", oracle=lambda x: x.sum())
    found = small_large.run_large_index_example(wrong, Backend(), emulate=False)
    assert (found.outcome, found.kind) == ("wrong", "mismatch") and "whole output" in found.message


def test_whole_grid_path_finds_a_read_of_the_gap_that_values_alone_cannot_show(small_large):
    # A wrapped load whose terms vanish in the result (x 0 here; a few thousand terms among 2^31 on CUDA): the
    # finite gap bytes leave the sum right, NaN gap bytes do not.
    def reads_before_x(x):
        before = torch.as_strided(x, (4,), (1,), x.storage_offset() - 4)  # 8 bytes before x, in the gap
        return x.to(torch.float32).sum() + before.to(torch.float32).sum() * 0

    def inf_sum(x):
        return x.to(torch.float32).sum() / 0.0  # inf or NaN whatever the gaps hold

    decl = dict(inputs={"x": Tensor(("N",), dtypes=("float16",))}, dims={"N": Dim(1, 1 << 20)}, reduces="N")
    bad = tc.register(reads_before_x, name=f"cover_li_reads_gap_{next(_ids)}", oracle=lambda x: x.sum(), **decl)
    found = small_large.run_large_index_example(bad, Backend(), emulate=False)
    assert (found.outcome, found.kind) == ("unsafe", "poisoned-read"), found
    assert "only the gaps around the huge tensors held NaN" in found.message and found.details["nonfinite"] == [0, 1]
    same = tc.register(inf_sum, name=f"cover_li_inf_sum_{next(_ids)}", oracle=lambda x: x.sum() / 0.0, **decl)
    assert small_large.run_large_index_example(same, Backend(), emulate=False) == "honoured", \
        "an output non-finite whatever the gaps hold reads nothing outside"


def test_the_arena_rewinds_to_its_inputs_and_refills_only_its_gaps():
    from triton_conformance.conformance.kinds.large_index.arena import NAN_BYTE, Arena

    arena = Arena(2, 4096, 2, "cpu", reserve=False, gap=8192)
    x = arena.tensor((1000,), torch.float16, "input 'x'")
    x.fill_(1.0)
    first = arena.tensor((1000,), torch.float16)
    arena.rewind(1)
    again = arena.tensor((1000,), torch.float16)
    assert again.data_ptr() == first.data_ptr(), "the output's slot is carved again"
    arena.rewind(1)
    arena.fill_gaps(NAN_BYTE)
    assert bool((x == 1.0).all()), "the input's elements are kept"
    assert bool(arena.buffer[:8192].eq(NAN_BYTE).all()) and bool(arena.buffer[-16:].eq(NAN_BYTE).all())
    assert arena.gap_damage() is None, "the gaps are checked against what they hold now"
    arena.buffer[100] = 0
    assert "gap before input 'x'" in arena.gap_damage()


@triton.jit
def count_iterations(out_ptr, n):
    total = 0
    for _ in range(0, n):
        total += 1
    for _ in tl.range(0, n, 2):
        total += 1000
    tl.store(out_ptr + tl.program_id(0), total)


def test_long_loops_keep_their_last_iterations_shared_among_the_programs():
    out = torch.zeros(5, dtype=torch.int32)
    with tail_programs(long_loop=100, loop_iterations=8) as state:  # 8 iterations among 5 programs: 2 each
        count_iterations[(5,)](out, 400)
    assert out.tolist() == [2002] * 5
    (window,) = state.windows
    assert (window.ran, window.trimmed_loops, window.kept_iterations, window.complete) == (5, 10, 2, False)
    count_iterations[(5,)](out, 400)  # restored: whole loops again
    assert out.tolist() == [200400] * 5


def test_a_persistent_kernel_finishes_in_seconds_and_its_int32_rows_are_caught():
    import time

    started = time.perf_counter()
    good = run_cell(zoo.zoo_softmax_persistent, "shape:large-index", backend=Backend())
    assert good.outcome == "honoured" and good.details["value_compared"], good.message
    assert "all 132 programs, 132 loops of more than 4096 iterations ran their last 2" in good.message
    bad = run_cell(zoo.zoo_softmax_persistent_int32, "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "oob-write"), bad.message
    assert time.perf_counter() - started < 120  # ~500k iterations per program, untrimmed


def test_a_persistent_grid_wider_than_its_loops_runs_every_program_it_needs_and_blames_none_it_skips():
    # The softmax tutorial's grid, 1056 programs (FINDINGS, tutorials): once 3 of them ran and the rows of
    # the others showed as unwritten.  Now each program runs its loop's last row, from the grid's last.
    good = run_cell(zoo.zoo_softmax_persistent_wide, "shape:large-index", backend=Backend())
    assert good.outcome == "honoured" and good.details["value_compared"], good.message
    assert "of 1,056 programs" in good.message and "ran their last 1;" in good.message
    bad = run_cell(zoo.zoo_softmax_persistent_wide_int32, "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "oob-write"), bad.message
    assert "(stopped: an address outside the tensors)" in bad.message


def test_a_reduction_with_a_second_small_tiling_axis_runs_whole_rows():
    # FlagGems' sum_dim grid, (rows, tiles of K) (FINDINGS, flag-gems): its (M, K) output is under 2^31
    # elements, so it was not poisoned, and the rows of the programs that did not run read as zeros and were
    # compared (wrong).  Now every tile of the last rows runs, and only the rows they wrote are compared.
    good = run_cell(zoo.zoo_sum_middle_tiles, "shape:large-index", backend=Backend())
    assert good.outcome == "honoured" and good.details["value_compared"], good.message
    assert "the last 25 of 9,859,910 programs" in good.message  # 5 rows x 5 tiles
    bad = run_cell(zoo.zoo_sum_middle_tiles_int32, "shape:large-index", backend=Backend())
    assert (bad.outcome, bad.finding) == ("unsafe", "poisoned-read"), bad.message


def test_programs_that_did_not_run_are_never_blamed():
    # A persistent grid whose programs each loop a few times (not trimmed) over rows all over the output, and
    # a budget that runs out first: rows of programs that did not run stay unwritten, and are not compared.
    def persistent_few_iterations(x):
        out = torch.empty_like(x)
        zoo.softmax_persistent_kernel[(x.shape[0] // 4,)](out, x, x.stride(0), x.shape[0], x.shape[1],
                                                          BLOCK=64, WIDE=True)
        return out

    subject = tc.register(persistent_few_iterations, name=f"cover_li_persistent_budget_{next(_ids)}",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float16",))},
                          dims={"M": Dim(1, 1 << 28), "N": Dim(1, 64)}, oracle=lambda x: torch.softmax(x, -1))
    result = run_cell(subject, "shape:large-index", backend=Backend())
    assert result.outcome == "honoured" and result.details["value_compared"] is False, result.message
    assert "stopped: its cost allowance was spent" in result.message and "no row was compared" in result.message


@triton.jit
def double_rows_persistent(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    width = n_cols.to(tl.int64)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        at = row * width + offs
        tl.store(out_ptr + at, tl.load(x_ptr + at, mask=mask) * 2, mask=mask)


def test_a_pass_that_reached_no_offset_past_2_31_is_no_pass():
    # tutorial_matmul_persistent was honoured on the interpreter and unsafe (poisoned-read) on the H200: the
    # emulation's allowance ran out in programs that own early tiles, and "honoured" then said offsets it never
    # reached were checked.  Such a cell is skipped, naming how far it got; one that gets there stays honoured.
    # A grid a little wider than a quarter of the rows: the grid's last programs loop 3 times, the rows past
    # 2^31 (the last ~125) belong to programs the allowance never reaches.
    def persistent_rows(x):
        out = torch.empty_like(x)
        double_rows_persistent[(x.shape[0] // 4 + 1000,)](x, out, x.shape[0], x.shape[1], BLOCK=64)
        return out

    subject = tc.register(persistent_rows, name=f"cover_li_persistent_rows_{next(_ids)}",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float16",))},
                          dims={"M": Dim(1, 1 << 28), "N": Dim(1, 64)}, oracle=lambda x: x * 2)
    result = run_cell(subject, "shape:large-index", backend=Backend())
    assert (result.outcome, result.details.get("skip_code")) == ("skipped", "large-index:not-reached"), \
        result.message
    reached = result.details["offsets"]
    assert reached["past_2^31"] is False and reached["last_element"] < LARGE <= reached["planned_last_element"]
    assert f"element {reached['last_element']} (2^31 - " in result.message
    good = run_cell(rows_subject(wide=True), "shape:large-index", backend=Backend())
    assert good.outcome == "honoured" and good.details["offsets"]["past_2^31"] is True, good.message
    assert good.details["offsets"]["last_row_start"] >= LARGE


def test_a_cost_cap_on_drawn_examples_does_not_remove_the_cell():
    # max_elements bounds what the searched cells draw; the launcher still takes 2^31 elements
    plan = large_index_plan(contract(VECTOR, {"N": Dim(0, 1 << 32)}, max_elements=1 << 12))
    assert plan.dims == {"N": LARGE + EXTRA}
