"""The nightly diff: regressions, fixes, other changes, new and removed subjects and cells."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests.reports._documents import document, result
from triton_conformance.reports.diff import CellChange, diff_documents

SNAPSHOT = Path(__file__).parent / "data" / "softmax-interpreter.json"


def pairs(changes):
    return [(c.subject, c.cell, c.old, c.new) for c in changes]


def test_each_kind_of_change_is_sorted_into_its_list():
    old = document([
        result("a", "layout:contiguous", "honoured"), result("a", "dtype:float16", "rejected"),
        result("a", "shape:tiny", "wrong"), result("a", "memory", "honoured"), result("a", "values:nan", "wrong"),
        result("a", "determinism", "honoured"), result("a", "shape:empty", "skipped"),
        result("gone", "memory", "honoured"),
    ])
    new = document([
        result("a", "layout:contiguous", "wrong"), result("a", "dtype:float16", "crash"),
        result("a", "shape:tiny", "honoured"), result("a", "memory", "skipped"), result("a", "values:nan", "unsafe"),
        result("a", "mask:causal", "honoured"), result("a", "shape:empty", "timeout"),
        result("born", "memory", "wrong"),
    ])
    diff = diff_documents(old, new)
    assert pairs(diff.regressions) == [("a", "dtype:float16", "rejected", "crash"),
                                       ("a", "layout:contiguous", "honoured", "wrong")]
    assert pairs(diff.fixes) == [("a", "shape:tiny", "wrong", "honoured")]
    # A skipped cell that now fails is a change, not a regression: it never passed a check.
    assert pairs(diff.changed) == [("a", "memory", "honoured", "skipped"), ("a", "shape:empty", "skipped", "timeout"),
                                   ("a", "values:nan", "wrong", "unsafe")]
    assert pairs(diff.new_cells) == [("a", "mask:causal", None, "honoured")]
    assert pairs(diff.removed_cells) == [("a", "determinism", "honoured", None)]
    assert diff.new_subjects == ["born"] and diff.removed_subjects == ["gone"]
    assert diff.has_regressions and not diff.is_empty


def test_identical_documents_have_no_changes():
    doc = document([result("a", "memory", "honoured"), result("a", "shape:tiny", "wrong")])
    diff = diff_documents(doc, copy.deepcopy(doc))
    assert diff.is_empty and not diff.has_regressions
    assert diff.summary_lines()[2:] == ["0 regressions; no changes"]


def test_summary_lines_name_each_regression_with_its_finding():
    old = document([result("a", "memory", "honoured")])
    new = document([result("a", "memory", "unsafe", finding="oob-write", expected_failure="known")])
    diff = diff_documents(old, new)
    assert diff.summary_lines() == [
        "baseline: 2026-11-30T12:00:00+00:00, cpu (Triton interpreter), commit abc1234",
        "current:  2026-11-30T12:00:00+00:00, cpu (Triton interpreter), commit abc1234",
        "1 regression",  # empty kinds are not counted: no "0 fixes, 0 other changes, ..."
        "",
        "regressions:",
        "  a[memory]: honoured -> unsafe (oob-write)  [known bug]",
    ]
    # --json: the same change, every field, through a JSON round trip.
    data = json.loads(json.dumps(diff.to_dict()))
    assert data["regressions"] == [{"subject": "a", "cell": "memory", "old": "honoured", "new": "unsafe",
                                    "finding": "oob-write", "expected_failure": "known", "note": None}]
    assert all(data[k] == [] for k in ("fixes", "changed", "new_subjects", "removed_subjects", "new_cells",
                                       "removed_cells"))
    assert data["baseline"]["environment"]["commit"] == "abc1234"


def test_summary_lines_count_only_the_kinds_of_change_present():
    old = document([result("a", "memory", "honoured"), result("a", "shape:tiny", "wrong")])
    new = document([result("a", "memory", "honoured"), result("a", "shape:tiny", "honoured"),
                    result("a", "determinism", "honoured")])
    lines = diff_documents(old, new).summary_lines()
    assert lines[2] == "0 regressions, 1 fix, 1 new cell"
    assert lines[3:] == ["", "fixes:", "  a[shape:tiny]: wrong -> honoured", "", "new cells:",
                         "  a[determinism]: (absent) -> honoured"]


def test_cell_change_line_for_absent_sides():
    assert CellChange("a", "memory", None, "honoured").line() == "a[memory]: (absent) -> honoured"


def relabel(doc, subject, as_name):
    """Only ``subject``'s cells, under the name ``as_name``."""
    out = copy.deepcopy(doc)
    out["results"] = [dict(r, subject=as_name) for r in out["results"] if r["subject"] == subject]
    return out


def test_buggy_softmax_against_the_correct_one_from_a_real_run():
    # A real interpreter run (-k softmax, profile ci): softmax and softmax_block1024's cells.
    run = json.loads(SNAPSHOT.read_text())
    good, bad = relabel(run, "softmax", "softmax"), relabel(run, "softmax_block1024", "softmax")
    diff = diff_documents(good, bad)
    # Every cell whose examples reach N > 1024 regresses; tiny keeps N <= 3, and this run's
    # values:nan examples stayed at N <= 1024.
    assert sorted(c.cell for c in diff.regressions) == sorted([
        "determinism", "dtype:float16", "dtype:float32", "layout:contiguous", "layout:mixed",
        "layout:offset", "layout:padded", "layout:sliced", "layout:transposed", "memory",
        "shape:beyond-block", "shape:non-pow2", "values:huge", "values:inf", "values:nan", "values:ties"])
    assert {(c.old, c.new) for c in diff.regressions} == {("honoured", "wrong")}
    assert {c.cell: c.finding for c in diff.regressions if c.finding != "mismatch"} == {
        "values:inf": "nan-mismatch", "values:nan": "nan-mismatch"}  # the missing column reads as 0, not NaN
    assert all(c.expected_failure for c in diff.regressions)
    assert not (diff.fixes or diff.changed or diff.new_cells or diff.removed_cells or diff.new_subjects
                or diff.removed_subjects)
    back = diff_documents(bad, good)
    assert pairs(back.fixes) == [(s, c, n, o) for s, c, o, n in pairs(diff.regressions)]
    assert not back.regressions
