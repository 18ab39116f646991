"""The real-run fixture (data/softmax-interpreter.json) has the shape the current runner writes.

The fixture was written by a real interpreter run::

    pytest --conformance-only -q -n 2 -k "softmax and not autotuned" --conformance-history=none \
        --conformance-results=/tmp/softmax.json -p no:cacheprovider

If the runner starts writing other keys (as when counterexamples gained
``"tensors"`` and the report still read ``"strides"``), these tests fail
until the fixture is made again the same way, and the report is taught to
read what is new.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.reports._page import parse
from triton_conformance.model.outcomes import CellResult, Counterexample, TensorView
from triton_conformance.model.spec import Spec, strides_for
from triton_conformance.reports.html import render_html
from triton_conformance.reports.results_json import environment, results_document

SNAPSHOT = Path(__file__).parent / "data" / "softmax-interpreter.json"


@pytest.fixture(scope="module")
def fixture_doc():
    return json.loads(SNAPSHOT.read_text())


def _runner_counterexample():
    """The engine's own function that turns a failing spec into the counterexample it records."""
    from triton_conformance.conformance.results import counterexample

    return counterexample


def _as_the_session_writes(doc: dict) -> dict:
    """A fresh document through the same steps the session takes before writing results.json."""
    from triton_conformance.reports.combine import update_results

    return update_results(None, doc)


def _fresh_document() -> dict:
    spec = Spec.from_dict({"dims": {"N": 1025, "M": 1}, "dtypes": {"x": "float16"},
                           "layouts": {"x": {"kind": "padded", "pad": 1}}})
    strides, offset, _ = strides_for((1, 1025), spec.layout("x"))
    cx = Counterexample(spec.to_dict(), {"x": TensorView((1, 1025), strides, offset, "float16")})
    result = CellResult(subject="k", family="f", cell="layout:padded", outcome="wrong", finding="mismatch",
                        counterexample=cx, reproducer="replay(...)")
    env = environment(device="interpreter", profile="ci", seed=None)
    from triton_conformance.conformance.kinds import catalogue

    return _as_the_session_writes(results_document([result], env, catalogue()))


def test_the_fixture_has_the_keys_a_fresh_document_has(fixture_doc):
    fresh = _fresh_document()
    assert set(fixture_doc) == set(fresh)
    assert set(fixture_doc["environment"]) == set(fresh["environment"])
    assert set(fixture_doc["summary"]) == set(fresh["summary"])  # every outcome of today's table
    cell_keys = set(fresh["results"][0])
    for r in fixture_doc["results"]:
        assert set(r) == cell_keys, (r["subject"], r["cell"])
    tensor_keys = {f.name for f in dataclasses.fields(TensorView)}
    cx_keys = set(fresh["results"][0]["counterexample"])
    failing = [r for r in fixture_doc["results"] if r["counterexample"]]
    assert failing
    for r in failing:
        assert set(r["counterexample"]) == cx_keys, r["cell"]
        assert all(set(t) == tensor_keys for t in r["counterexample"]["tensors"].values())


def test_the_fixtures_counterexamples_are_what_the_runner_writes_for_their_specs(fixture_doc):
    pytest.importorskip("torch")
    import importlib

    import kernels_under_test.softmax as softmax_subjects
    from triton_conformance.model.subject import get_subject

    try:  # importing registers the subjects; a test before this one in the process may have cleared the registry
        get_subject("softmax_block1024")
    except KeyError:
        importlib.reload(softmax_subjects)

    counterexample = _runner_counterexample()
    checked = 0
    for r in fixture_doc["results"]:
        cx = r["counterexample"]
        if not cx or "dims" not in cx:
            continue
        subject = get_subject(r["subject"])
        again = counterexample(subject, Spec.from_dict(cx)).to_dict()
        assert json.loads(json.dumps(again)) == cx, r["cell"]
        checked += 1
    assert checked >= 10


def test_the_report_shows_the_real_strides_of_the_fixtures_inputs(fixture_doc):
    padded = next(r for r in fixture_doc["results"]
                  if r["subject"] == "softmax_block1024" and r["cell"] == "layout:padded")
    view = padded["counterexample"]["tensors"]["x"]
    assert view["strides"][0] > view["shape"][1], "a padded row is longer in memory than in the shape"
    page = parse(render_html(fixture_doc))
    detail = next(s for s in page.find_all("section", cls="detail")
                  if s.find("h2").text() == "softmax_block1024[layout:padded]")
    row = detail.find("table", cls="tensors").find("tr", data_input="x")
    cells = [td.text() for td in row.find_all("td")]
    as_text = "(" + ", ".join(str(v) for v in view["strides"]) + ")"
    assert cells == ["x", "(" + ", ".join(str(v) for v in view["shape"]) + ")", as_text,
                     str(view["storage_offset"]), view["dtype"]]
    offset = next(r for r in fixture_doc["results"]
                  if r["subject"] == "softmax_block1024" and r["cell"] == "layout:offset")
    shown = next(s for s in page.find_all("section", cls="detail")
                 if s.find("h2").text() == "softmax_block1024[layout:offset]")
    storage_offset = offset["counterexample"]["tensors"]["x"]["storage_offset"]
    assert storage_offset > 0
    assert shown.find("table", cls="tensors").find_all("td")[3].text() == str(storage_offset)


def test_every_skipped_cell_of_the_fixture_carries_the_reason_code_the_runner_writes(fixture_doc):
    """The reports group skips by their code: a fixture written before codes existed reads as ``<dim>:other``."""
    from triton_conformance.model.outcomes import SKIP_CODE

    skipped = [r for r in fixture_doc["results"] if r["outcome"] == "skipped"]
    assert skipped
    for r in skipped:
        code = r["details"].get(SKIP_CODE)
        assert isinstance(code, str) and code and not code.endswith(":other"), (r["cell"], code)
