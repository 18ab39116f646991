"""Naming crashes: compile failures, lost CUDA contexts, and how the executor records them."""

from __future__ import annotations

import os
import pickle
import struct

import pytest

from triton_conformance import Dim, Tensor, register
from triton_conformance.conformance.backend import Backend
from triton_conformance.model.config import RunConfig
from triton_conformance.workers import worker as _worker
from triton_conformance.workers.executor import CellExecutor, classify
from triton_conformance.model.outcomes import (
    FAILING,
    OUTCOMES,
    PASSING,
    CellResult,
    compile_error_kind,
    cuda_poison_kind,
)
from triton_conformance.reports.diff import diff_documents
from triton_conformance.reports.terminal import matrix_lines

OUT_OF_SHARED = ('Traceback (most recent call last):\n  File "launch.py", line 3, in run\n'
                 "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 2097152, "
                 "Hardware limit: 232448. Reducing block sizes or `num_stages` may help.\n")
STATIC_ASSERT_CUDA = "triton.compiler.errors.CompileTimeAssertionFailure: at 5:4:\n    tl.static_assert(BLOCK <= 128)\n"
STATIC_ASSERT_INTERPRETER = (
    '  File "k.py", line 6, in k\n    tl.static_assert(2 * TILE * TILE * 2 <= SHARED_LIMIT, "too big")\n'
    '  File "/site-packages/triton/runtime/interpreter.py", line 1316, in _new_static_assert\n'
    "    assert cond, msg\nAssertionError: too big\n\nThe above exception was the direct cause of the following:\n"
    "triton.runtime.errors.InterpreterError: AssertionError('too big')\n")

# Tutorial 06's warp-specialized causal forward on an H200, triton 3.6: the pybind error of a failed pass.
MLIR_PASS_FAILED = ('  File "/site-packages/triton/backends/nvidia/compiler.py", line 316, in make_ttgir\n'
                    "    pm.run(mod, 'make_ttgir')\nRuntimeError: PassManager::run failed\n")


@pytest.mark.parametrize(("text", "kind"), [
    (OUT_OF_SHARED, "out-of-resources"),
    (STATIC_ASSERT_CUDA, "static-assert"),
    (STATIC_ASSERT_INTERPRETER, "static-assert"),
    ("triton.compiler.errors.CompilationError: at 1:0: unsupported tensor index\n", "compilation-error"),
    ("triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n", "ptxas-error"),
    (MLIR_PASS_FAILED, "pass-failed"),
    ("ValueError: x.shape=(3,), expected ...\n", None),
    ("RuntimeError: my launcher mentions CompilationError in passing\n", None),
    ("", None),
], ids=["out-of-shared-memory", "static-assert-cuda", "static-assert-interpreter", "compilation-error", "ptxas",
        "mlir-pass", "plain-exception", "mention-is-not-a-raise", "empty"])
def test_compile_error_kind_reads_the_raised_exception(text: str, kind: str | None) -> None:
    assert compile_error_kind(text) == kind


@pytest.mark.parametrize(("text", "kind"), [
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "illegal-address"),
    ("RuntimeError: CUDA error: device-side assert triggered\nCompile with TORCH_USE_CUDA_DSA", "device-assert"),
    ("RuntimeError: CUDA error: unspecified launch failure", "launch-failure"),
    ("RuntimeError: CUDA error: out of memory", None),
    ("ValueError: illegal value", None),
], ids=["illegal-address", "device-assert", "launch-failure", "oom-is-recoverable", "unrelated"])
def test_cuda_poison_kind(text: str, kind: str | None) -> None:
    assert cuda_poison_kind(text) == kind


def _crash(message: str, traceback: str, finding: str = "exception") -> CellResult:
    return CellResult(subject="k", family="f", cell="memory", outcome="crash", finding=finding, message=message,
                      details={"traceback": traceback})


def test_classify_turns_a_compile_failure_into_its_own_outcome() -> None:
    result = classify(_crash("OutOfResources on an input inside the contract: out of resource: shared memory",
                             OUT_OF_SHARED))
    assert (result.outcome, result.finding) == ("compile-error", "out-of-resources")
    assert "Hardware limit" in result.details["traceback"] and result.details["raised_as"] == "exception"
    assert "compile-error" in OUTCOMES and "compile-error" in FAILING and "compile-error" not in PASSING


def test_classify_names_a_lost_context_and_leaves_other_crashes_alone() -> None:
    lost = classify(_crash("AcceleratorError on an input inside the contract: CUDA error: an illegal memory "
                           "access was encountered", "torch.AcceleratorError: CUDA error: an illegal memory access"))
    assert (lost.outcome, lost.finding) == ("crash", "illegal-address")
    plain = classify(_crash("ZeroDivisionError on an input inside the contract", "ZeroDivisionError: x"))
    assert (plain.outcome, plain.finding) == ("crash", "exception")
    honoured = CellResult(subject="k", family="f", cell="memory", outcome="honoured", message=OUT_OF_SHARED)
    assert classify(honoured).outcome == "honoured"


def test_a_cell_going_to_compile_error_is_a_regression_and_has_a_matrix_letter() -> None:
    def doc(outcome: str) -> dict:
        return {"results": [{"subject": "k", "cell": "memory", "outcome": outcome, "finding": None}],
                "environment": {}}

    diff = diff_documents(doc("honoured"), doc("compile-error"))
    assert diff.has_regressions and diff.regressions[0].new == "compile-error"
    assert diff_documents(doc("compile-error"), doc("honoured")).fixes
    lines = matrix_lines([CellResult(subject="k", family="f", cell="memory", outcome="compile-error",
                                     finding="out-of-resources")])
    assert "K compile-error" in lines[0] and lines[2].split()[1] == "K"
    assert "k[memory]: compile-error (out-of-resources)" in "\n".join(lines)


# -- the worker's flight recorder and the executor's view of a lost context ------------------------


class _Spec:
    def __init__(self, n: int):
        self.n = n

    def to_dict(self) -> dict:
        return {"dims": {"N": self.n}}


def _messages(fd: int) -> list[dict]:
    out = []
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except BlockingIOError:
        pass
    while data:
        (n,), data = struct.unpack("!I", data[:4]), data[4:]
        out.append(pickle.loads(data[:n]))
        data = data[n:]
    return out


def test_flight_recorder_blames_the_example_before_the_context_was_found_lost(monkeypatch) -> None:
    states = iter([None, None, "AcceleratorError: CUDA error: an illegal memory access was encountered"])

    class LosingBackend:
        def context_lost(self):
            return next(states)

    def fake_exit(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(_worker.os, "_exit", fake_exit)
    read, write = os.pipe()
    recorder = _worker._flight_recorder(write, LosingBackend())
    recorder.example_started(None, "memory", _Spec(1))
    recorder.example_started(None, "memory", _Spec(1025))
    with pytest.raises(SystemExit) as exited:
        recorder.example_started(None, "memory", _Spec(3))  # lost when the third starts: the second did it
    assert exited.value.code == _worker.EXIT_POISONED
    messages = _messages(read)
    assert [m["type"] for m in messages] == ["example", "example", "poisoned"]
    assert messages[-1]["spec"] == {"dims": {"N": 1025}} and "illegal memory access" in messages[-1]["error"]


def test_context_lost_is_never_checked_off_cuda() -> None:
    assert Backend(name="interpreter").context_lost() is None
    assert Backend(name="cuda", device="cpu").context_lost() is None  # CPU tensors: no context to lose


class _FakePool:
    def __init__(self, answer):
        self.answer, self.retired = answer, 0

    def call(self, message, timeout):
        return self.answer

    def retire(self) -> None:
        self.retired += 1


def _subject():
    return register(lambda x: x * 2, name="doubler", family="toy",
                    inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 8)},
                    oracle=lambda x: x * 2)


def test_executor_records_a_lost_context_as_a_crash_with_the_example_and_replaces_the_worker() -> None:
    spec = {"dims": {"N": 5}, "dtypes": {"x": "float32"}, "layouts": {}, "scalars": {}, "values": "ordinary",
            "mask": None, "seed": 0}
    executor = CellExecutor(RunConfig(device="cuda"))
    executor._pool = _FakePool(("poisoned", "AcceleratorError: CUDA error: an illegal memory access was "
                                "encountered", spec))
    result = executor.run(_subject(), "layout:contiguous")
    assert (result.outcome, result.finding) == ("crash", "illegal-address")
    assert result.counterexample.spec == spec and not result.counterexample.shrunk and "doubler" in result.reproducer
    assert "the CUDA context was lost" in result.message
    assert executor._pool.retired == 1


def test_executor_replaces_a_worker_whose_harness_failed_and_classifies_its_traceback() -> None:
    executor = CellExecutor(RunConfig(device="cuda"))
    executor._pool = _FakePool(("error", OUT_OF_SHARED, None))
    result = executor.run(_subject(), "layout:contiguous")
    assert (result.outcome, result.finding) == ("compile-error", "out-of-resources")
    assert executor._pool.retired == 1


def test_executor_turns_a_passing_cell_that_lost_its_context_into_a_crash() -> None:
    value = CellResult(subject="doubler", family="toy", cell="memory", outcome="honoured",
                       details={"context_lost": "RuntimeError: CUDA error: device-side assert triggered"}).to_dict()
    executor = CellExecutor(RunConfig(device="cuda"))
    executor._pool = _FakePool(("result", value, None))
    result = executor.run(_subject(), "memory")
    assert (result.outcome, result.finding) == ("crash", "device-assert")
    assert executor._pool.retired == 1


def test_executor_names_the_lost_context_behind_a_search_error() -> None:
    # Tutorial 06's in-kernel descriptor on a misaligned q, on an H200: the fault raised in the example, and
    # hypothesis's replay on the dead context was discarded ("Inconsistent results from replaying").
    spec = {"dims": {"N": 3}, "dtypes": {"x": "float32"}, "layouts": {}, "scalars": {}, "values": "ordinary",
            "mask": None, "seed": 0}
    value = CellResult(subject="doubler", family="toy", cell="layout:offset", outcome="crash",
                       finding="search-error", message="hypothesis could not search this cell: Inconsistent results "
                       "from replaying a test case!", duration_s=1.5,
                       details={"context_lost": "AcceleratorError: CUDA error: misaligned address"}).to_dict()
    executor = CellExecutor(RunConfig(device="cuda"))
    executor._pool = _FakePool(("result", value, spec))
    result = executor.run(_subject(), "layout:offset")
    assert (result.outcome, result.finding) == ("crash", "misaligned-address")
    assert "the CUDA context was lost" in result.message and "Inconsistent" in result.details["search_error"]
    assert result.counterexample.spec == spec and "doubler" in result.reproducer and result.duration_s == 1.5
    assert executor._pool.retired == 1


def test_classify_ignores_a_dead_workers_stderr() -> None:
    died = _crash("worker process died (signal SIGSEGV); its last output:\n" + OUT_OF_SHARED, "", "process-died")
    assert (classify(died).outcome, classify(died).finding) == ("crash", "process-died")


def test_a_crash_during_the_shrink_is_recorded_with_the_example_that_crashed() -> None:
    # The search finds the mismatch at a drawn size (127, the smallest drawn >= 100); the per-dim shrink then
    # tries sizes no draw holds, and the first of them at or past 100 kills the worker.
    from tests.cover import _crash_in_shrink
    from triton_conformance import get_subject
    from triton_conformance.model.config import run_config

    executor = CellExecutor(run_config(profile="ci"))
    try:
        result = executor.run(get_subject("crash_in_shrink"), "shape:non-pow2")
    finally:
        executor.close()
    assert (result.outcome, result.finding) == ("crash", "process-died"), result.message
    n = result.counterexample.spec["dims"]["N"]
    assert n >= 100 and n not in _crash_in_shrink.DRAWN, n  # the spec that crashed, not the last drawn one

def test_a_worker_that_died_out_of_memory_is_a_discard_not_a_crash() -> None:
    # issue 29: a torch launcher materialising 2^31-element intermediates; the process died for want of memory.
    executor = CellExecutor(RunConfig(device="interpreter"))
    executor._pool = _FakePool(("died", "worker process died (signal SIGABRT); its last output:\nterminate called "
                                "after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc", None))
    result = executor.run(_subject(), "shape:large-index")
    assert result.outcome == "skipped" and result.details["skip_code"] == "discard:device-memory", result
    assert "does not fit the machine's memory" in result.message and "std::bad_alloc" in result.message
    # Any other death stays the kernel's crash.
    executor._pool = _FakePool(("died", "worker process died (signal SIGSEGV); its last output:\n", None))
    assert executor.run(_subject(), "memory").outcome == "crash"
