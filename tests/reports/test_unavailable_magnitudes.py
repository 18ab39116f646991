"""A cell judged without its magnitudes (issue 28) says so in the terminal summary and its HTML detail."""

from __future__ import annotations

from triton_conformance.model.outcomes import CellResult, Counterexample
from triton_conformance.reports.html import render_html
from triton_conformance.reports.results_json import environment, results_document
from triton_conformance.reports.terminal import matrix_lines

REASON = "no magnitude rule for aten._linalg_svd.default"


def _cell(cell: str, details: dict) -> CellResult:
    return CellResult(subject="svd_norm", family="f", cell=cell, outcome="wrong", finding="mismatch",
                      message="output: 1 of 4 elements outside tolerance", details={"output": "output", **details},
                      counterexample=Counterexample({"dims": {"N": 4}}))


def test_cells_judged_without_magnitudes_are_counted_and_shown_with_their_reason():
    results = [_cell("layout:contiguous", {"magnitudes_unavailable": REASON}),
               _cell("layout:transposed", {"magnitudes_unavailable": REASON}),
               _cell("shape:tiny", {})]
    lines = matrix_lines(results)
    start = lines.index("magnitudes unavailable in 2 cells (judged by the plain bound alone):")
    assert lines[start + 1] == f"  2: {REASON}"
    page = render_html(results_document(results, environment(device="interpreter", profile="ci", seed=None)))
    assert page.count(f"<strong>Magnitudes unavailable:</strong> {REASON}; judged by the plain bound alone") == 2


def test_no_line_when_every_cell_had_its_magnitudes():
    assert not any("magnitudes unavailable" in line for line in matrix_lines([_cell("shape:tiny", {})]))
