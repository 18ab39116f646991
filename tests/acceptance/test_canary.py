"""An environment check before any cell (issue 22, section 2).

triton 3.6's interpreter with numpy 2.5 fails every kernel with a loop or a
reduction: a whole battery of ``crash`` cells that say nothing about the
kernels.  Canary kernels run first; when one fails the run stops with one
line (exit 4) naming the versions and the canary, before any cell.  Here the
interpreter is broken on purpose, as numpy 2.5 breaks triton 3.6's.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from triton_conformance.conformance.canary import CanaryFailure, check_in_child, failure_line

SUBJECTS = '''
import torch
import triton
import triton.language as tl
from triton_conformance import Dim, Tensor, subject


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@subject(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)}, oracle=lambda x: x.sum(), reduces="N",
         family="sum")
def total(x):
    out = torch.empty((), dtype=x.dtype)
    row_sum_kernel[(1,)](x, out, x.numel(), BLOCK=64)
    return out
'''

# What numpy >= 2.5 does to triton 3.6's interpreter, done by hand: every reduction raises.
BROKEN_INTERPRETER = '''
import numpy
from triton.runtime import interpreter


def _reduce(self, input):
    raise TypeError("only 0-dimensional arrays can be converted to Python scalars")


interpreter.ReduceOps.sum = _reduce
numpy.__version__ = "2.5.0"


def pytest_conformance_modules(config):
    return ["sum_subjects"]
'''


@pytest.fixture
def broken(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(sum_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest(textwrap.dedent(BROKEN_INTERPRETER))
    return pytester


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["one-process", "xdist"])
def test_a_failing_canary_stops_the_run_in_one_line_before_any_cell(broken: pytest.Pytester, workers) -> None:
    # Under xdist the controller runs the canaries once its workers have started (pytest_sessionstart).
    result = broken.runpytest_subprocess("--conformance-only", "-p", "no:randomly", *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.lines
    line = errors[0]
    assert "the 'reduction' canary failed before any cell ran" in line
    assert "only 0-dimensional arrays can be converted to Python scalars" in line
    for name in ("torch ", "triton ", "numpy 2.5.0", "python ", "device interpreter"):
        assert name in line, line
    assert "hint: " in line and "numpy<2.5" in line
    assert "Traceback" not in result.stderr.str()
    assert not (broken.path / "conformance-results" / "results.json").exists()  # no verdict was recorded


def test_without_the_canary_the_broken_environment_blames_the_kernel(broken: pytest.Pytester) -> None:
    """What the canary saves a user from: every reduction cell a crash that is not the kernel's."""
    # In this process (the breakage is the conftest's, which cell workers do not load).
    result = broken.runpytest_subprocess("--conformance-only", "--conformance-canary=off",
                                         "--conformance-isolation=none", "-k", "layout and contiguous",
                                         "-p", "no:randomly")
    doc = json.loads((broken.path / "conformance-results" / "results.json").read_text())
    (cell,) = doc["results"]
    assert cell["outcome"] == "crash" and "only 0-dimensional arrays" in cell["message"], cell
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_the_hint_names_the_known_cause_only_where_it_applies() -> None:
    failure = CanaryFailure("loop", "InterpreterError: TypeError('only 0-dimensional arrays can be converted "
                                    "to Python scalars')")
    versions = {"torch": "2.11.0", "triton": "3.6.0", "python": "3.12.3", "device": "interpreter"}
    assert "numpy<2.5" in failure_line(failure, {**versions, "numpy": "2.5.0"})
    assert "hint" not in failure_line(failure, {**versions, "numpy": "2.4.6"})
    assert "hint" not in failure_line(CanaryFailure("loop", "RuntimeError: other"), {**versions, "numpy": "2.5.0"})


def test_the_canaries_pass_here_in_a_child_process_as_on_cuda() -> None:
    assert check_in_child("interpreter", None) is None
