"""The report explains itself (issue 14): a legend, failing cells first, skip reasons, plots that carry
information, findings in words, letters that say what was found, and no empty diff sections."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tests.reports._documents import document, result
from tests.reports._page import parse
from triton_conformance.model.cells import Catalogue, CellClass, Dimension
from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.diff import diff_documents
from triton_conformance.reports.html import render_html
from triton_conformance.reports.terminal import matrix_lines

SNAPSHOT = Path(__file__).parent / "data" / "softmax-interpreter.json"
# What the report must show for each outcome, written out here (docs/glossary.md), not read from the table.
LETTERS = {"honoured": "H", "rejected": "R", "wrong": "W", "unsafe": "U", "crash": "C", "compile-error": "K",
           "timeout": "T", "skipped": ".", "oracle-error": "E", "harness-error": "!", "accepted": "A"}


def detail_of(page, subject, cell):
    return next(s for s in page.find_all("section", cls="detail") if s.find("h2").text() == f"{subject}[{cell}]")


def cell_of(page, subject, cell):
    return page.find("tr", data_subject=subject).find("td", data_cell=cell)


# -- the legend --------------------------------------------------------------------------------------

def test_the_legend_names_every_outcome_letter_the_hatched_cell_and_each_cell():
    doc = document([result("k", "layout:size1", "honoured"), result("k", "layout:mixed", "wrong"),
                    result("k", "shape:large-index", "skipped"), result("k", "shape:beyond-range", "rejected"),
                    result("j", "memory", "honoured")])
    legend = parse(render_html(doc)).find("section", id="legend")
    letters = {tr.attrs["data-outcome"]: tr.find("span", cls="legend-cell").text()
               for tr in legend.find_all("tr") if "data-outcome" in tr.attrs}
    assert letters == LETTERS
    honoured = next(tr for tr in legend.find_all("tr") if tr.attrs.get("data-outcome") == "honoured")
    assert "right answer" in honoured.text()  # the outcome's one-line summary
    hatched = next(tr for tr in legend.find_all("tr") if tr.attrs.get("data-mark") == "none")
    assert "not applicable" in hatched.text() and "none" in hatched.find("span").classes
    explained = {d.attrs["data-cell"]: d.find("dd").text() for d in legend.find_all("div")
                 if "data-cell" in d.attrs}
    assert set(explained) == {"layout:size1", "layout:mixed", "shape:large-index", "shape:beyond-range", "memory"}
    written = {(d["name"], value): text for d in doc["cells"] for value, text in d["classes"]}  # what the run wrote
    for cell, text in explained.items():
        dimension, _, value = cell.partition(":")
        assert text == written[dimension, value] != "", cell
    assert "size-1 dims" in explained["layout:size1"]


def test_column_headers_explain_their_cell_in_a_tooltip():
    page = parse(render_html(document([result("k", "layout:size1", "honoured"), result("k", "memory", "honoured")])))
    head = page.find("th", data_cell="layout:size1")
    assert head.attrs["title"].startswith("layout:size1: ") and "size-1 dims" in head.attrs["title"]
    assert "memory check" in page.find("th", data_cell="memory").attrs["title"]


def test_a_document_without_a_catalogue_is_shown_in_cell_name_order_unexplained():
    # The reports keep no catalogue of their own: an old document's cells are ordered by name.
    doc = document([result("k", "shape:tiny", "honoured"), result("k", "layout:size1", "honoured"),
                    result("k", "dtype:float16", "rejected")])
    del doc["cells"]
    page = parse(render_html(doc))
    heads = [th.attrs["data-cell"] for th in page.find("tr", cls="values").find_all("th")]
    assert heads == ["dtype:float16", "layout:size1", "shape:tiny"]
    assert page.find("th", data_cell="layout:size1").attrs["title"] == "layout:size1"
    lines = matrix_lines([CellResult.from_dict(r) for r in doc["results"]])
    assert lines[1].split() == ["dtype", "layout", "shape"]


def test_the_documents_own_catalogue_orders_and_explains_the_cells():
    catalogue = Catalogue((Dimension("shape", "drawn shapes", (CellClass("tiny", "MY TINY TEXT"),)),
                           Dimension("layout", "layouts", (CellClass("size1", "MY SIZE1 TEXT"),))))
    doc = document([result("k", "layout:size1", "honoured"), result("k", "shape:tiny", "honoured")])
    doc["cells"] = catalogue.to_dict()
    page = parse(render_html(doc))
    heads = [th.attrs["data-cell"] for th in page.find("tr", cls="values").find_all("th")]
    assert heads == ["shape:tiny", "layout:size1"]  # the catalogue's order, not the default's
    assert page.find("th", data_cell="layout:size1").attrs["title"] == "layout:size1: layouts: MY SIZE1 TEXT"
    lines = matrix_lines([CellResult.from_dict(r) for r in doc["results"]], Catalogue.from_dict(doc["cells"]))
    assert lines[1].split() == ["shape", "layout"]


# -- failing cells first ------------------------------------------------------------------------------

def test_failing_cells_are_listed_above_the_matrix_new_bugs_before_known_ones():
    # New failures one line each, in words; a known bug's cells one line per subject.
    doc = document([result("a", "layout:contiguous", "honoured"),
                    result("a", "memory", "unsafe", finding="unwritten", expected_failure="known"),
                    result("b", "shape:tiny", "crash", finding="exception"),
                    result("b", "determinism", "skipped")])
    out = render_html(doc)
    assert out.index('id="failing"') < out.index('class="matrix-section"')
    section = parse(out).find("section", id="failing")
    assert section.find("h2").text() == "Failing cells (2) (1 of them known bugs)"
    links = [a.text() for a in section.find_all("a")]
    assert links == ["b[shape:tiny]", "memory"]
    lines = [li.text() for li in section.find_all("li")]
    assert lines[0] == "b[shape:tiny] crash raised an exception on an input inside the contract at N=1025, M=1"
    assert lines[1] == "a known bug 1 failing cell, as expected (known): memory"
    ids = {a.attrs["data-detail"] for a in section.find_all("a")}
    assert ids <= {s.attrs["id"] for s in parse(out).find_all("section", cls="detail")}


# -- skip reasons ------------------------------------------------------------------------------------

LARGE_SKIP = ("B=32784 rows would be needed for 2^31 elements, outside [1, 64] (inner dims widened within their "
              "ranges to T=2048: rows of 65536 elements, the most the cell builds)")


def test_skip_reasons_are_grouped_by_their_code_and_shown_whole():
    coded = lambda cell, code, message: result("k", cell, "skipped", message=message,  # noqa: E731
                                                 details={"skip_code": code})
    doc = document([coded(f"values:{v}", "values:not-claimed", f"value class {v!r} not claimed")
                    for v in ("inf", "nan", "denormal")] + [
        coded("shape:large-index", "large-index:rows-out-of-range", LARGE_SKIP),
        # Written before results carried codes: grouped by its cell's dimension.
        result("k", "dtype:bfloat16", "skipped", message="not testable here: this interpreter computes bf16 on "
                                                          "raw bit patterns (1 + 0.5 gave 8.5e+37)"),
        result("k", "memory", "honoured")])
    page = parse(render_html(doc))
    skips = [li.text() for li in page.find("ul", cls="skips").find_all("li")]
    assert skips == ["3 skipped (values:not-claimed), e.g.: value class 'inf' not claimed",
                     "1 skipped (dtype:other): not testable here: this interpreter computes bf16 on raw bit "
                     "patterns (1 + 0.5 gave 8.5e+37)",
                     f"1 skipped (large-index:rows-out-of-range): {LARGE_SKIP}"]
    title = cell_of(page, "k", "values:nan").find("a").attrs["title"]
    assert title == "k[values:nan]: skipped: value class 'nan' not claimed"
    lines = matrix_lines([CellResult.from_dict(r) for r in doc["results"]])
    assert lines[-4:] == ["skipped cells (5):", "  3 skipped (values:not-claimed), e.g.: value class 'inf' not claimed",
                          "  1 skipped (dtype:other): not testable here: this interpreter computes bf16 on raw bit "
                          "patterns (1 + 0.5 gave 8.5e+37)",
                          f"  1 skipped (large-index:rows-out-of-range): {LARGE_SKIP}"]


# -- plots -------------------------------------------------------------------------------------------

def test_plots_without_information_are_left_out():
    for series in ([{"x": 1025, "y": 0.0, "outcome": "unsafe"}],                          # one point at y = 0
                   [{"x": 1, "y": 0.0}, {"x": 2, "y": 0.0}, {"x": 3, "y": 0.0}],           # all zero
                   [{"x": 1, "y": 0.0}, {"x": 2, "y": math.nan}, {"x": 3, "y": math.nan}],  # zero or NaN
                   [{"x": 7, "y": 3e-4}]):                                                 # a single point
        doc = document([result("k", "memory", "unsafe", finding="poisoned-read", details={"series": series})])
        assert "<svg" not in render_html(doc), series


def test_the_error_vs_size_plot_marks_the_first_failing_size():
    series = [{"x": n, "y": 0.0 if n <= 1024 else 6e-4, "outcome": "honoured" if n <= 1024 else "wrong"}
              for n in (1, 512, 1024, 1025, 2048)]
    page = parse(render_html(document([result("k", "shape:beyond-block", "wrong", details={"series": series})])))
    line = page.find("svg", cls="plot").find("line", cls="boundary")
    assert (line.attrs["data-last-pass"], line.attrs["data-first-fail"]) == ("1024", "1025")
    assert "fails from 1025" in page.find("svg", cls="plot").text()
    assert "first failing sizesize = 1025 (passes at 1024)" in detail_of(page, "k", "shape:beyond-block").text()


# -- findings in words -------------------------------------------------------------------------------

def _finding_page(finding: str, details: dict, message: str, **extra):
    doc = document([result("k", "memory", "unsafe", finding=finding, details=details, message=message, **extra)])
    page = parse(render_html(doc))
    return detail_of(page, "k", "memory"), cell_of(page, "k", "memory")


def test_an_out_of_bounds_write_says_how_far_past_which_tensor():
    detail, cell = _finding_page(
        "oob-write", {"side": "after", "byte_offset": 4104, "span_bytes": 4100, "shape": [1025], "dtype": "float32"},
        "wrote outside a (1025,) torch.float32 allocation: guard band after it changed (first changed byte at "
        "offset 4104 from the tensor's start, tensor is 4100 bytes)")
    words = ("wrote past the end of a (1025,) float32 tensor the launcher allocated (4100 bytes long): the first "
             "changed byte is the 5th byte after its end (offset 4104 from its start)")
    assert detail.find("span", cls="finding").text() == words
    assert cell.find("a").attrs["title"] == f"k[memory]: unsafe: {words}"
    stats = [th.text() for th in detail.find_all("th")]
    assert not {"side", "byte_offset", "span_bytes", "shape", "dtype"} & set(stats)  # in words, not raw keys
    before, _ = _finding_page("oob-write", {"side": "before", "byte_offset": -2, "span_bytes": 8, "shape": [2],
                                            "dtype": "float32"},
                              "wrote outside a (2,) torch.float32 allocation: guard band before it changed")
    assert "wrote before the start of a (2,) float32 tensor" in before.text()
    assert "the 2nd byte before its start" in before.text()


def test_unwritten_mutated_and_poisoned_read_findings_in_words():
    detail, _ = _finding_page("unwritten", {"unwritten": 3, "total": 1025, "first_index": [0, 1022], "output": 0},
                              "output 0: 3 of 1025 elements never written; first at (0, 1022)")
    assert detail.find("span", cls="finding").text() == (
        "left 3 of 1025 elements of output 0 unwritten (they kept the poison it was allocated with); "
        "the first at (0, 1022)")
    detail, _ = _finding_page("mutated-input", {"inputs": ["x"]}, "input storage changed by the call: ['x']")
    assert detail.find("span", cls="finding").text().startswith("changed the memory of input x (its elements")
    cx = {"dims": {"N": 9}, "dtypes": {"x": "float32"}, "layouts": {"x": {"kind": "padded", "pad": 3}}}
    detail, _ = _finding_page("poisoned-read", {}, "output changed when only the memory around the inputs changed",
                              counterexample=cx)
    assert detail.find("span", cls="finding").text().startswith("read memory outside its inputs' elements")
    assert detail.find("span", cls="finding").text().endswith("(x is padded)")



def test_a_misaligned_descriptor_finding_names_the_input_and_the_rule():
    details = {"input": "b", "descriptor": {"where": "host TensorDescriptor", "rules": ["strides"]}}
    detail, _ = _finding_page("misaligned-descriptor", details, "input 'b': host TensorDescriptor on ...")
    assert detail.find("span", cls="finding").text() == (
        "built a tensor descriptor on input b that the GPU's copy engine refuses (breaking its strides rule): "
        "a fault or garbage on the GPU")


# -- letters that say what was found -----------------------------------------------------------------

def test_a_wrong_answer_in_the_memory_or_determinism_column_says_it_is_not_that_columns_failure():
    doc = document([result("k", "memory", "wrong", finding="mismatch"),
                    result("k", "determinism", "wrong", finding="mismatch"),
                    result("j", "determinism", "wrong", finding="nondeterministic", details={}),
                    result("j", "memory", "unsafe", finding="oob-write")])
    page = parse(render_html(doc))
    for cell, concern in (("memory", "memory-safety"), ("determinism", "nondeterminism")):
        td = cell_of(page, "k", cell)
        assert td.find("a").text() == "W" and "incidental" in td.classes
        title = td.find("a").attrs["title"]
        assert f"not a {concern} finding" in title and "outputs differ from the oracle at 1 of 1025" in title
        assert f"not a {concern} finding" in detail_of(page, "k", cell).find("p", cls="incidental").text()
    nondeterministic = cell_of(page, "j", "determinism")
    assert "incidental" not in nondeterministic.classes
    assert nondeterministic.find("a").attrs["title"] == (
        "j[determinism]: wrong: two calls on identical inputs gave different bits")
    assert "incidental" not in cell_of(page, "j", "memory").classes


# -- the diff ----------------------------------------------------------------------------------------

def test_empty_diff_sections_are_hidden():
    old = document([result("a", "memory", "honoured"), result("a", "shape:tiny", "honoured")])
    new = document([result("a", "memory", "wrong"), result("a", "shape:tiny", "honoured")])
    section = parse(render_html(new, baseline=old)).find("section", id="diff")
    assert [h.attrs["data-diff"] for h in section.find_all("h3")] == ["regressions"]
    assert "(0)" not in section.text()
    same = parse(render_html(old, baseline=old)).find("section", id="diff")
    assert not section.find_all("h3", data_diff="fixes") and not same.find_all("h3")
    assert "No cell changed." in same.text()
    assert diff_documents(old, new).summary_lines()[2:] == [
        "1 regression", "", "regressions:", "  a[memory]: honoured -> wrong (mismatch)"]


# -- the real run ------------------------------------------------------------------------------------

def test_the_real_runs_report_explains_its_cells():
    doc = json.loads(SNAPSHOT.read_text())
    page = parse(render_html(doc))
    failing = page.find("section", id="failing")
    assert len(failing.find_all("a")) == sum(r["outcome"] == "wrong" for r in doc["results"]) == 16
    assert [li.attrs["data-subject"] for li in failing.find_all("li")] == ["softmax_block1024"]
    memory = cell_of(page, "softmax_block1024", "memory")
    assert "incidental" in memory.classes and memory.find("a").text() == "W"
    assert page.find("th", data_cell="shape:large-index").attrs["title"].startswith("shape:large-index: ")
    assert page.find("ul", cls="skips").find_all("li")
