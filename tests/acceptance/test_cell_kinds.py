"""A cell kind is one module: registered once, it shows in collection, the matrix, the JSON and the report.

Also the oracle that raises: a mistake in the declaration gets an outcome
of its own, never a verdict about the kernel.
"""

from __future__ import annotations

import json
import textwrap

import pytest

# One file, registered in exactly one place (the decorator): the subject module imports it.
TOY_KIND = '''
from triton_conformance.conformance.kinds import CellKind, register_kind
from triton_conformance.conformance.results import cell_result
from triton_conformance.model.cells import CellClass, Dimension


@register_kind
class ParityCells(CellKind):
    """Calls the launcher on an even and an odd length and compares with the oracle."""

    dimension = Dimension("parity", "lengths of one parity", (
        CellClass("even", "an even length: 8"), CellClass("odd", "an odd length: 9")))

    def run(self, context, value):
        import torch

        n = 8 if value == "even" else 9
        x = torch.arange(n, dtype=torch.float32)
        found = context.judge.compare({"x": x}, {"N": n}, {"x": "float32"}, {}, (context.subject.launcher(x=x),))
        if found is not None:
            return cell_result(context.subject, context.cell, found.outcome, found.message, finding=found.kind)
        return cell_result(context.subject, context.cell, "honoured", f"N={n} matches the oracle")
'''

SUBJECTS = '''
import toy_kind  # noqa: F401  - registers the parity cells
import torch
from triton_conformance import Dim, Tensor, subject


@subject(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="toy")
def doubles(x):
    return x * 2


@subject(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="toy")
def doubles_all_but_odd(x):
    return x * 2 if x.shape[0] % 2 == 0 else x * 2 + 1


def broken_oracle(x):
    return x.no_such_method()


@subject(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)}, oracle=broken_oracle, family="toy")
def doubles_with_a_broken_oracle(x):
    return x * 2
'''


def _run(pytester: pytest.Pytester, *args: str):
    pytester.makepyfile(toy_kind=textwrap.dedent(TOY_KIND), toy_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest("def pytest_conformance_modules(config):\n    return ['toy_subjects']\n")
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-profile=ci", *args)
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    return result, doc, {(r["subject"], r["cell"]): r for r in doc["results"]}


def test_a_toy_kind_runs_and_reaches_the_matrix_the_json_and_the_report(pytester: pytest.Pytester) -> None:
    result, doc, cells = _run(pytester, "-k", "parity or layout and contiguous")
    assert cells[("doubles", "parity:even")]["outcome"] == "honoured"
    assert cells[("doubles", "parity:odd")]["outcome"] == "honoured"
    assert cells[("doubles_all_but_odd", "parity:even")]["outcome"] == "honoured"
    assert (cells[("doubles_all_but_odd", "parity:odd")]["outcome"],
            cells[("doubles_all_but_odd", "parity:odd")]["finding"]) == ("wrong", "mismatch")
    result.stdout.fnmatch_lines(["*conformance matrix*", "*parity*", "*doubles_all_but_odd*"])
    catalogue = {d["name"]: d for d in doc["cells"]}
    assert list(catalogue)[-1] == "parity"  # registered last, so last in the matrix
    assert catalogue["parity"]["classes"] == [["even", "an even length: 8"], ["odd", "an odd length: 9"]]
    from triton_conformance.reports.html import render_html

    page = render_html(doc)
    assert "parity" in page and "an odd length: 9" in page


def test_an_oracle_that_raises_is_an_error_of_the_declaration_not_of_the_kernel(pytester: pytest.Pytester) -> None:
    result, _, cells = _run(pytester, "-k", "broken_oracle and layout and contiguous")
    cell = cells[("doubles_with_a_broken_oracle", "layout:contiguous")]
    assert (cell["outcome"], cell["finding"]) == ("oracle-error", "oracle-raised")
    assert "the subject's oracle raised AttributeError" in cell["message"]
    assert "no_such_method" in cell["details"]["traceback"]
    assert cell["reproducer"] is None and cell["counterexample"] is None  # nothing about the kernel
    assert result.ret == 1  # it must be fixed, so the run is not green
