"""One defect must not hide the next: a row sum with three defects, where the cheapest one is found first.

``row_sum_three_defects`` (a known-buggy kernel) claims a row sum of any
layout in fp16 and fp32, in fp32 (as ``x.sum(-1, dtype=torch.float32)``),
empty rows included, and:

1. its launcher divides by zero on an empty input (``x.numel() // n``): every
   cell's search draws an empty input first, and shrinks to that crash;
2. it accumulates fp16 rows in fp16 (partial sums with tens of times torch's error);
3. it reads the input as if it were row-major (a flat read of a strided input).

After the crash at an empty size, each cell searches again without empty
sizes and reports the second defect it reaches: the fp16 partial sums in
``dtype:float16``, the flat read in ``layout:transposed``.  The correct twin
passes both cells.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, register
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config


@triton.jit
def _row_sum_kernel(out_ptr, x_ptr, stride_xm, stride_xn, n_cols, BLOCK: tl.constexpr, FP16_ACC: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float16 if FP16_ACC else tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols, other=0.0)
        acc += x.to(acc.dtype)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(tl.float32))


def _launch(x: torch.Tensor, *, defects: bool) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty(m, dtype=torch.float32, device=x.device)
    rows = x.numel() // n if defects else m  # defect 1: n == 0 divides by zero
    if rows == 0:
        return out
    stride_m, stride_n = (n, 1) if defects else x.stride()  # defect 3: reads x as if row-major
    fp16 = defects and x.dtype == torch.float16  # defect 2: fp16 rows summed in fp16
    _row_sum_kernel[(rows,)](out, x, stride_m, stride_n, n, BLOCK=128, FP16_ACC=fp16)
    return out


def row_sum(x):
    return _launch(x, defects=False)


def row_sum_three_defects(x):
    return _launch(x, defects=True)


CONTRACT = dict(inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any")},
                dims={"M": Dim(0, 64), "N": Dim(0, 4096)}, oracle=lambda x: x.sum(-1), reduces="N",
                family="row_sum")
CORRECT = register(row_sum, name="quality_row_sum", **CONTRACT)
BUGGY = register(row_sum_three_defects, name="quality_row_sum_three_defects",
                 xfail="divides by zero on an empty input; fp16 partial sums; a flat read of strided input",
                 **CONTRACT)


@pytest.mark.parametrize(("cell", "second"), [("dtype:float16", ("wrong", "mismatch")),
                                               ("layout:transposed", ("wrong", "mismatch"))])
def test_a_crash_at_an_empty_size_does_not_hide_the_next_defect(cell, second):
    result = run_cell(BUGGY, cell, backend=Backend(), config=run_config(profile="ci"))
    assert (result.outcome, result.finding) == ("crash", "exception"), result.message
    assert 0 in result.counterexample.spec["dims"].values() and "ZeroDivisionError" in result.message
    found = result.details["second_finding"]
    assert (found["outcome"], found["kind"]) == second, result.message
    dims = found["counterexample"]["dims"]
    assert 0 not in dims.values(), dims
    assert "replay(" in found["reproducer"] and f"{cell!r}" in found["reproducer"]
    assert run_cell(CORRECT, cell, backend=Backend(), config=run_config(profile="ci")).outcome == "honoured"


def test_the_second_defects_are_each_in_their_own_cell():
    # fp16 partial sums are the dtype cell's (fp32 accumulates right); the flat read the layout cell's.
    fp32 = run_cell(BUGGY, "dtype:float32", backend=Backend(), config=run_config(profile="ci"))
    assert "second_finding" not in fp32.details, fp32.message
    layout = run_cell(BUGGY, "layout:transposed", backend=Backend(), config=run_config(profile="ci"))
    x = layout.details["second_finding"]["counterexample"]["tensors"]["x"]
    assert list(x["strides"]) != [x["shape"][1], 1]  # read flat, wrong; and not row-major
