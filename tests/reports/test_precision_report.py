"""The HTML detail panel shows a cell's precision: the verdict of a failing output and the worst error."""

from __future__ import annotations

from triton_conformance.model.outcomes import CellResult, Counterexample
from triton_conformance.reports.html import render_html
from triton_conformance.reports.results_json import environment, results_document


def _page(*results: CellResult) -> str:
    return render_html(results_document(list(results), environment(device="interpreter", profile="ci", seed=None)))


def test_a_failing_cell_shows_which_precision_it_achieved_and_its_worst_error():
    verdict = {"achieved": "input-dtype", "claimed": "float32", "input": "float16", "ratio_claimed": 7.1,
               "ratio_input": 0.4}
    failing = CellResult(subject="add_norm", family="f", cell="dtype:float16", outcome="wrong", finding="mismatch",
                         message="output[1]: 3 of 64 elements outside tolerance",
                         details={"output": "output[1]", "precision": verdict, "error_ulps": 3.9,
                                  "allowance_used": 7.1}, counterexample=Counterexample({"dims": {"N": 4}}))
    page = _page(failing)
    panel = page[page.index("<h3>Precision</h3>"):]
    panel = panel[:panel.index("</div>")]
    for row in ("<th>achieved</th><td>within the bound for float16 intermediates</td>",
                "<th>claimed accumulation</th><td>float32</td>", "<th>error / claimed bound</th><td>7.1</td>",
                "<th>error / input-dtype bound</th><td>0.4</td>", "<th>worst error (output ulps)</th><td>3.9</td>",
                "<th>share of the bound used</th><td>7.1</td>"):
        assert row in panel, row
    assert "<th>precision</th>" not in page  # not repeated raw among the error statistics


def test_a_passing_cell_shows_its_worst_error_and_a_worse_verdict_says_wrong():
    passing = CellResult(subject="add_norm", family="f", cell="shape:tiny", outcome="honoured",
                         details={"error_ulps": 0.5, "allowance_used": 0.24})
    worse = CellResult(subject="add_norm", family="f", cell="dtype:float32", outcome="wrong", finding="mismatch",
                       message="m", details={"precision": {"achieved": "worse", "claimed": "float32",
                                                           "input": "float32", "ratio_claimed": 9.0,
                                                           "ratio_input": 9.0}})
    page = _page(passing, worse)
    assert "<th>worst error (output ulps)</th><td>0.5</td></tr><tr><th>share of the bound used</th><td>0.24</td>" in page
    assert "<th>achieved</th><td>worse than float32 intermediates: wrong</td>" in page
