"""Whose fault an exception is: the kernel's, or ours (a ``harness-error``).

A cell kind judges what the kernel does: it catches what the launcher
raises and turns it into a verdict.  An exception that escapes a kind is
judged here, by where it came from.  The launcher call is the boundary:

- raised inside the launcher call (the subject's launcher, and everything it
  calls: the kernel, triton, torch) and not caught by the kind: the kernel's
  ``crash``;
- the process's CUDA context is lost: the kernel's ``crash``, named after the
  CUDA error (a fault that surfaces at the next synchronisation, wherever
  that is);
- out of memory: the machine's limit, neither ours nor the kernel's (the
  cell is skipped, as the searched cells discard such an example);
- a kernel that failed to compile (triton's compile errors, wherever the
  compile was triggered): the kernel's, a ``compile-error`` once the
  executor has classified it;
- anything else, raised in triton-conformance's own code (or in a library it
  calls, outside the launcher): a ``harness-error``, our bug, with its
  traceback.  It is never counted as the kernel's crash.

:func:`run_kind` is the runner's hook: it runs a kind with the subject's
launcher marked (:func:`marked`), so an exception that passed through the
launcher call carries the mark.  :func:`harness_error` builds the result for
an exception that escaped the whole cell (the worker and the executor call it).
"""

from __future__ import annotations

import builtins
import functools
import sys
from dataclasses import replace
from typing import Any, Callable

from triton_conformance.conformance.judge import exception_text
from triton_conformance.conformance.results import cell_result, skipped
from triton_conformance.conformance.discards import OutOfMemory, raise_if_out_of_memory
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.model.outcomes import CellResult, compile_error_kind, cuda_poison_kind
from triton_conformance.model.subject import Subject

__all__ = ["LAUNCHER_RAISED", "marked", "raised_by_launcher", "run_kind", "escaped", "escaped_cell", "harness_error",
           "HARNESS_FINDING", "KERNEL_FINDING"]

# The attribute an exception that left the launcher call carries (every BaseException takes attributes).
LAUNCHER_RAISED = "__conformance_launcher_raised__"
HARNESS_FINDING = "harness-raised"  # the finding of a harness-error result
KERNEL_FINDING = "exception"  # the finding of an exception from the launcher that no kind judged (a crash)


# Exception groups (Hypothesis raises one for several distinct failures): builtin from Python 3.11, else the backport.
_GROUPS = tuple(t for t in (getattr(builtins, "BaseExceptionGroup", None),
                            getattr(sys.modules.get("exceptiongroup"), "BaseExceptionGroup", None)) if t is not None)


def marked(subject: Subject) -> Subject:
    """``subject`` with its launcher wrapped so that an exception leaving the launcher call is marked as
    the kernel's (:data:`LAUNCHER_RAISED`); returned as it is if it is marked already.  A subject declared
    ``pretend_cuda`` is called with its CPU tensors looking like CUDA ones (:mod:`~..compat.cuda_dispatch`)."""
    launcher = subject.launcher
    if getattr(launcher, LAUNCHER_RAISED, False):
        return subject
    if subject.pretend_cuda:
        from triton_conformance.compat.cuda_dispatch import pretending_cuda

        launcher = pretending_cuda(launcher)

    @functools.wraps(launcher)
    def launch(*args: Any, **kwargs: Any) -> Any:
        try:
            return launcher(*args, **kwargs)
        except Exception as exc:
            setattr(exc, LAUNCHER_RAISED, True)
            raise

    setattr(launch, LAUNCHER_RAISED, True)
    # target: what the launcher wraps, where the autotuners are found (the launcher itself when none is set).
    return replace(subject, launcher=launch,
                   target=subject.target if subject.target is not None else subject.launcher)


def raised_by_launcher(exc: BaseException) -> bool:
    """Whether ``exc`` (or, for an exception group, every exception in it) left the launcher call."""
    if isinstance(exc, _GROUPS):
        return all(raised_by_launcher(e) for e in exc.exceptions)
    return bool(getattr(exc, LAUNCHER_RAISED, False))


def escaped(subject: Subject, cell: str, exc: Exception, backend: Any = None) -> CellResult:
    """The result of a cell from which ``exc`` escaped: the kernel's crash, or a harness error (see the module).

    Raises :class:`~.discards.OutOfMemory` (an ExampleDiscarded: the runner skips the cell) for an
    out-of-memory error.
    """
    lost = backend.context_lost() if backend is not None else None
    if lost is not None:
        return cell_result(subject, cell, "crash", f"the CUDA context was lost in this cell: {lost}",
                           finding=cuda_poison_kind(lost) or "cuda-error",
                           details={"traceback": exception_text(exc), "context_lost": lost})
    raise_if_out_of_memory(exc, f"in {subject.name}[{cell}]")
    text = exception_text(exc)
    if raised_by_launcher(exc) or compile_error_kind(text) is not None:  # a kernel that failed to build is its own
        where = "by the launcher" if raised_by_launcher(exc) else "compiling the kernel"
        return cell_result(subject, cell, "crash", f"{type(exc).__name__} raised {where}, on an example the cell "
                           f"could not judge: {exc}", finding=KERNEL_FINDING, details={"traceback": text})
    return harness_error(subject, cell, exc)


def escaped_cell(subject: Subject, cell: str, exc: Exception, backend: Any = None) -> CellResult:
    """:func:`escaped` for an exception that left the runner itself (the worker's and the executor's
    last resort): an out-of-memory error is the cell's skip here, since no runner is left to skip it."""
    try:
        return escaped(subject, cell, exc, backend)
    except OutOfMemory as oom:
        return skipped(subject, cell, f"{oom.skips}: {oom}", code=f"discard:{oom.reason}")


def harness_error(subject: Subject | None, cell: str, exc: BaseException, *, where: str = "while running this cell",
                  name: str | None = None) -> CellResult:
    """The ``harness-error`` result of ``cell``: triton-conformance's own code raised ``exc``.

    ``subject`` may be None when it could not be found (``name`` then names it).
    """
    message = (f"triton-conformance's own code raised {type(exc).__name__} {where}: {exc}. This is a bug in "
               f"triton-conformance, not a verdict about the kernel: please report it with the traceback")
    details = {"traceback": exception_text(exc, limit=8000)}
    return cell_result(subject or name or "?", cell, "harness-error", message, finding=HARNESS_FINDING,
                       details=details)


def run_kind(run: Callable[[CellContext, str], CellResult], context: CellContext, value: str) -> CellResult:
    """``run(context, value)`` (a kind's ``run``) with the subject's launcher marked; an exception that
    escapes it becomes the cell's result by :func:`escaped` (BaseExceptions such as a spent budget or an
    oracle that raised pass through, for the runner)."""
    try:
        return run(replace(context, subject=marked(context.subject)), value)
    except Exception as exc:  # noqa: BLE001 - judged by where it came from
        return escaped(context.subject, context.cell, exc, context.backend)
