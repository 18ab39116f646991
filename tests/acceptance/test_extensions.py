"""A judging rule and a report format are each one module, as a cell kind is (test_cell_kinds.py).

- The rule: an argmax whose ties may go to any of the tied positions.  The
  default tolerance rule fails a kernel that breaks ties the other way; with
  the rule's module imported that kernel passes, and a kernel that returns a
  position that is not a maximum still fails.
- The format: CSV rows of (subject, cell, outcome), written by
  ``triton-conformance report --format csv --format-module ...``.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap

import pytest

from tests.reports._documents import document, result
from triton_conformance.options import EXIT_USAGE

ARGMAX_RULE = '''
import torch

from triton_conformance.conformance.rules import JudgingRule, register_rule
from triton_conformance.model.outcomes import Finding


@register_rule
class AnyTiedArgmax(JudgingRule):
    """An index output is right when it points at a maximum of its row (ties: any of them)."""

    name = "any-tied-argmax"

    def applies(self, subject):
        return subject.family == "argmax"

    def check(self, output):
        x = output.inputs["x"].to(torch.float64)
        picked = x.gather(-1, output.out.long().unsqueeze(-1)).squeeze(-1)
        short = picked < x.amax(-1)
        if bool(short.any()):
            row = int(torch.nonzero(short)[0, 0])
            return Finding("wrong", "not-a-maximum", f"{output.name}: row {row} points at {float(picked[row])}, "
                           f"below the row's maximum {float(x[row].max())}")
        return None
'''

SUBJECTS = '''
import os

import torch
from triton_conformance import Dim, Tensor, subject

if os.environ.get("WITH_ARGMAX_RULE"):
    import argmax_rule  # noqa: F401  - registers the rule

ARGMAX = dict(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 8), "N": Dim(1, 32)}, values=("ties",),
              oracle=lambda x: torch.argmax(x, -1).to(torch.float64), family="argmax")


@subject(**ARGMAX)
def argmax_last_tie(x):
    flipped = torch.flip(x, (-1,))
    return (x.shape[-1] - 1 - torch.argmax(flipped, -1)).to(torch.float32)


@subject(**ARGMAX)
def argmax_off_by_one(x):
    return torch.clamp(torch.argmax(x, -1) + 1, max=x.shape[-1] - 1).to(torch.float32)
'''


def _run(pytester: pytest.Pytester) -> dict:
    pytester.makepyfile(argmax_rule=textwrap.dedent(ARGMAX_RULE), argmax_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest("def pytest_conformance_modules(config):\n    return ['argmax_subjects']\n")
    pytester.runpytest_subprocess("--conformance-only", "--conformance-profile=ci", "-k", "values")
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    return {(r["subject"], r["cell"]): (r["outcome"], r["finding"]) for r in doc["results"]}


def test_a_judging_rule_in_one_module_judges_its_subjects(pytester: pytest.Pytester, monkeypatch) -> None:
    without = _run(pytester)
    assert without[("argmax_last_tie", "values:ties")] == ("wrong", "mismatch")  # the tolerance rule
    monkeypatch.setenv("WITH_ARGMAX_RULE", "1")
    with_rule = _run(pytester)
    assert with_rule[("argmax_last_tie", "values:ties")][0] == "honoured"
    assert with_rule[("argmax_off_by_one", "values:ties")] == ("wrong", "not-a-maximum")


CSV_FORMAT = '''
import csv
import io

from triton_conformance.reports.formats import ReportFormat, register_format


def render(document, baseline):
    out = io.StringIO()
    rows = csv.writer(out)
    rows.writerow(["subject", "cell", "outcome"])
    for r in document["results"]:
        rows.writerow([r["subject"], r["cell"], r["outcome"]])
    return out.getvalue()


register_format(ReportFormat("csv", ".csv", render, "one row per cell"))
'''


def test_a_report_format_in_one_module_is_written_by_the_report_command(tmp_path) -> None:
    (tmp_path / "csv_format.py").write_text(CSV_FORMAT)
    doc = document([result("add", "layout:contiguous", "honoured"), result("add", "shape:tiny", "wrong")])
    (tmp_path / "results.json").write_text(json.dumps(doc))
    cli = [sys.executable, "-m", "triton_conformance.cli", "report", "results.json"]
    done = subprocess.run([*cli, "--format", "csv", "--format-module", "csv_format"], cwd=tmp_path,
                          capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": ""})
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "results.csv", newline="") as fh:
        assert list(csv.reader(fh)) == [["subject", "cell", "outcome"], ["add", "layout:contiguous", "honoured"],
                                        ["add", "shape:tiny", "wrong"]]
    unknown = subprocess.run([*cli, "--format", "pdf"], cwd=tmp_path, capture_output=True, text=True)
    assert unknown.returncode == EXIT_USAGE
    assert unknown.stderr.strip().splitlines() == [
        "triton-conformance report: format='pdf', expected one of ['html', 'text'] (a format of your own: "
        "--format-module)"]
