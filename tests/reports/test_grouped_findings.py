"""One defect, one finding (issue 22, section 4): cells of a subject that shrank to the same thing are one line.

A mean whose launcher divides by the length crashes on an empty input.  Every
layout cell that can reach N=0 shrinks to the same crash: the report showed one
finding a cell, five lines and five re-run commands for one defect.  Now the
terminal, the HTML and the re-run commands name it once, with its cells; the
results JSON stays one result a cell.
"""

from __future__ import annotations

import json
import shlex
import textwrap

import pytest

from tests.reports._page import parse
from triton_conformance.reports.results_json import catalogue_of
from triton_conformance.reports.findings import finding_groups
from triton_conformance.reports.html import render_html

SUBJECTS = '''
import torch
from triton_conformance import Dim, Tensor, subject


@subject(inputs={"x": Tensor(("N",), layouts="any")}, dims={"N": Dim(0, 64)}, oracle=lambda x: x.sum() / 4,
         reduces="N", family="quarter")
def quarter_sum_divides_by_n(x):
    """Bug: scales by 4 / N / N * N, dividing by zero on an empty input (Python raises)."""
    n = x.shape[0]
    return x.sum() * (4.0 / n) / 16 * n
'''


@pytest.fixture
def empty_input_run(pytester: pytest.Pytester):
    pytester.makepyfile(quarter_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest("def pytest_conformance_modules(config):\n    return ['quarter_subjects']\n")
    result = pytester.runpytest_subprocess("--conformance-only", "-k", "layout", "-p", "no:randomly")
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    return result, doc


def _crashed(doc: dict) -> list[dict]:
    """The crash cells, in the matrix's order (the reports' order)."""
    return sorted((r for r in doc["results"] if r["outcome"] == "crash"),
                  key=lambda r: catalogue_of(doc).sort_key(r["cell"]))


def test_cells_that_shrank_to_the_same_crash_are_one_finding_in_the_terminal_and_html(empty_input_run) -> None:
    result, doc = empty_input_run
    crashed = _crashed(doc)
    assert len(crashed) >= 4, [(r["cell"], r["outcome"], r["finding"]) for r in doc["results"]]
    assert all(r["finding"] == "exception" and r["counterexample"]["dims"] == {"N": 0} for r in crashed)
    lines = result.stdout.lines
    start = lines.index("failing cells:")
    listed = lines[start + 1:lines.index("", start)]  # the section, up to its blank line
    assert len(listed) == 1, lines[start:]
    cells = ", ".join(r["cell"] for r in crashed)
    assert listed[0] == (f"  quarter_sum_divides_by_n[{cells}]: crash (exception) at dims={{'N': 0}}  "
                         f"(one finding in {len(crashed)} cells)")
    # One command re-runs it (the first of its cells), with the Python that ran the job.
    start = lines.index("re-run a failing cell:")
    commands = [line.strip() for line in lines[start + 1:] if line.startswith("  ") and "--conformance-cell" in line]
    assert len(commands) == 1, lines[start:]
    argv = shlex.split(commands[0])
    assert argv[1:3] == ["-m", "pytest"]
    assert argv[-1] == f"--conformance-cell=quarter_sum_divides_by_n[{crashed[0]['cell']}]"
    # The HTML lists it once too, naming its other cells.
    page = parse(render_html(doc))
    items = page.find("ul", cls="failing").find_all("li")
    assert len(items) == 1
    assert items[0].attrs["data-cells"] == str(len(crashed))
    also = items[0].find("span", cls="same-finding").text()
    assert all(r["cell"] in also for r in crashed[1:]) and crashed[0]["cell"] not in also, (also, [r["cell"] for r in crashed])


def _cell(cell: str, outcome: str = "wrong", finding: str = "mismatch", dims: dict | None = None,
          subject: str = "s") -> dict:
    cx = {"dims": dims} if dims is not None else None
    return {"subject": subject, "cell": cell, "outcome": outcome, "finding": finding, "counterexample": cx}


def test_only_the_same_outcome_finding_and_shrunk_dims_make_one_finding() -> None:
    cells = [_cell("layout:contiguous", dims={"N": 0}), _cell("layout:transposed", dims={"N": 0}),
             _cell("layout:padded", dims={"N": 1}),  # other dims
             _cell("dtype:float16", finding="nan-mismatch", dims={"N": 0}),  # another finding
             _cell("dtype:float32", outcome="unsafe", dims={"N": 0}),  # another outcome
             _cell("layout:contiguous", dims={"N": 0}, subject="t"),  # another subject
             _cell("timeout", outcome="timeout", finding="timeout"), _cell("memory", outcome="timeout",
                                                                           finding="timeout"),  # nothing shrunk
             _cell("shape:tiny", outcome="honoured", finding=None, dims={"N": 0})]  # not a failure
    groups = [[c["subject"] + "[" + c["cell"] + "]" for c in g.cells] for g in finding_groups(cells)]
    assert groups == [["s[layout:contiguous]", "s[layout:transposed]"], ["s[layout:padded]"], ["s[dtype:float16]"],
                      ["s[dtype:float32]"], ["t[layout:contiguous]"], ["s[timeout]"], ["s[memory]"]]


def test_findings_on_different_outputs_are_different_findings() -> None:
    # issue 28: a forward mismatch of output[1] and a mismatch of grad x were listed as one finding
    forward = {**_cell("layout:contiguous", dims={"N": 3}), "details": {"output": "output[1]"}}
    backward = {**_cell("grad:layout:contiguous", dims={"N": 3}), "details": {"output": "grad x", "gradient": "x"}}
    again = {**_cell("layout:transposed", dims={"N": 3}), "details": {"output": "output[1]"}}
    groups = [[c["cell"] for c in g.cells] for g in finding_groups([forward, backward, again])]
    assert groups == [["layout:contiguous", "layout:transposed"], ["grad:layout:contiguous"]]
