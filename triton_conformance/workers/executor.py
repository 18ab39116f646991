"""Run a cell where it is safe to: in a worker process, or in this one.

Whatever the worker reports, or fails to report, becomes the cell's result:

- a result: classified further here (a compile failure is ``compile-error``;
  a sticky CUDA error is a ``crash`` named after it);
- the worker died, hung, or lost its CUDA context: a ``crash`` or ``timeout``
  carrying the example it was running, and the worker is replaced;
- the worker's own code raised around the cell: a ``harness-error`` (our bug,
  never the kernel's), with the worker's traceback;
- with the sanitizer, memcheck's findings folded in (see :mod:`.sanitizer`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from triton_conformance.conformance import memory_cgroup
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding, compile_error_kind, cuda_poison_kind
from triton_conformance.model.spec import Spec
from triton_conformance.model.subject import Subject
from triton_conformance.workers.isolation import WorkerPool
from triton_conformance.workers.sanitizer import SANITIZER_ENV, fold_into

# The engine (conformance/) is imported where a cell runs in this process: it loads triton, which must
# come after the plugin has resolved the device and installed the compat layer.

__all__ = ["CellExecutor", "RETIRE_AFTER", "classify", "memory_death"]

# Outcomes after which a worker is replaced: its heap, CUDA context or patched state is suspect.
RETIRE_AFTER = ("unsafe", "crash", "timeout", "harness-error")
# Crash findings that carry a raised exception (from checks, or the runner).
_RAISED = ("exception", "unclean-rejection", "search-error")


def classify(result: CellResult) -> CellResult:
    """Name a crash for what it was: a compile failure becomes ``compile-error`` with the compiler's
    message; a sticky CUDA error keeps ``crash`` with the error as its finding."""
    # Only an exception the cell saw raised: a dead worker's stderr may quote an earlier cell's error.
    if result.outcome != "crash" or result.finding not in _RAISED:
        return result
    text = f"{(result.details or {}).get('traceback') or ''}\n{result.message}"
    kind = compile_error_kind(text)
    if kind is not None:
        return replace(result, outcome="compile-error", finding=kind,
                       details=dict(result.details, raised_as=result.finding))
    poison = cuda_poison_kind(text)
    if poison is not None:
        return replace(result, finding=poison, details=dict(result.details, raised_as=result.finding))
    return result


# What a process that died for want of memory leaves on its stderr (glibc, the C++ runtime, CPython, torch).
_MEMORY_DEATHS = ("std::bad_alloc", "MemoryError", "Cannot allocate memory", "DefaultCPUAllocator: can't allocate",
                  "CUDA out of memory", "out of memory", memory_cgroup.OOM_KILLED)


def memory_death(text: str) -> str | None:
    """The line of a dead worker's output that says it ran out of memory, or None."""
    for line in reversed(text.splitlines()):
        if any(sign in line for sign in _MEMORY_DEATHS):
            return line.strip()
    return None


def _worker_error(subject: Subject, cell: str, traceback: str) -> CellResult:
    """The ``harness-error`` of a cell whose worker's own code raised (``traceback``, as the worker sent it);
    a kernel that failed to compile there (a subject module that builds one at import) is the kernel's
    (a crash that :func:`classify` names a ``compile-error``)."""
    last = (traceback.strip().splitlines() or ["an error"])[-1]
    if compile_error_kind(traceback) is not None:
        return CellResult.of(subject, cell, "crash", last, finding="exception", details={"traceback": traceback})
    return CellResult.of(subject, cell, "harness-error", f"triton-conformance's worker raised {last} around this "
                         "cell. This is a bug in triton-conformance, not a verdict about the kernel: please report "
                         "it with the traceback", finding="harness-raised", details={"traceback": traceback})


class CellExecutor:
    """Runs cells for one pytest process, isolating them when asked to.

    ``sanitizer`` (a :class:`~.sanitizer.Sanitizer`, process isolation only)
    runs every cell in its own worker under compute-sanitizer.
    """

    def __init__(self, config: RunConfig, *, sanitizer=None, turns=None):
        self.config = config
        self.sanitizer = sanitizer
        self.turns = turns  # a GpuTurns when other workers share this one's GPU: its cells take them
        self._pool = None
        self._backend = None

    def prestart(self) -> None:
        """Start the cell worker process now, without waiting for it, so that its imports (and on CUDA its
        context) overlap what this process does before its first cell; nothing without process isolation."""
        if self.config.isolation == "none":
            return
        if self._pool is None:
            self._pool = self._new_pool()
        self._pool.prestart()

    def run(self, subject: Subject, cell: str) -> CellResult:
        if self.config.isolation == "none":
            return classify(self._run_here(subject, cell))
        result = classify(self._run_isolated(subject, cell))
        if self.sanitizer is not None:
            self._pool.finish()  # its log is complete once it has exited
            result = fold_into(result, self.sanitizer.collect())
        return result

    def _run_here(self, subject: Subject, cell: str) -> CellResult:
        from triton_conformance.conformance.backend import current_backend
        from triton_conformance.conformance.harness import escaped_cell
        from triton_conformance.conformance.runner import run_cell

        if self._backend is None:
            from triton_conformance.conformance import gpu_turns

            gpu_turns.share(self.turns)
            self._backend = current_backend(self.config.device)
        try:
            return run_cell(subject, cell, backend=self._backend, config=self.config)
        except Exception as exc:  # noqa: BLE001 - it escaped the runner: judged by where it came from
            return escaped_cell(subject, cell, exc, self._backend)

    def _new_pool(self):  # noqa: ANN202

        if self.sanitizer is None:
            return WorkerPool(self.config.device, compat=self.config.compat, memory=self.config.worker_memory,
                              turns=self.turns)

        return WorkerPool(self.config.device, env={**os.environ, **SANITIZER_ENV}, prefix=self.sanitizer.prefix,
                          compat=self.config.compat, memory=self.config.worker_memory, turns=self.turns)

    def _run_isolated(self, subject: Subject, cell: str) -> CellResult:
        if self._pool is None:
            self._pool = self._new_pool()
        # sys.path as it is now: a worker started early has the one from before the subjects' modules loaded
        request = {"op": "run_cell", "subject": subject.name, "cell": cell, "config": self.config,
                   "modules": [subject.module], "sys_path": list(sys.path)}
        status, value, last_spec = self._pool.call(request, self.config.timeout)
        if status == "result":
            result = CellResult.from_dict(value)
            if result.outcome in RETIRE_AFTER or "context_lost" in result.details:
                self._pool.retire()
            lost = result.details.get("context_lost")
            if lost is not None and result.passed:
                result = replace(result, outcome="crash", finding=cuda_poison_kind(lost),
                                 message=f"the CUDA context was lost in this cell: {lost}")
            elif lost is not None and result.finding == "search-error":
                # Hypothesis replayed the failing example on the dead context and called the search
                # inconsistent: the lost context is the finding, on the example last running.
                finding = Finding("crash", cuda_poison_kind(lost) or "cuda-error",
                                  f"the CUDA context was lost in this cell: {lost}")
                lost_cell = self._lost_cell(subject, cell, finding, last_spec)
                result = replace(lost_cell, duration_s=result.duration_s,
                                 details=dict(result.details, search_error=result.message))
            return result
        # The worker did not answer with a result: whatever state it is in, replace it.
        self._pool.retire()
        if status == "poisoned":
            kind = cuda_poison_kind(str(value)) or "cuda-error"
            finding = Finding("crash", kind, f"the CUDA context was lost: {value}")
            return self._lost_cell(subject, cell, finding, last_spec)
        if status == "error":  # the worker's own code raised around the cell: ours, not the kernel's
            return _worker_error(subject, cell, str(value))
        why = memory_death(str(value)) if status == "died" else None
        if why is not None:  # the machine's limit, never a verdict on the kernel
            from triton_conformance.conformance.discards import DEVICE_MEMORY, REASONS

            bound = getattr(self._pool, "memory_bound", None)
            inside = f", inside its memory bound: {bound['describe']}" if bound else ""
            return CellResult.of(subject, cell, "skipped", f"{REASONS[DEVICE_MEMORY].skips}: the worker process died "
                                 f"out of memory ({why}{inside})",
                                 details={"skip_code": f"discard:{DEVICE_MEMORY}", REASONS[DEVICE_MEMORY].detail: 1,
                                          "example": last_spec, "memory_bound": bound})
        outcome, kind = {"died": ("crash", "process-died"), "timeout": ("timeout", "timeout")}[status]
        return self._lost_cell(subject, cell, Finding(outcome, kind, str(value)), last_spec)

    def _lost_cell(self, subject: Subject, cell: str, finding: Finding, last_spec: dict | None) -> CellResult:
        """A cell whose worker never answered: recorded with the example it was running."""
        result = CellResult.of(subject, cell, finding.outcome, finding.message, finding=finding.kind)
        if last_spec is None:
            return result
        from triton_conformance.conformance.backend import Backend
        from triton_conformance.conformance.results import reproducer

        backend = Backend(name=self.config.device)
        return replace(result, counterexample=Counterexample(last_spec, shrunk=False),
                       reproducer=reproducer(subject, cell, backend, Spec.from_dict(last_spec), finding),
                       message=result.message + "\n(the spec shown is the example running when it happened; "
                                                "it is not shrunk)")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
