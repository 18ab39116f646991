"""The oracle side sees torch as it is, whatever shims the interpreter's compat layer installs (issue 28).

A fresh project, declared as the README tells a user, runs under the default
compat layer: a correct fp32 sum whose result is tiny against its terms fails
the plain bound and must pass through the magnitude stage.
"""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys
import textwrap

import torch

from triton_conformance.oracles.comparison import compare
from triton_conformance.oracles.tolerance import default_bound

ROOT = pathlib.Path(__file__).resolve().parents[2]

SUBJECTS = '''
import torch
from triton_conformance import Dim, Tensor, subject

SHIFT = 1.0e4  # every term is ~1e4; their sum, after the shift is taken off, is ~sqrt(N)


def shifted_sum(x):
    return (x + SHIFT).sum(-1) - SHIFT * x.shape[-1]


@subject(inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
         dims={"M": Dim(1, 4), "N": Dim(8, 32)}, oracle=shifted_sum, family="cancelling", reduces="N")
def cancelling_sum(x):
    return shifted_sum(x)  # in fp32: correct, off by about u * N * 1e4
'''

CONFTEST = '''
def pytest_conformance_modules(config):
    return ["cancel_subjects"]
'''

# A plugin loaded before the conformance plugin's first hook: records, at each compat install, whether the
# oracle side's lazy imports were made already.
SPY = '''
import json, sys
from triton_conformance import compat

_real = compat.install


def _spied(*args, **kwargs):
    with open("install-order.json", "a") as f:
        f.write(json.dumps("torch._decomp.decompositions_for_jvp" in sys.modules) + "\\n")
    return _real(*args, **kwargs)


compat.install = _spied
'''


def test_the_case_fails_the_plain_bound():
    """The case is a cancellation: a correct fp32 computation fails the plain bound (so only the second
    stage passes it)."""
    x = torch.randn(4, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ref = (x + 1e4).sum(-1) - 1e4 * 32
    got = ((x.float() + 1e4).sum(-1) - 1e4 * 32).double()
    assert compare(got, ref, default_bound(out_dtype="float32", reduction=32, scale=float(ref.abs().max())))


def test_a_fresh_project_under_the_default_compat_layer_passes_a_cancellation(tmp_path):
    (tmp_path / "cancel_subjects.py").write_text(textwrap.dedent(SUBJECTS))
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "order_spy.py").write_text(textwrap.dedent(SPY))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{tmp_path}", "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "order_spy", "-q",
                          "--conformance-only", "--conformance-device=interpreter", "-k", "layout and contiguous"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    order = [json.loads(line) for line in (tmp_path / "install-order.json").read_text().split()]
    assert order and all(order), f"a compat install ran before the oracle side's imports: {order}"
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    doc = json.loads((tmp_path / "conformance-results" / "results.json").read_text())
    assert doc["environment"]["compat"], "the default compat layer was not installed"
    (result,) = [r for r in doc["results"] if r["cell"] == "layout:contiguous"]
    assert result["outcome"] == "honoured", result["message"]


def test_only_the_engine_installs_the_compat_layer():
    """Every install goes through conformance/interpreter_layer.py, which makes the oracle side's imports
    first; a direct ``compat.install(...)`` call elsewhere in the package would skip them."""
    package = ROOT / "triton_conformance"
    direct = []
    for path in package.rglob("*.py"):
        if path.parent.name == "compat" or path.name == "interpreter_layer.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "install"
                    and isinstance(node.func.value, ast.Name)):
                direct.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not direct
