"""Layering (issue 11): the model and the reports are plain data, so reading a results file needs no torch.

Each check runs in a fresh interpreter, where nothing else has imported torch or Hypothesis yet.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).parent / "data" / "softmax-interpreter.json"
HEAVY = ("torch", "hypothesis", "triton", "numpy")


def _loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_model_loads_neither_torch_nor_hypothesis():
    assert _loaded_after("import triton_conformance.model, triton_conformance.model.outcomes, "
                         "triton_conformance.model.cells, triton_conformance.model.performance") == []


def test_rendering_a_report_loads_neither_torch_nor_hypothesis():
    code = f"""
import json
from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.diff import diff_documents
from triton_conformance.reports.html import render_html
from triton_conformance.reports.terminal import matrix_lines
doc = json.load(open({str(SNAPSHOT)!r}))
lines = matrix_lines([CellResult.from_dict(r) for r in doc["results"]])
page = render_html(doc, baseline=doc)
assert "softmax_block1024" in page and any("softmax_block1024" in line for line in lines)
diff_documents(doc, doc).summary_lines()
"""
    assert _loaded_after(code) == []


@pytest.mark.parametrize("command", ["show", "report", "diff"])
def test_the_cli_reads_results_without_torch(command, tmp_path):
    argv = {"show": ["show", str(SNAPSHOT)], "report": ["report", str(SNAPSHOT), "-o", str(tmp_path / "r.html")],
            "diff": ["diff", str(SNAPSHOT), str(SNAPSHOT)]}[command]
    code = f"""
import contextlib, io
from triton_conformance.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    assert main({argv!r}) == 0
"""
    assert _loaded_after(code) == []


def test_reports_import_only_the_model_and_the_standard_library():
    allowed = ("triton_conformance.model", "triton_conformance.reports", "triton_conformance.errors",
               "triton_conformance.version")  # a leaf: the package's version string
    found = {}
    for path in sorted((ROOT / "triton_conformance" / "reports").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                if (top == "triton_conformance" and name != "triton_conformance"
                        and not name.startswith(allowed)) or top in ("torch", "hypothesis", "triton", "pytest",
                                                                      "numpy", "allure", "allure_commons"):
                    found.setdefault(path.name, []).append(name)
    assert found == {}
