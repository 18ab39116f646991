"""Building a cell's result, and the one reproducer format every kind writes.

Every kind reports through these few constructors, so a result always names
its subject, family, cell and known-bug flag the same way; the runner adds
the duration and the compile count.  Every reproducer is the same script: a
header naming the failure, the back end's prelude, then one call of
:func:`..replay.replay` with the cell and its example (a spec, a design's
seed, or nothing for a cell with one fixed example).
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.prelude import compat_prelude
from triton_conformance.model.cells import cell_id
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding, TensorView
from triton_conformance.model.spec import Spec, strides_for
from triton_conformance.model.subject import Subject

__all__ = ["cell_result", "skipped", "failed", "reproducer", "counterexample"]


def cell_result(subject: Subject | str, cell: str, outcome: str, message: str = "", **fields: Any) -> CellResult:
    """A result of ``outcome`` for ``subject``'s ``cell`` (:meth:`CellResult.of`: a Subject, or a name)."""
    return CellResult.of(subject, cell, outcome, message, **fields)


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


def counterexample(subject: Subject, spec: Spec, extra: dict[str, TensorView] | None = None) -> Counterexample:
    """The spec, with each input's real shape, strides and storage offset (and ``extra`` tensors)."""
    tensors = {}
    for name, decl in subject.contract.inputs.items():
        shape = tuple(spec.dims[s] for s in decl.shape)
        strides, offset, _ = strides_for(shape, spec.layout(name))
        tensors[name] = TensorView(shape=shape, strides=strides, storage_offset=offset, dtype=spec.dtypes[name])
    return Counterexample(spec.to_dict(), {**tensors, **(extra or {})})


_BODY = '''\
from triton_conformance.conformance.replay import replay
from triton_conformance.strategies import Layout, Spec

example = {example!r}
replay({module!r}, {subject!r}, {cell!r}, example, device={device!r})
'''


def reproducer(subject: Subject, cell: str, backend: Any, example: Any, finding: Finding) -> str:
    """A runnable script that runs ``example`` of ``subject``'s ``cell`` again on ``backend``, under the cell's
    own checks (``example``: a spec, a design's seed, or None for a cell with one fixed example)."""
    message = finding.message.splitlines()[0][:300] if finding.message else ""
    body = _BODY.format(example=example, module=subject.module, subject=subject.name, cell=cell,
                        device=backend.device)
    return (f"# {cell_id(subject.name, cell)}: {finding.outcome} ({finding.kind})\n# {message}\n"
            f"{backend.prelude()}{compat_prelude(backend)}{body}")  # the compat shims the run used, too
