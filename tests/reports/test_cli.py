"""``triton-conformance report`` and ``diff``: outputs, exit statuses, and errors for bad files."""

from __future__ import annotations

import json

import pytest

from tests.reports._documents import document, result
from triton_conformance.cli import main
from triton_conformance.running import html_path_for
from triton_conformance.options import EXIT_USAGE


@pytest.fixture
def files(tmp_path):
    old = document([result("k", "memory", "honoured"), result("k", "shape:tiny", "wrong")])
    new = document([result("k", "memory", "wrong"), result("k", "shape:tiny", "honoured")])
    fixed = document([result("k", "memory", "honoured"), result("k", "shape:tiny", "honoured")])
    paths = {}
    for name, doc in (("old", old), ("new", new), ("fixed", fixed)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    paths["malformed"] = tmp_path / "malformed.json"
    paths["malformed"].write_text("{not json")
    paths["v2"] = tmp_path / "v2.json"
    paths["v2"].write_text(json.dumps(dict(old, version=2)))
    paths["foreign"] = tmp_path / "foreign.json"
    paths["foreign"].write_text(json.dumps({"schema": "pytest-benchmark", "version": 1}))
    paths["cellless"] = tmp_path / "cellless.json"
    paths["cellless"].write_text(json.dumps(dict(old, results=[{"subject": "k", "cell": "memory"}])))
    paths["missing"] = tmp_path / "missing.json"
    return {k: str(v) for k, v in paths.items()}


def test_report_writes_html_beside_the_results_by_default(files, capsys):
    assert main(["report", files["new"]]) == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith("new.html") and out == html_path_for(files["new"])
    assert open(out, encoding="utf-8").read().startswith("<!DOCTYPE html>")


def test_report_with_output_and_baseline_shows_the_diff(files, tmp_path, capsys):
    target = tmp_path / "out" / "page.html"
    assert main(["report", files["new"], "-o", str(target), "--baseline", files["old"]]) == 0
    page = target.read_text()
    assert 'id="diff"' in page and "k[memory]: honoured -&gt; wrong (mismatch)" in page
    assert main(["report", files["new"], "-o", str(tmp_path / "plain.html")]) == 0
    assert 'id="diff"' not in (tmp_path / "plain.html").read_text()


def test_diff_exit_status_is_one_on_regressions_only(files, capsys):
    assert main(["diff", files["old"], files["new"]]) == 1
    text = capsys.readouterr().out
    assert "\n1 regression, 1 fix\n" in text and "k[memory]: honoured -> wrong (mismatch)" in text
    assert main(["diff", files["old"], files["fixed"]]) == 0
    assert "\n0 regressions, 1 fix\n" in capsys.readouterr().out
    assert main(["diff", files["old"], files["old"]]) == 0
    assert capsys.readouterr().out.endswith("\n0 regressions; no changes\n")


def test_diff_json(files, capsys):
    assert main(["diff", files["old"], files["new"], "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(c["subject"], c["cell"], c["old"], c["new"]) for c in data["regressions"]] == [
        ("k", "memory", "honoured", "wrong")]


@pytest.mark.parametrize(("bad", "message"), [
    ("missing", "missing.json' does not exist"),
    ("malformed", "malformed.json' is not valid JSON"),
    ("v2", "version=2, expected 1"),
    ("foreign", "schema='pytest-benchmark', expected 'triton-conformance/results'"),
    ("cellless", "results[0] lacks a subject, cell or outcome string"),
])
@pytest.mark.parametrize("command", ["report", "report-baseline", "diff-old", "diff-new", "show"])
def test_bad_files_exit_with_the_usage_status_and_the_reason(files, capsys, bad, message, command):
    argv = {"report": ["report", files[bad]],
            "report-baseline": ["report", files["new"], "--baseline", files[bad]],
            "diff-old": ["diff", files[bad], files["new"]],
            "diff-new": ["diff", files["old"], files[bad]],
            "show": ["show", files[bad]]}[command]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"triton-conformance {command.split('-')[0]}: ") and message in err


def test_html_path_for():
    assert html_path_for("a/results.json") == "a/results.html"
    assert html_path_for("a/results") == "a/results.html"


def test_run_does_not_rewrite_asserts_unless_the_caller_asks(monkeypatch):
    """pytest's assertion rewriting of the plugin's modules is start-up cost no conformance verdict uses; a
    caller's own --assert, after ``--``, still decides (pytest takes the last)."""
    seen: list[list[str]] = []
    monkeypatch.setattr("triton_conformance.running._pytest", lambda command, argv, baseline: seen.append(argv) or 0)
    assert main(["run", "--cell", "add"]) == 0
    assert main(["run", "--cell", "add", "--", "--assert=rewrite"]) == 0
    plain, asked = seen
    assert [a for a in plain if a.startswith("--assert")] == ["--assert=plain"]
    assert [a for a in asked if a.startswith("--assert")][-1] == "--assert=rewrite"
