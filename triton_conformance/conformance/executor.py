"""Run a cell where it is safe to: in a worker process, or in this one."""

from __future__ import annotations

from triton_conformance.conformance.outcomes import CellResult, Finding
from triton_conformance.conformance.subject import Subject

__all__ = ["CellExecutor", "RETIRE_AFTER"]

# Outcomes after which a worker is replaced: its heap or CUDA context is suspect.
RETIRE_AFTER = ("unsafe", "crash", "timeout")


class CellExecutor:
    """Runs cells for one pytest process, isolating them when asked to."""

    def __init__(self, *, device: str, profile: str, isolation: str = "process", timeout: float | None = None):
        self.device = device
        self.profile = profile
        self.isolation = isolation
        self.timeout = timeout
        self._pool = None
        self._backend = None

    def run(self, subject: Subject, cell: str, *, seed: int | None = None) -> CellResult:
        if self.isolation == "none":
            return self._run_here(subject, cell, seed)
        return self._run_isolated(subject, cell, seed)

    def _run_here(self, subject: Subject, cell: str, seed: int | None) -> CellResult:
        from triton_conformance.conformance.backend import current_backend
        from triton_conformance.conformance.runner import run_cell

        if self._backend is None:
            self._backend = current_backend(self.device)
        return run_cell(subject, cell, backend=self._backend, profile=self.profile, seed=seed)

    def _run_isolated(self, subject: Subject, cell: str, seed: int | None) -> CellResult:
        from triton_conformance.conformance.isolation import WorkerPool

        if self._pool is None:
            self._pool = WorkerPool(self.device)
        request = {"op": "run_cell", "subject": subject.name, "cell": cell, "profile": self.profile,
                   "seed": seed, "modules": [subject.module]}
        status, value, last_spec = self._pool.call(request, self.timeout)
        if status == "result":
            result = CellResult.from_dict(value)
            if result.outcome in RETIRE_AFTER:
                self._pool.retire()
            return result
        outcome, kind = {"died": ("crash", "process-died"), "timeout": ("timeout", "timeout"),
                         "error": ("crash", "harness-error")}[status]
        return self._lost_cell(subject, cell, Finding(outcome, kind, str(value)), last_spec)

    def _lost_cell(self, subject: Subject, cell: str, finding: Finding, last_spec: dict | None) -> CellResult:
        """A cell whose worker never answered: recorded with the example it was running."""
        result = CellResult(subject=subject.name, family=subject.family, cell=cell, outcome=finding.outcome,
                            finding=finding.kind, message=finding.message, counterexample=last_spec,
                            expected_failure=subject.xfail)
        if last_spec is not None:
            from triton_conformance.conformance.checks import Backend
            from triton_conformance.conformance.replay import reproducer
            from triton_conformance.strategies._internal.specs import Spec

            backend = Backend(name="cuda" if self.device == "cuda" else "interpreter")
            result.reproducer = reproducer(subject, cell, Spec.from_dict(last_spec), finding, backend)
            result.message += "\n(the spec shown is the example running when it happened; it is not shrunk)"
        return result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
