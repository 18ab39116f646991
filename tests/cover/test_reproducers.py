"""Reproducers reproduce: run in a fresh Python, each re-runs its example under the cell's own guards,
poison and sentinels, and prints the verdict (a memory bug never aborts the process first)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.runner import run_cell

BUGS = '''
import torch
from triton_conformance import Dim, Tensor, subject

VECTOR = {"x": Tensor(("N",), dtypes=("float32",))}


@subject(inputs=VECTOR, dims={"N": Dim(4, 64)}, oracle=lambda x: x * 2)
def writes_one_past_the_end(x):
    out = torch.empty_like(x)
    out.as_strided((x.numel() + 1,), (1,)).copy_(torch.cat([x * 2, x[:1]]))  # one element too many
    return out


@subject(inputs=VECTOR, dims={"N": Dim(4, 64)}, oracle=lambda x: x * 2)
def leaves_the_last_element(x):
    out = torch.empty_like(x)
    out[:-1] = x[:-1] * 2
    return out


@subject(inputs=VECTOR, dims={"N": Dim(4, 64)}, oracle=lambda x: x * 2)
def reads_one_past_the_end(x):
    shifted = x.as_strided((x.numel(),), (1,), x.storage_offset() + 1)  # x[1:] and one element beyond
    return x * 2 + 0 * shifted.sum()
'''


@pytest.fixture
def bug_module(tmp_path, monkeypatch):
    name = f"reproducer_bugs_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(BUGS))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    return tmp_path, module


@pytest.mark.parametrize("launcher, finding", [
    ("writes_one_past_the_end", "oob-write"),
    ("leaves_the_last_element", "unwritten"),
    ("reads_one_past_the_end", "poisoned-read"),
])
def test_the_reproducer_prints_the_same_verdict_in_a_fresh_python(bug_module, launcher, finding):
    path, module = bug_module
    result = run_cell(getattr(module, launcher), "layout:contiguous", backend=Backend())
    assert (result.outcome, result.finding) == ("unsafe", finding), result.message
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    for _ in range(2 if finding == "oob-write" else 1):  # unguarded, that write corrupted the heap one run in three
        run = subprocess.run([sys.executable, "-c", result.reproducer], capture_output=True, text=True, env=env,
                             timeout=300)
        assert f"verdict: unsafe / {finding}" in run.stdout, run.stdout + run.stderr
        assert run.returncode == 1 and "StillFails" in run.stderr  # it still fails: it says so (an AssertionError)
        assert "free(): invalid pointer" not in run.stderr and "Traceback" in run.stderr
