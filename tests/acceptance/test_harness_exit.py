"""A harness error, end to end: a broken kind in a cell worker makes a harness-error cell, said apart from
every verdict, and the run's own exit status (6), even for a known-buggy subject."""

from __future__ import annotations

import json
import textwrap

import pytest

from triton_conformance.options import EXIT_HARNESS_ERROR

BROKEN_KIND = '''
from triton_conformance.conformance.kinds import CellKind, register_kind
from triton_conformance.model.cells import CellClass, Dimension


@register_kind
class BrokenCells(CellKind):
    dimension = Dimension("broken", "a kind with a bug of its own", (CellClass("ours", "raises by itself"),))

    def run(self, context, value):
        return {}["a key our code forgot"]
'''

SUBJECTS = '''
import broken_kind  # noqa: F401  - registers the broken cells (in every cell worker too)
from triton_conformance import Dim, Tensor, subject


@subject(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="toy",
         xfail="a known bug excuses the kernel's failures, not ours")
def doubles(x):
    return x * 2
'''


def test_a_harness_error_is_said_apart_and_has_its_own_exit_status(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(broken_kind=textwrap.dedent(BROKEN_KIND), toy_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest("def pytest_conformance_modules(config):\n    return ['toy_subjects']\n")
    result = pytester.runpytest_subprocess("--conformance-only", "-k", "broken or layout and contiguous",
                                           "-p", "no:randomly")
    assert result.ret == EXIT_HARNESS_ERROR
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    cells = {r["cell"]: r for r in doc["results"]}
    broken = cells["broken:ours"]
    assert (broken["outcome"], broken["finding"]) == ("harness-error", "harness-raised")
    assert "KeyError" in broken["details"]["traceback"] and "a key our code forgot" in broken["details"]["traceback"]
    assert cells["layout:contiguous"]["outcome"] == "honoured"
    assert doc["summary"]["harness-error"] == 1 and doc["summary"]["crash"] == 0  # never the kernel's crash
    result.stdout.fnmatch_lines([
        "not verdicts about the kernel (a mistake in a declaration, or a bug in triton-conformance):",
        "  doubles[[]broken:ours[]]: harness-error (harness-raised): triton-conformance's own code raised KeyError*",
        "1 harness error: triton-conformance's own code raised, a bug in triton-conformance and no verdict about "
        "the kernels; please report it*the run exits with status 6",
    ])
    result.assert_outcomes(passed=1, failed=1)  # not xfailed: the subject's known bug does not excuse it
