"""A real interpreter run of two softmax cells through ``triton-conformance run``.

The run writes results.json and results.html; the reproducer taken from the
HTML reproduces the BLOCK_SIZE=1024 bug on its own, and the diff of the buggy
softmax against the correct one has exactly the one regression.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.reports._page import parse
from triton_conformance.options import EXIT_USAGE
from triton_conformance.reports.diff import diff_documents

ROOT = Path(__file__).resolve().parents[2]


def _clean_env() -> dict[str, str]:
    # The outer pytest (maybe an xdist worker) must not leak into the inner runs.
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TRITON_INTERPRET"))}


def test_a_real_run_its_html_reproducer_and_diff(tmp_path):
    # One test, so that the run happens once even when xdist spreads the tests over workers.
    run = _run(tmp_path)
    check_the_html_is_beside_the_json(run)
    check_the_reproducer_from_the_html_reproduces_the_bug(run)
    check_the_diff_of_the_buggy_softmax_against_the_correct_one(run)


def _run(out: Path) -> tuple[Path, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "triton_conformance.cli", "run", "--results", str(out / "results.json"),
         "--", "-k", "softmax and not autotuned and layout and contiguous"],
        cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]  # the bug is a known one: xfail
    return out, proc.stdout


def check_the_html_is_beside_the_json(run):
    out, stdout = run
    assert f"report: {out / 'results.html'}" in stdout
    page = parse((out / "results.html").read_text(encoding="utf-8"))
    rows = page.find_all("tr", cls="subject")
    assert [r.attrs["data-subject"] for r in rows] == ["softmax", "softmax_block1024"]
    assert [td.attrs["data-outcome"] for r in rows for td in r.find_all("td", cls="cell")] == ["honoured", "wrong"]


def check_the_reproducer_from_the_html_reproduces_the_bug(run):
    out, _ = run
    page = parse((out / "results.html").read_text(encoding="utf-8"))
    detail = next(s for s in page.find_all("section", cls="detail")
                  if s.find("h2").text() == "softmax_block1024[layout:contiguous]")
    snippet = detail.find("pre", cls="reproducer").text()
    assert "'N': 1025" in snippet, "shrunk to the first column past the block"
    # As a user would: pasted into python at the project root, where the kernel modules import.
    proc = subprocess.run([sys.executable, "-"], input=snippet, cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(_clean_env(), TRITON_INTERPRET="1"))
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_conformance.errors.StillFails: softmax_block1024: wrong (mismatch)"), \
        proc.stderr[-2000:]


def check_the_diff_of_the_buggy_softmax_against_the_correct_one(run):
    out, _ = run
    doc = json.loads((out / "results.json").read_text())
    good = copy.deepcopy(doc)
    good["results"] = [r for r in doc["results"] if r["subject"] == "softmax"]
    bad = copy.deepcopy(doc)
    bad["results"] = [dict(r, subject="softmax") for r in doc["results"] if r["subject"] == "softmax_block1024"]
    diff = diff_documents(good, bad)
    assert [(c.subject, c.cell, c.old, c.new, c.finding) for c in diff.regressions] == [
        ("softmax", "layout:contiguous", "honoured", "wrong", "mismatch")]
    assert not (diff.fixes or diff.changed or diff.new_cells or diff.removed_cells)
    proc = subprocess.run([sys.executable, "-m", "triton_conformance.cli", "diff", "-", "-"], capture_output=True,
                          text=True, timeout=60, env=_clean_env(), cwd=ROOT)
    assert proc.returncode == EXIT_USAGE  # "-" is no file: a usage error, not a regression
