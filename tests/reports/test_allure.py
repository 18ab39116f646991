"""Allure results: labels, parameters, attachments, status, categories and environment.

The result files are checked against Allure's documented result format (the
fields allure-python-commons' model writes and ``allure generate`` reads); if
an ``allure`` command is on PATH, the report is also generated from them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.reports._toy import ARGS, CELLS, make_project

allure_commons = pytest.importorskip("allure_commons", reason="allure-pytest is in the test extra")

from triton_conformance.model.outcomes import OUTCOMES  # noqa: E402
from triton_conformance.plugin.allure import _StatusFromOutcome  # noqa: E402
from triton_conformance.reports.allure import categories, environment_properties  # noqa: E402

# What docs/reports.md promises, written out here rather than read from the code's own table.
EXPECTED_STATUS = {"honoured": "passed", "rejected": "passed", "wrong": "failed", "unsafe": "failed",
                   "crash": "broken", "compile-error": "broken", "timeout": "broken", "skipped": "skipped",
                   "oracle-error": "broken", "harness-error": "broken", "accepted": "passed"}
# Failing outcomes a known bug excuses: the kernel's own (an oracle that raises is the declaration's mistake).
KNOWN_EXCUSES = {"wrong", "unsafe", "crash", "compile-error", "timeout"}
CATEGORIES = [
    {"name": "wrong: silently wrong numbers (or a result for an input it should have refused)",
     "messageRegex": "(?s)wrong: .*", "matchedStatuses": ["failed"]},
    {"name": "unsafe: out-of-bounds write, unwritten output, read outside the inputs, or a mutated input",
     "messageRegex": "(?s)unsafe: .*", "matchedStatuses": ["failed"]},
    {"name": "crash: an exception, abort or lost CUDA context on an input inside the contract",
     "messageRegex": "(?s)crash: .*", "matchedStatuses": ["broken"]},
    {"name": "compile-error: the kernel failed to compile (shared memory, registers, static_assert, ptxas)",
     "messageRegex": "(?s)compile-error: .*", "matchedStatuses": ["broken"]},
    {"name": "timeout: the cell did not finish in time", "messageRegex": "(?s)timeout: .*",
     "matchedStatuses": ["broken"]},
    {"name": "oracle-error: the subject's own oracle or error_scale raised: a mistake in the declaration, "
             "not a kernel verdict", "messageRegex": "(?s)oracle-error: .*", "matchedStatuses": ["broken"]},
    {"name": "harness-error: triton-conformance's own code raised while running the cell: our bug, not a kernel "
             "verdict (its traceback says where; please report it)", "messageRegex": "(?s)harness-error: .*",
     "matchedStatuses": ["broken"]},
    {"name": "known bug (xfail subject)", "messageRegex": "(?s)known bug.*", "matchedStatuses": ["skipped"]},
    {"name": "an error outside any cell (a test of your own, or the plugin)", "matchedStatuses": ["broken", "failed"]},
]

STATUSES = {"passed", "failed", "broken", "skipped", "unknown"}
RESULT_FIELDS = {"uuid", "historyId", "testCaseId", "fullName", "name", "status", "statusDetails", "stage",
                 "description", "descriptionHtml", "steps", "attachments", "parameters", "start", "stop",
                 "labels", "links", "titlePath"}


def check_result_schema(doc: dict, folder: Path) -> None:
    """Allure's result format: required keys, types, and attachments that exist."""
    assert set(doc) <= RESULT_FIELDS, set(doc) - RESULT_FIELDS
    assert isinstance(doc["uuid"], str) and isinstance(doc["name"], str) and isinstance(doc["historyId"], str)
    assert doc["status"] in STATUSES
    assert isinstance(doc["start"], int) and isinstance(doc["stop"], int) and doc["start"] <= doc["stop"]
    details = doc.get("statusDetails", {})
    assert set(details) <= {"message", "trace", "known", "muted", "flaky"}
    assert all(isinstance(details[k], str) for k in ("message", "trace") if k in details)
    assert all(isinstance(details[k], bool) for k in ("known", "muted", "flaky") if k in details)
    for label in doc.get("labels", []):
        assert set(label) <= {"name", "value"} and isinstance(label["name"], str)
    for param in doc.get("parameters", []):
        assert set(param) <= {"name", "value", "excluded", "mode"} and isinstance(param["value"], str)
        assert param.get("mode", "default") in ("default", "masked", "hidden")
    for att in doc.get("attachments", []):
        assert set(att) <= {"name", "source", "type"}
        assert (folder / att["source"]).is_file(), att


def load_results(folder: Path) -> dict[str, dict]:
    docs = [json.loads(p.read_text()) for p in folder.glob("*-result.json")]
    for doc in docs:
        check_result_schema(doc, folder)
    return {doc["name"]: doc for doc in docs}


def labels(doc: dict) -> dict[str, str]:
    return {label["name"]: label.get("value") for label in doc["labels"]}


def test_allure_results_for_each_cell(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    # One process: xdist's plumbing is the JUnit test's; the workers write here just the same.
    result = pytester.runpytest_subprocess(*ARGS, "--alluredir=allure-results")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["ALLURE-HOOKS True"])
    folder = pytester.path / "allure-results"
    docs = load_results(folder)
    assert set(docs) == {f"{s}[{c}]" for s in ("toy_double", "toy_double_off_by_one") for c in CELLS}

    for name, doc in docs.items():
        subject, cell = name[:-1].split("[")
        assert {k: labels(doc)[k] for k in ("epic", "feature", "story", "parentSuite", "suite", "subSuite")} == {
            "epic": "toy", "feature": subject, "story": cell, "parentSuite": "toy", "suite": subject,
            "subSuite": cell.split(":")[0]}
        params = {p["name"]: p for p in doc["parameters"]}
        assert set(params) == {"subject", "cell", "device", "profile", "seed", "host"}
        assert {n for n, p in params.items() if p.get("excluded")} == {"seed", "host"}
    assert len({doc["historyId"] for doc in docs.values()}) == len(docs), "one history per cell"

    status = {name: (doc["status"], labels(doc)["outcome"]) for name, doc in docs.items()}
    assert status == {
        "toy_double[layout:contiguous]": ("passed", "honoured"),
        "toy_double[layout:transposed]": ("skipped", "skipped"),
        "toy_double[dtype:float16]": ("passed", "rejected"),
        "toy_double_off_by_one[layout:contiguous]": ("skipped", "wrong"),
        "toy_double_off_by_one[layout:transposed]": ("skipped", "skipped"),
        "toy_double_off_by_one[dtype:float16]": ("passed", "rejected"),
    }
    buggy = docs["toy_double_off_by_one[layout:contiguous]"]
    assert buggy["statusDetails"]["known"] is True
    assert buggy["statusDetails"]["message"].startswith("known bug (drops the last element past 5): wrong: mismatch")
    attached = {a["name"]: (folder / a["source"]).read_text() for a in buggy["attachments"]}
    assert "replay('toy_subjects', 'toy_double_off_by_one'" in attached["reproducer.py"]
    assert json.loads(attached["counterexample.json"])["counterexample"]["dims"] == {"N": 6}
    assert not docs["toy_double[layout:contiguous]"].get("attachments")

    assert json.loads((folder / "categories.json").read_text()) == CATEGORIES
    props = dict(line.split("=", 1) for line in (folder / "environment.properties").read_text().splitlines())
    assert props["device"] == "interpreter" and props["profile"] == "ci" and props["seed"] == "derandomized"

    allure = shutil.which("allure")
    if allure:  # the Allure 2 command line (npm allure-commandline), where installed
        out = subprocess.run([allure, "generate", str(folder), "-o", str(pytester.path / "report"), "--clean"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "successfully generated" in out.stdout, out.stdout + out.stderr
        tree = json.loads((pytester.path / "report" / "data" / "categories.json").read_text())
        assert {c["name"]: len(c["children"]) for c in tree["children"]} == {"known bug (xfail subject)": 1}


def test_every_outcome_has_an_expected_status() -> None:
    assert set(EXPECTED_STATUS) == set(OUTCOMES), "a new outcome: say here what Allure should show for it"


def test_categories_are_one_per_failing_outcome_then_known_bugs_and_harness_errors() -> None:
    assert categories() == CATEGORIES


@pytest.mark.parametrize("outcome", sorted(EXPECTED_STATUS))
@pytest.mark.parametrize("known", [False, True], ids=["plain", "known-bug"])
def test_status_and_category_follow_the_outcome(outcome: str, known: bool) -> None:
    from allure_commons.model2 import Label, StatusDetails, TestResult

    plugin = _StatusFromOutcome()
    plugin.pending[("k", "memory")] = {"subject": "k", "cell": "memory", "outcome": outcome, "finding": "f",
                                       "message": "msg", "expected_failure": "why" if known else None}
    result = TestResult(name="k[memory]", status="broken", statusDetails=StatusDetails(message="x", trace="tb"),
                        labels=[Label("feature", "k"), Label("story", "memory")])
    plugin.report_result(result)
    failing = EXPECTED_STATUS[outcome] in ("failed", "broken")
    excused = known and outcome in KNOWN_EXCUSES
    assert result.status == ("skipped" if excused else EXPECTED_STATUS[outcome])
    matched = [c["name"] for c in CATEGORIES if result.status in c["matchedStatuses"]
               and re.fullmatch(c.get("messageRegex", "(?s).*"), result.statusDetails.message or "")]
    if failing:
        assert matched[0].startswith("known bug" if excused else f"{outcome}: ")
        assert result.statusDetails.message.startswith(
            "known bug (why): " if excused else f"{outcome}: f msg")
        assert result.statusDetails.trace == "tb" and bool(result.statusDetails.known) == excused
    else:
        assert matched == []
    assert not plugin.pending


def test_environment_properties_escape_separators() -> None:
    text = environment_properties({"device": "cuda", "device_name": "H200 = fast\nnext", "seed": None,
                                   "platform": "C:\\x"})
    assert text.splitlines() == ["device=cuda", "device_name=H200 = fast\\nnext", "seed=derandomized",
                                 "platform=C:\\\\x"]
