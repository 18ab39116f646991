"""Reproducers and ``replay`` reproduce (issue 22, section 3).

A library that asks torch for the CUDA device at import runs under the
interpreter only with the compat layer in place first.  Its stored
reproducer, and ``triton-conformance replay``, must install the shims the run
used, or they die at import (``Torch not compiled with CUDA enabled``) before
reaching the kernel.  And a reproducer that could not run is never reported
as "the failure is still there" (exit 1): it has a status of its own (7).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from triton_conformance.cli import main
from triton_conformance.options import EXIT_COULD_NOT_RUN, EXIT_FAILED, EXIT_OK

LIBRARY = '''
import torch
import triton
import triton.language as tl
from triton_conformance import Dim, Tensor, subject

SMS = torch.cuda.get_device_properties(0).multi_processor_count  # a library sizing its grid at import


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


def _library(pytester: pytest.Pytester, factor: float) -> None:
    pytester.makepyfile(lib_subjects=textwrap.dedent(LIBRARY).replace("FACTOR", repr(factor)))


@pytest.fixture
def failed_run(pytester: pytest.Pytester):
    """A run of the library's buggy launcher (it halves where it should double), with the device shims
    its import needs: the results file, and the failing cell's result."""
    _library(pytester, 0.5)
    pytester.makeconftest("def pytest_conformance_modules(config):\n    return ['lib_subjects']\n")
    run = pytester.runpytest_subprocess("--conformance-only", f"--conformance-cell={CELL}",
                                        "--conformance-compat=device_properties,float_scalars", "-p", "no:randomly")
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()
    path = pytester.path / "conformance-results" / "results.json"
    doc = json.loads(path.read_text())
    assert doc["environment"]["compat"] == ["device_properties", "float_scalars"]
    (result,) = [r for r in doc["results"] if f"{r['subject']}[{r['cell']}]" == CELL]
    assert result["outcome"] == "wrong"
    return str(path), result


def test_the_reproducer_installs_the_runs_compat_shims_and_reaches_the_verdict(failed_run, pytester) -> None:
    _, result = failed_run
    script = result["reproducer"]
    assert "install_compat(['device_properties', 'float_scalars'])" in script
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=pytester.path)
    assert run.returncode == 1 and "StillFails: lib_double: wrong (mismatch)" in run.stderr, run.stderr[-2000:]
    assert "Torch not compiled with CUDA enabled" not in run.stderr
    # Without the shims it dies at import: the line the reproducer needs is the one it now has.
    bare = script.replace("install_compat(['device_properties', 'float_scalars'])", "")
    died = subprocess.run([sys.executable, "-c", bare], capture_output=True, text=True, cwd=pytester.path)
    assert died.returncode != 0 and "Torch not compiled with CUDA enabled" in died.stderr, died.stderr[-2000:]


def test_replay_exits_1_while_the_failure_is_there_and_0_once_it_is_fixed(failed_run, pytester) -> None:
    path, _ = failed_run
    assert main(["replay", path, CELL]) == EXIT_FAILED
    _library(pytester, 2.0)  # the fix
    assert main(["replay", path, CELL]) == EXIT_OK


def test_replay_that_cannot_reach_the_kernel_exits_7_never_1(failed_run, pytester, capfd) -> None:
    path, _ = failed_run
    (pytester.path / "lib_subjects.py").unlink()  # the subject's module is gone: nothing can be judged
    assert main(["replay", path, CELL]) == EXIT_COULD_NOT_RUN
    err = capfd.readouterr().err
    assert "ModuleNotFoundError" in err and "the reproducer could not run" in err, err[-2000:]
