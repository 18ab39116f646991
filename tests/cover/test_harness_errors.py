"""A fault of the harness is never a kernel verdict (issue 22, section 2).

An exception that escapes a cell kind is judged by where it came from: out
of the launcher call it is the kernel's crash; raised by our own code it is a
``harness-error``, with the traceback, which no report counts as the kernel's.
Deliberately broken toy kinds stand in for a bug of ours.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from triton_conformance import Dim, Tensor  # noqa: E402
from triton_conformance import register as register_subject  # noqa: E402
from triton_conformance.conformance.backend import Backend  # noqa: E402
from triton_conformance.conformance.harness import marked, raised_by_launcher  # noqa: E402
from triton_conformance.conformance.kinds import CellKind, register_kind, unregister_kind  # noqa: E402
from triton_conformance.conformance.results import cell_result  # noqa: E402
from triton_conformance.conformance.runner import run_cell  # noqa: E402
from triton_conformance.model.cells import CellClass, Dimension  # noqa: E402
from triton_conformance.model.config import RunConfig  # noqa: E402
from triton_conformance.model.outcomes import outcome  # noqa: E402
from triton_conformance.reports.diff import diff_documents  # noqa: E402
from triton_conformance.reports.terminal import matrix_lines  # noqa: E402
from triton_conformance.workers.executor import CellExecutor  # noqa: E402


def _our_own_bug(table: dict) -> int:
    return table["no such key"]  # the kind's own mistake: a KeyError in triton-conformance's code


class BrokenCells(CellKind):
    """Each class fails its own way."""

    dimension = Dimension("broken", "a kind with bugs of its own", (
        CellClass("ours", "the kind raises by itself"),
        CellClass("after-launch", "the launcher runs fine, then the kind raises"),
        CellClass("uncaught", "the kind does not catch what the launcher raises"),
        CellClass("caught-then-ours", "the kind catches the launcher's error, then raises its own"),
        CellClass("out-of-memory", "the kind runs out of memory"),
        CellClass("compiles", "the kind compiles the kernel itself, which does not fit the device")))

    def run(self, context, value):
        x = torch.arange(4, dtype=torch.float32)
        if value == "ours":
            _our_own_bug({})
        if value == "after-launch":
            context.subject.launcher(x=x)
            _our_own_bug({})
        if value == "uncaught":
            context.subject.launcher(x=-x)  # negative input: this launcher raises
        if value == "caught-then-ours":
            try:
                context.subject.launcher(x=-x)
            except ValueError:
                _our_own_bug({})
        if value == "out-of-memory":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
        if value == "compiles":
            from triton.runtime.errors import OutOfResources

            raise OutOfResources(232448, 232448 // 2, "shared memory")
        return cell_result(context.subject, context.cell, "honoured", "unreachable")


class BrokenSkip(CellKind):
    """A kind whose skip_reason raises: the exception escapes the runner itself."""

    dimension = Dimension("broken-skip", "a kind whose skip_reason has a bug", (CellClass("x", "raises"),))

    def skip_reason(self, contract, value, backend):
        return _our_own_bug({})


@pytest.fixture
def broken_kinds():
    kinds = [register_kind(BrokenCells()), register_kind(BrokenSkip())]
    yield
    for kind in kinds:
        unregister_kind(kind)


def _launcher(x):
    if bool((x < 0).any()):
        raise ValueError("negative input")  # the launcher's own refusal, raised inside the launcher call
    return x * 2


@pytest.fixture
def doubles():
    return register_subject(_launcher, name="harness_doubles", inputs={"x": Tensor(("N",))},
                            dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="toy",
                            xfail="a known bug does not excuse a harness error")


@pytest.mark.parametrize("cell", ["broken:ours", "broken:after-launch", "broken:caught-then-ours"])
def test_an_exception_raised_by_our_own_code_is_a_harness_error(broken_kinds, doubles, cell) -> None:
    result = run_cell(doubles, cell, backend=Backend(), config=RunConfig())
    assert (result.outcome, result.finding) == ("harness-error", "harness-raised"), result.message
    assert not outcome(result.outcome).kernel_fault and not result.passed
    assert "KeyError" in result.message and "bug in triton-conformance" in result.message
    assert "_our_own_bug" in result.details["traceback"]  # the traceback says where, for the bug report


def test_an_exception_out_of_the_launcher_call_is_the_kernels_crash(broken_kinds, doubles) -> None:
    result = run_cell(doubles, "broken:uncaught", backend=Backend(), config=RunConfig())
    assert (result.outcome, result.finding) == ("crash", "exception"), result.message
    assert outcome(result.outcome).kernel_fault and "negative input" in result.message


def test_running_out_of_memory_is_neither_ours_nor_the_kernels(broken_kinds, doubles) -> None:
    result = run_cell(doubles, "broken:out-of-memory", backend=Backend(), config=RunConfig())
    assert result.outcome == "skipped" and "memory" in result.message, result


def test_a_kernel_that_fails_to_compile_is_the_kernels_wherever_the_compile_was_triggered(broken_kinds,
                                                                                           doubles) -> None:
    result = CellExecutor(RunConfig(isolation="none")).run(doubles, "broken:compiles")
    assert (result.outcome, result.finding) == ("compile-error", "out-of-resources"), result


def test_an_exception_escaping_the_runner_is_a_harness_error_in_the_executor(broken_kinds, doubles) -> None:
    with pytest.raises(KeyError):
        run_cell(doubles, "broken-skip:x", backend=Backend(), config=RunConfig())
    executor = CellExecutor(RunConfig(isolation="none"))
    result = executor.run(doubles, "broken-skip:x")
    assert (result.outcome, result.finding) == ("harness-error", "harness-raised"), result
    assert "_our_own_bug" in result.details["traceback"]


class _FailingPool:
    """A worker pool whose worker's own code raised around the cell (the worker sends an error)."""

    retired = 0

    def call(self, request, timeout):
        return "error", "Traceback (most recent call last):\n  ...\nKeyError: 'subject'\n", {"dims": {"N": 3}}

    def retire(self):
        self.retired += 1


def test_an_error_of_the_worker_around_a_cell_is_a_harness_error(doubles) -> None:
    executor = CellExecutor(RunConfig(isolation="process"))
    executor._pool = pool = _FailingPool()
    result = executor.run(doubles, "layout:contiguous")
    assert (result.outcome, result.finding) == ("harness-error", "harness-raised"), result
    assert "KeyError: 'subject'" in result.message and result.details["traceback"].startswith("Traceback")
    assert result.counterexample is None and result.reproducer is None  # nothing of the kernel's to replay
    assert pool.retired == 1


def test_the_launcher_mark_follows_the_exception_not_the_subject(doubles) -> None:
    once = marked(doubles)
    assert marked(once) is once and once.launcher is not doubles.launcher  # marking again wraps nothing more
    launcher = once.launcher
    with pytest.raises(ValueError) as raised:
        launcher(x=-torch.ones(2))
    assert raised_by_launcher(raised.value)
    assert not raised_by_launcher(ValueError("raised elsewhere"))
    group = ExceptionGroup("two", [raised.value, KeyError("ours")])
    assert not raised_by_launcher(group)  # one of them is ours: the harness's
    assert raised_by_launcher(ExceptionGroup("one", [raised.value]))


def _doc(outcome_name: str) -> dict:
    return {"schema": "triton-conformance/results", "version": 1, "environment": {}, "results": [
        {"subject": "s", "family": "f", "cell": "layout:contiguous", "outcome": outcome_name, "finding": None,
         "message": "", "details": {}, "counterexample": None}]}


def test_reports_never_count_a_harness_error_as_the_kernels_failure(broken_kinds, doubles) -> None:
    result = run_cell(doubles, "broken:ours", backend=Backend(), config=RunConfig())
    lines = matrix_lines([result])
    assert "failing cells:" not in lines  # that list is the kernels' verdicts
    at = lines.index("not verdicts about the kernel (a mistake in a declaration, or a bug in triton-conformance):")
    assert lines[at + 1].startswith("  harness_doubles[broken:ours]: harness-error (harness-raised): ")
    assert "  [known bug]" not in lines[at + 1]  # the subject's xfail= does not excuse it
    # The nightly diff: a cell going from honoured to a harness error is no regression of the kernel.
    assert not diff_documents(_doc("honoured"), _doc("harness-error")).has_regressions
    assert diff_documents(_doc("honoured"), _doc("crash")).has_regressions
