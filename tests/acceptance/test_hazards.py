"""A kernel that crashes, one that hangs and one that fails to compile, in one run with real subjects.

The run must record each hazard as what it is (crash / timeout /
compile-error) and leave every other subject's cells exactly as a run
without the hazards reports them: nothing lost, nothing changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.hazards import HAZARDS

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = '''
def pytest_conformance_modules(config):
    return ["kernels_under_test.vector_add", "kernels_under_test.softmax"]
'''
# Two cells of each real subject, one of each hazard (a hang costs the whole timeout).
CELLS = "layout:contiguous or (shape:tiny and not hazard)"
# Long enough for the real cells' shrinking on a loaded 2-core machine, so only the hang times out: the slowest
# real cell (softmax_block1024's contiguous failure, shrunk) took 9 s at a load average of 14 on 2 cores, with
# both runs at once; the hang costs the whole timeout.
TIMEOUT = "30"


def _cells(path: Path) -> dict[tuple[str, str], dict]:
    doc = json.loads(path.read_text())
    return {(r["subject"], r["cell"]): r for r in doc["results"]}


def _argv(results: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "triton_conformance.cli", "run", "--device", "interpreter", "--profile", "ci",
            "--timeout", TIMEOUT, "--results", results, "--history", "none", "--", "-k", CELLS, "-p", "no:randomly",
            "-p", "no:cacheprovider", *extra]


@pytest.mark.slow
def test_hazards_are_recorded_and_the_other_subjects_are_untouched(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # The run without the hazards goes on while the one with them waits out its hang: the two share nothing
    # but the project (their own results files, no history, no cache).
    clean_run = subprocess.Popen(_argv("without.json"), cwd=pytester.path, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
    try:
        with_hazards = pytester.run(*_argv("with.json", "-p", "tests.hazards.plugin"), timeout=900)
        clean_out, _ = clean_run.communicate(timeout=900)
    finally:
        clean_run.kill()
    without = SimpleNamespace(ret=clean_run.returncode, output=clean_out)
    hazardous, clean = _cells(pytester.path / "with.json"), _cells(pytester.path / "without.json")

    for name, outcome in HAZARDS:
        cell = hazardous[(name, "layout:contiguous")]
        assert cell["outcome"] == outcome, cell
        assert cell["expected_failure"], "hazards are declared known (xfail), so the run still passes"
    crash = hazardous[("hazard_crash", "layout:contiguous")]
    assert crash["finding"] == "process-died" and "SIGSEGV" in crash["message"]
    assert crash["counterexample"] is not None and "hazard_crash" in crash["reproducer"]
    compile_error = hazardous[("hazard_compile", "layout:contiguous")]
    assert compile_error["finding"] == "static-assert"
    assert "tile operands exceed shared memory" in compile_error["message"]
    # The wall clock or the interpreter's cut, whichever comes first: a hang is a timeout either way.
    assert hazardous[("hazard_hang", "layout:contiguous")]["finding"] in ("timeout", "interpreter-cut")

    # Every other cell: present in both runs, with the same verdict.
    others = {k: v for k, v in hazardous.items() if not k[0].startswith("hazard_")}
    assert set(others) == set(clean) and len(clean) >= 6
    strip = lambda r: (r["outcome"], r["finding"], r["counterexample"])  # noqa: E731
    assert {k: strip(v) for k, v in others.items()} == {k: strip(v) for k, v in clean.items()}
    assert clean[("softmax_block1024", "layout:contiguous")]["outcome"] == "wrong", "a real failure is kept too"
    # Known bugs and hazards are xfail: both runs pass; the HTML report names the new outcome.
    assert with_hazards.ret == 0 and without.ret == 0, without.output[-3000:]
    page = (pytester.path / "with.html").read_text()
    assert 'data-outcome="compile-error"' in page
