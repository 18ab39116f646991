"""Merging results files (issue 15 section 3): shards into one run, devices into a cross-device matrix."""

from __future__ import annotations

import json
import re

import pytest

from tests.reports._documents import document, result
from triton_conformance.cli import main
from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.combine import MergeConflict, divergences, merge_results
from triton_conformance.reports.diff import diff_documents
from triton_conformance.reports.html import render_html
from triton_conformance.reports.results_json import check_cells, read_results
from triton_conformance.reports.terminal import document_lines
from triton_conformance.options import EXIT_USAGE


def _interpreter() -> dict:
    return document([result("add", "layout:contiguous", "honoured"),
                     result("add", "layout:transposed", "honoured"),
                     result("add", "dtype:bfloat16", "skipped"),
                     result("add", "dtype:float16", "rejected"),
                     result("softmax", "shape:tiny", "honoured", family="norm")],
                    device="interpreter", device_label="interpreter")


def _cuda() -> dict:
    return document([result("add", "layout:contiguous", "honoured"),
                     result("add", "layout:transposed", "wrong"),  # the divergent cell
                     result("add", "dtype:bfloat16", "honoured"),  # skipped on the CPU: not a divergence
                     result("add", "dtype:float16", "rejected"),
                     result("softmax", "shape:tiny", "honoured", family="norm")],
                    device="cuda", device_name="NVIDIA H200", device_label=None, host="gpu-host",
                    torch="2.13.0+cu128")


def _write(tmp_path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


# -- the cross-device matrix ------------------------------------------------------


def test_two_devices_make_a_matrix_with_a_device_on_every_cell() -> None:
    doc = merge_results([("cpu.json", _interpreter()), ("h200.json", _cuda())])
    assert [d["device"] for d in doc["devices"]] == ["interpreter", "H200"]
    assert doc["devices"][1]["environment"]["host"] == "gpu-host" and doc["devices"][1]["files"] == ["h200.json"]
    assert [d["cells"] for d in doc["devices"]] == [5, 5]
    assert len(doc["results"]) == 10 and {r["device"] for r in doc["results"]} == {"interpreter", "H200"}
    assert doc["environment"]["device"] == "interpreter+H200"
    assert doc["environment"]["commit"] == "abc1234", "what the devices share stays"
    assert "host" not in doc["environment"], "what they do not share is in each device's environment"
    assert doc["summary"]["honoured"] == 6 and doc["summary"]["wrong"] == 1 and doc["summary"]["skipped"] == 1


def test_a_cell_honoured_on_one_device_and_failing_on_another_is_a_divergence() -> None:
    doc = merge_results([("cpu.json", _interpreter()), ("h200.json", _cuda())])
    assert doc["divergences"] == [{"subject": "add", "family": "fam", "cell": "layout:transposed", "kind": "verdict",
                                   "outcomes": {"interpreter": "honoured", "H200": "wrong"},
                                   "findings": {"H200": "mismatch"}, "dims": {"N": 1025, "M": 1}}]
    assert divergences(doc) == doc["divergences"]
    # Refused on one device, computed on the other: the outcomes differ, no verdict does.
    other = _cuda()
    other["results"][3]["outcome"] = "accepted"
    (d,) = [d for d in merge_results([("a", _interpreter()), ("b", other)])["divergences"]
            if d["cell"] == "dtype:float16"]
    assert d["kind"] == "outcome"


def test_the_matrix_is_readable_by_the_existing_readers(tmp_path) -> None:
    assert main(["merge", _write(tmp_path, "cpu.json", _interpreter()), _write(tmp_path, "h200.json", _cuda()),
                 "-o", str(tmp_path / "matrix.json"), "--html"]) == 0
    doc = check_cells(read_results(str(tmp_path / "matrix.json")), "matrix.json")
    assert doc["schema"] == "triton-conformance/results" and doc["version"] == 1
    assert all(CellResult.from_dict(r).subject for r in doc["results"])
    page = (tmp_path / "matrix.html").read_text()
    assert 'id="device-filter"' in page


def test_show_prints_a_matrix_per_device_and_the_divergences(tmp_path, capsys) -> None:
    doc = merge_results([("cpu.json", _interpreter()), ("h200.json", _cuda())])
    lines = document_lines(doc)
    assert lines[0] == "cross-device matrix: 2 devices (interpreter, H200)"
    heads = [line for line in lines if line.startswith("== device ")]
    assert heads == ["== device interpreter (cpu (Triton interpreter), triton 3.9.0, torch 2.13.0): 5 cells ==",
                     "== device H200 (NVIDIA H200, triton 3.9.0, torch 2.13.0+cu128): 5 cells =="]
    assert lines[-2:] == ["device divergences (1):",
                          "  add[layout:transposed]: honoured on interpreter, wrong (mismatch) on H200 at "
                          "dims={'N': 1025, 'M': 1} (verdicts differ)"]
    assert main(["show", _write(tmp_path, "m.json", doc)]) == 0
    assert "device divergences (1):" in capsys.readouterr().out


def test_the_diff_summary_shows_divergences_and_changes_per_device() -> None:
    old = merge_results([("cpu.json", _interpreter()), ("h200.json", _interpreter() | {
        "environment": dict(_cuda()["environment"])})])
    new = merge_results([("cpu.json", _interpreter()), ("h200.json", _cuda())])
    diff = diff_documents(old, new)
    assert [c.line() for c in diff.regressions] == ["add[layout:transposed] on H200: honoured -> wrong (mismatch)"]
    assert [c.line() for c in diff.changed] == ["add[dtype:bfloat16] on H200: skipped -> honoured"]
    lines = diff.summary_lines()
    assert lines[2] == "1 regression, 1 other change, 1 device divergence"
    assert lines[-2:] == ["device divergences (verdicts that differ between the devices):",
                          "  add[layout:transposed]: honoured on interpreter, wrong (mismatch) on H200 at "
                          "dims={'N': 1025, 'M': 1} (verdicts differ)"]
    assert diff_documents(_interpreter(), _interpreter()).divergences == []


def test_the_html_has_a_device_filter_sub_rows_and_a_divergence_row() -> None:
    page = render_html(merge_results([("cpu.json", _interpreter()), ("h200.json", _cuda())]))
    assert re.search(r'<select id="device-filter"><option value="">all</option><option value="interpreter">'
                     r'interpreter</option><option value="H200">H200</option></select>', page)
    rows = re.findall(r'<tr class="subject" data-subject="([^"]+)" data-known="0" data-device="([^"]+)"', page)
    assert rows == [("add", "interpreter"), ("add", "H200"), ("softmax", "interpreter"), ("softmax", "H200")]
    assert page.count('<tr class="divergence" data-subject="add">') == 1
    assert page.count('class="cell divergence-mark"') == 1 and "\u2260</a>" in page
    assert '<h2>Device divergences (1)</h2>' in page
    assert "add[layout:transposed]: honoured on interpreter, wrong (mismatch) on H200" in page
    assert "add[layout:transposed] on H200" in page, "the failing list names the device"
    single = render_html(_interpreter())
    assert 'id="device-filter"' not in single and "Device divergences" not in single and 'data-device=' not in single


# -- one run's shards --------------------------------------------------------------


def _shards() -> list[tuple[str, dict]]:
    whole = _interpreter()
    first = document(whole["results"][:2], device="interpreter", device_label="interpreter", shard="1/2")
    second = document(whole["results"][2:], device="interpreter", device_label="interpreter", shard="2/2")
    return [("shard1.json", first), ("shard2.json", second)]


def test_the_shards_of_a_run_merge_into_an_ordinary_document() -> None:
    doc = merge_results(_shards())
    whole = _interpreter()
    assert "devices" not in doc and "divergences" not in doc
    assert all("device" not in r for r in doc["results"])
    assert sorted((r["subject"], r["cell"], r["outcome"]) for r in doc["results"]) == sorted(
        (r["subject"], r["cell"], r["outcome"]) for r in whole["results"])
    assert "shard" not in doc["environment"] and doc["environment"]["device"] == "interpreter"
    assert {k: v for k, v in doc["summary"].items() if v} == {"honoured": 3, "skipped": 1, "rejected": 1}
    assert doc["merged"] == {"files": ["shard1.json", "shard2.json"], "mixed": [], "missing_shards": []}
    assert document_lines(doc)[1].split() == ["layout", "dtype", "shape"]


def test_a_missing_shard_is_reported(tmp_path, capsys) -> None:
    (first, _) = _shards()
    assert merge_results([first])["merged"]["missing_shards"] == ["interpreter: shard 2/2 missing"]
    assert main(["merge", _write(tmp_path, "s1.json", first[1]), "-o", str(tmp_path / "m.json")]) == 0
    assert "warning: interpreter: shard 2/2 missing" in capsys.readouterr().err


# -- what merge refuses ---------------------------------------------------------


def test_files_of_different_commits_are_refused_naming_them(tmp_path, capsys) -> None:
    (a, b) = _shards()
    b[1]["environment"]["commit"] = "fff9999"
    with pytest.raises(MergeConflict) as info:
        merge_results([a, b])
    assert str(info.value) == ("the files are not parts of one run: commit differs: 'abc1234' in shard1.json; "
                               "'fff9999' in shard2.json (pass --allow-mixed to merge them anyway)")
    assert merge_results([a, b], allow_mixed=True)["merged"]["mixed"] == [
        "commit differs: 'abc1234' in shard1.json; 'fff9999' in shard2.json"]
    paths = [_write(tmp_path, "s1.json", a[1]), _write(tmp_path, "s2.json", b[1])]
    assert main(["merge", *paths, "-o", str(tmp_path / "m.json")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("triton-conformance merge: the files are not parts of one run: commit differs")
    assert paths[0] in err and paths[1] in err and not (tmp_path / "m.json").exists()
    assert main(["merge", *paths, "-o", str(tmp_path / "m.json"), "--allow-mixed"]) == 0


def test_one_cell_with_two_outcomes_on_one_device_is_refused() -> None:
    first = _interpreter()
    second = _interpreter()
    second["results"][0]["outcome"] = "wrong"
    with pytest.raises(MergeConflict) as info:
        merge_results([("a.json", first), ("b.json", second)])
    assert str(info.value) == ("conflicting results: add[layout:contiguous] on interpreter is honoured in a.json "
                               "and wrong in b.json; expected each cell once per device (pass --allow-mixed to "
                               "let the later file win)")
    doc = merge_results([("a.json", first), ("b.json", second)], allow_mixed=True)
    assert next(r for r in doc["results"] if r["cell"] == "layout:contiguous")["outcome"] == "wrong"
    # The same outcome twice (a cell re-run) is no conflict.
    assert len(merge_results([("a.json", first), ("c.json", _interpreter())])["results"]) == 5


def test_a_file_of_another_schema_version_is_refused_naming_it(tmp_path, capsys) -> None:
    newer = _interpreter() | {"version": 2}
    paths = [_write(tmp_path, "a.json", _interpreter()), _write(tmp_path, "b.json", newer)]
    assert main(["merge", *paths, "-o", str(tmp_path / "m.json")]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == f"triton-conformance merge: results file {paths[1]!r}: version=2, expected 1"
    with pytest.raises(MergeConflict, match=r"version differs: 1 in a.json; 2 in b.json"):
        merge_results([("a.json", _interpreter()), ("b.json", newer)])


def test_merged_files_keep_each_runs_description_and_every_files_catalogue() -> None:
    from triton_conformance.model.cells import Catalogue, CellClass, Dimension

    (a, b) = _shards()
    extra = Dimension("toy", "a kind only the second file's engine had", (CellClass("", "TOY TEXT"),))
    b[1]["cells"] = Catalogue(Catalogue.from_dict(b[1]["cells"]).dimensions + (extra,)).to_dict()
    doc = merge_results([a, b])
    assert [(r["id"], r["file"], r["profile"], r["commit"], r["cells"]) for r in doc["runs"]] == [
        ("2026-11-30T12:00:00+00:00", "shard1.json", "ci", "abc1234", 2),
        ("2026-11-30T12:00:00+00:00#2", "shard2.json", "ci", "abc1234", 3)]
    assert Catalogue.from_dict(doc["cells"]).describe("toy") == "TOY TEXT"
    assert Catalogue.from_dict(doc["cells"]).sorted(["toy", "layout:contiguous"]) == ["layout:contiguous", "toy"]
