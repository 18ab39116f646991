"""The HTML report, rendered from synthetic documents and parsed back."""

from __future__ import annotations

import html
import re

import pytest

from tests.reports._documents import REPRODUCER, document, result
from tests.reports._page import parse
from triton_conformance.reports.html import render_html, write_html

EVIL = "<script>alert(1)</script>"


def small_document():
    return document([
        result("softmax", "layout:contiguous", "honoured", family="softmax"),
        result("softmax", "shape:beyond-block", "honoured", family="softmax"),
        result("softmax", "memory", "honoured", family="softmax"),
        result("softmax_block1024", "layout:contiguous", "wrong", family="softmax",
               expected_failure="hard-coded BLOCK_SIZE"),
        result("softmax_block1024", "shape:beyond-block", "wrong", family="softmax",
               expected_failure="hard-coded BLOCK_SIZE"),
        result("gemv", "layout:contiguous", "rejected", family="gemv"),
        result("gemv", "dtype:float16", "crash", family="gemv",
               details={"traceback": "Traceback (most recent call last):\n  boom"}),
        result("gemv", "memory", "skipped", family="gemv"),
    ])


def test_matrix_has_one_row_per_subject_and_one_cell_per_column():
    page = parse(render_html(small_document()))
    table = page.find("table", cls="matrix")
    rows = table.find_all("tr", cls="subject")
    assert [r.attrs["data-subject"] for r in rows] == ["gemv", "softmax", "softmax_block1024"]
    assert [f.attrs["data-family"] for f in table.find_all("tbody", cls="family")] == ["gemv", "softmax"]
    for row in rows:
        assert len(row.find_all("td", cls="cell")) == 4  # the union of the subjects' cells
    assert len(table.find_all("td", cls="none")) == 3 * 4 - 8
    outcomes = [td.attrs["data-outcome"] for td in table.find_all("td") if "data-outcome" in td.attrs]
    assert sorted(outcomes) == sorted(r["outcome"] for r in small_document()["results"])


def test_columns_are_grouped_by_dimension_in_order():
    page = parse(render_html(small_document()))
    dims = [th.attrs["data-dimension"] for th in page.find("tr", cls="dims").find_all("th")
            if "data-dimension" in th.attrs]
    assert dims == ["layout", "dtype", "shape", "memory"]
    row = page.find("tr", data_subject="gemv")
    assert [td.attrs.get("data-outcome") for td in row.find_all("td")] == ["rejected", "crash", None, "skipped"]


def test_known_bug_subjects_are_flagged():
    page = parse(render_html(small_document()))
    buggy = page.find("tr", data_subject="softmax_block1024")
    assert buggy.attrs["data-known"] == "1"
    assert "known bug" in buggy.find("th").text()
    assert all("known" in td.classes for td in buggy.find_all("td", cls="o-wrong"))
    assert page.find("tr", data_subject="softmax").attrs["data-known"] == "0"


def test_summary_counts_every_outcome():
    page = parse(render_html(small_document()))
    counts = {n.attrs["data-count"]: n.text() for n in page.find_all("span", cls="count") if "data-count" in n.attrs}
    assert counts == {"honoured": "honoured 3", "rejected": "rejected 1", "wrong": "wrong 2", "unsafe": "unsafe 0",
                      "crash": "crash 1", "compile-error": "compile-error 0", "timeout": "timeout 0",
                      "skipped": "skipped 1", "oracle-error": "oracle-error 0", "harness-error": "harness-error 0",
                      "accepted": "accepted 0"}
    assert "3 subjects, 8 cells" in page.find("section", cls="summary-section").text()


def test_header_names_the_environment():
    header = parse(render_html(small_document())).find("header")
    # Each field paired with its own value: a substring search would find "ci" in "ci-host" and "1234" in "abc1234".
    fields = dict(zip([dt.text() for dt in header.find_all("dt")], [dd.text() for dd in header.find_all("dd")],
                      strict=True))
    assert {k: fields[k] for k in ("date", "device", "triton", "torch", "python", "hypothesis", "profile", "seed",
                                   "commit", "host")} == {
        "date": "2026-11-30 12:00:00 UTC", "device": "cpu (Triton interpreter)", "triton": "3.9.0",
        "torch": "2.13.0", "python": "3.11.7", "hypothesis": "6.170.0", "profile": "ci", "seed": "1234",
        "commit": "abc1234", "host": "ci-host"}


def test_every_cell_links_to_its_detail_section():
    page = parse(render_html(small_document()))
    links = [a.attrs["data-detail"] for a in page.find("table", cls="matrix").find_all("a")]
    sections = {s.attrs["id"] for s in page.find_all("section", cls="detail")}
    assert len(links) == 8 and set(links) == sections


def detail_of(page, subject, cell):
    return next(s for s in page.find_all("section", cls="detail")
                if s.find("h2").text() == f"{subject}[{cell}]")


def test_failing_detail_shows_counterexample_errors_and_reproducer():
    page = parse(render_html(small_document()))
    detail = detail_of(page, "softmax_block1024", "shape:beyond-block")
    text = detail.text()
    for expected in ("N=1025, M=1", "x=float16", "offset offset=1", "seed", "7", "0.000629", "(0, 1024)",
                     "|err| <= 6.12e-05 + 0.00392 * |ref| (dtype)", "known bug", "hard-coded BLOCK_SIZE"):
        assert expected in text, expected
    pre = detail.find("pre", cls="reproducer")
    assert pre.text() == REPRODUCER
    button = detail.find("button", cls="copy")
    assert button.attrs["data-target"] == pre.attrs["id"]


def test_traceback_is_shown_when_present():
    page = parse(render_html(small_document()))
    assert "boom" in detail_of(page, "gemv", "dtype:float16").find("pre", cls="traceback").text()
    assert not detail_of(page, "softmax", "memory").find_all("pre")


def test_evil_names_messages_and_tracebacks_render_as_text():
    evil = result(EVIL, f"layout:{EVIL}", "wrong", family=f'fam"{EVIL}', message=f"msg {EVIL} & <b>",
                  reproducer=f"print('{EVIL}')  # </code></pre>{EVIL}",
                  details={"traceback": f"</pre>{EVIL}", "note": EVIL, "series": "not a list"},
                  expected_failure=EVIL)
    doc = document([evil], device_name=EVIL, commit=EVIL)
    out = render_html(doc, baseline=document([result(EVIL, f"layout:{EVIL}", "honoured")]))
    assert out.count("<script") == 1  # ours, at the end
    assert "alert(1)</script>" not in out.replace("</script></body>", "")
    page = parse(out)
    assert page.find("tr", cls="subject").attrs["data-subject"] == EVIL
    assert page.find("th", cls="subject", scope="row").text().startswith(EVIL)
    detail = page.find("section", cls="detail")
    assert detail.find("h2").text() == f"{EVIL}[layout:{EVIL}]"
    assert detail.find("pre", cls="reproducer").text() == evil["reproducer"]
    assert detail.find("pre", cls="traceback").text() == f"</pre>{EVIL}"
    assert EVIL in page.find("header").text()
    assert EVIL in page.find("section", cls="diff").text()


def test_no_network_resources():
    doc = small_document()
    doc["results"][3]["details"]["series"] = [{"x": 1, "y": 1}, {"x": 2, "y": 3}]
    out = render_html(doc)
    assert "<svg" in out
    urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.\w+", out))
    assert urls == {"http://www.w3.org"}  # the SVG namespace, never fetched
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", out)
    assert "default-src 'none'" in out


def test_series_in_details_becomes_a_plot():
    points = [{"x": n, "y": 0.0 if n <= 1024 else 6e-4} for n in (1, 512, 1024, 1025, 2048)]
    doc = document([result("k", "shape:beyond-block", "wrong", details={"series": points, "max_abs_err": 6e-4})])
    detail = parse(render_html(doc)).find("section", cls="detail")
    svg = detail.find("svg", cls="plot")
    assert len(svg.find("polyline").attrs["points"].split()) == 5
    assert len(svg.find_all("circle")) == 5
    assert "error vs size" in svg.text()


@pytest.mark.parametrize("series", [None, [], "x", [{"x": "a", "y": 1}], [{"x": float("nan"), "y": 1}], [1, 2]],
                         ids=["none", "empty", "string", "text-x", "nan-x", "numbers"])
def test_missing_or_malformed_series_renders_no_plot(series):
    details = {} if series is None else {"series": series}
    doc = document([result("k", "shape:tiny", "wrong", details=details)])
    assert "<svg" not in render_html(doc)


def test_minimal_results_render():
    doc = document([{"subject": "k", "cell": "memory", "outcome": "honoured"}])
    doc["environment"] = {}
    page = parse(render_html(doc))
    assert len(page.find_all("tr", cls="subject")) == 1


def test_empty_document_says_so():
    page = parse(render_html(document([])))
    assert not page.find_all("table", cls="matrix")
    assert "holds no cells" in page.text()


def test_write_html_writes_the_page(tmp_path):
    path = write_html(str(tmp_path / "sub" / "report.html"), small_document())
    text = open(path, encoding="utf-8").read()
    assert text.startswith("<!DOCTYPE html>") and html.escape("softmax_block1024") in text
