"""Building a cell's result, and the one reproducer format every kind writes.

Every kind reports through these few constructors, so a result always names
its subject, family, cell and known-bug flag the same way; the runner adds
the duration and the compile count.  Every reproducer starts with the same
header and back-end prelude, then calls the kind's own replay function.
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.prelude import compat_prelude
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding
from triton_conformance.model.subject import Subject

__all__ = ["cell_result", "skipped", "failed", "reproducer_script", "reproducer"]


def cell_result(subject: Subject, cell: str, outcome: str, message: str = "", **fields: Any) -> CellResult:
    """A result of ``outcome`` for ``subject``'s ``cell``."""
    return CellResult(subject=subject.name, family=subject.family, cell=cell, outcome=outcome, message=message,
                      expected_failure=subject.xfail, **fields)


def skipped(subject: Subject, cell: str, reason: str, **fields: Any) -> CellResult:
    """The cell does not apply, or cannot run here; ``reason`` says why."""
    return cell_result(subject, cell, "skipped", reason, **fields)


def failed(subject: Subject, cell: str, finding: Finding, *, counterexample: Counterexample | None = None,
           reproducer: str | None = None, message: str | None = None, details: dict | None = None,
           **fields: Any) -> CellResult:
    """A failing result carrying ``finding`` (its outcome, kind, message and details)."""
    return cell_result(subject, cell, finding.outcome, finding.message if message is None else message,
                       finding=finding.kind, details=dict(finding.details) if details is None else details,
                       counterexample=counterexample, reproducer=reproducer, **fields)


def reproducer_script(subject: Subject, cell: str, finding: Finding, backend: Any, body: str) -> str:
    """A runnable script: a header naming the failure, the back end's prelude, then ``body``."""
    message = finding.message.splitlines()[0][:300] if finding.message else ""
    return (f"# {subject.name}[{cell}]: {finding.outcome} ({finding.kind})\n# {message}\n"
            f"{backend.prelude()}{compat_prelude(backend)}{body}")  # HOOK(harness): the run's compat shims


_REPLAY = '''\
from triton_conformance.conformance.replay import replay
from triton_conformance.strategies import Layout, Spec

spec = {spec!r}
inputs, verdict = replay({module!r}, {subject!r}, spec, device={device!r}{extra})
'''


def reproducer(subject: Subject, cell: str, spec: Any, finding: Finding, backend: Any) -> str:
    """The reproducer of a searched example: rebuild the exact tensors and re-run the cell's checks on them."""
    extra = ", determinism=True" if cell == "determinism" else ""
    body = _REPLAY.format(spec=spec, module=subject.module, subject=subject.name, device=backend.device, extra=extra)
    return reproducer_script(subject, cell, finding, backend, body)
