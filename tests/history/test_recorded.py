"""A run with the plugin records itself: two runs at two commits of a scratch repository, a bug committed
between them, and the history names the commit where the cell turned red (the issue's "done when", here on
the interpreter; bench/gpu/history_first_bad.sh is the same on the H200)."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from triton_conformance.cli import main

LIBRARY = '''
import torch
import triton
import triton.language as tl
from triton_conformance import Dim, Tensor, subject


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


@subject(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="lib")
def lib_double(x):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), FACTOR, BLOCK=16)
    return out
'''
CELL = "lib_double[layout:contiguous]"


def _commit(pytester: pytest.Pytester, factor: float) -> str:
    pytester.makepyfile(lib_subjects=textwrap.dedent(LIBRARY).replace("FACTOR", repr(factor)))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], cwd=pytester.path, check=True)
    subprocess.run([*git, "commit", "-qm", f"factor {factor}"], cwd=pytester.path, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=pytester.path, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_two_recorded_runs_name_the_commit_where_a_cell_turned_red(pytester: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture) -> None:
    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    pytester.makeconftest("def pytest_conformance_modules(config):\n    return ['lib_subjects']\n")
    args = ["--conformance-only", f"--conformance-cell={CELL}", "--conformance-history=.conformance/h.sqlite",
            "--conformance-isolation=none", "--conformance-canary=off", "-p", "no:randomly"]
    good = _commit(pytester, 2.0)
    first = pytester.runpytest_subprocess(*args)
    assert first.ret == 0, first.stdout.str()
    bad = _commit(pytester, 0.5)  # the bug: it halves where it should double
    second = pytester.runpytest_subprocess(*args)
    assert second.ret == pytest.ExitCode.TESTS_FAILED
    second.stdout.fnmatch_lines([f"history: 1 new failure, * since the last green run ({good[:10]}, run 1)*"])
    section = json.loads((pytester.path / "conformance-results" / "results.json").read_text())["history"]
    assert section["strips"][CELL] == ["honoured", "wrong"]
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()  # the runs' own output
    assert main(["history", "first-bad", CELL, "--history", ".conformance/h.sqlite", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["last_good"], out["first_bad"]) == (good, bad)
    assert out["bisect"]["commands"][0] == f"git bisect start {bad} {good}"
