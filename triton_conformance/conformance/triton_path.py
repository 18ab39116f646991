"""Whether a cell's launcher reached Triton at all, on the interpreter.

A library's public API may call Triton only for CUDA tensors (``if
x.is_cuda:``), or only above some size, and take a torch fallback otherwise.
On the interpreter such a cell's verdicts are about the fallback, not the
kernels.  The interpreter's cost meter (:mod:`.search.interpreter_cost`)
already sees every launch; a cell that ran examples of a subject whose code
holds Triton kernels (found as the autotuners are, :func:`~.kinds.autotune.discovery.reveal`)
and launched none gets a note in its details (``no_triton_launch``), which the
terminal and the HTML report show.  It is a note, never a failure: the
fallback may be what the library means to run there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from triton_conformance.conformance.kinds.autotune.discovery import reveal, triton_kernel_of
from triton_conformance.model.cells import split_cell
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.subject import Subject

__all__ = ["NO_TRITON_LAUNCH", "declares_triton_kernels", "launch_note"]

NO_TRITON_LAUNCH = "no Triton kernel was launched: the launcher took a non-Triton path"
EMPTY = "empty"  # the class (of shapes, of layouts) whose examples hold no element
_HINT = (" (a library that calls Triton only for CUDA tensors runs its Triton path on the interpreter when "
         "declared pretend_cuda=True)")


def declares_triton_kernels(subject: Subject) -> bool:
    """Whether ``subject``'s code (its launcher, the helpers it names, a few calls deep) holds a Triton kernel."""
    try:
        return bool(reveal(subject.target if subject.target is not None else subject.launcher,
                           find=triton_kernel_of))
    except Exception:  # noqa: BLE001 - code that cannot be walked (a compiled extension): nothing to say
        return False


def launch_note(result: CellResult, meter: Any, subject: Subject) -> CellResult:
    """``result`` with the ``no_triton_launch`` note when the cell ran examples that the launcher did not refuse
    (a refusal needs no launch) other than the empty ones of an ``empty`` class, the cost meter (None: not
    metered, nothing is said) saw no launch, and the subject's code holds Triton kernels."""
    if meter is None or meter.launches or result.examples <= result.rejected_examples \
            or split_cell(result.cell)[1] == EMPTY:
        return result  # an empty example, or a refused one, needs no launch: returning early is right there
    if not declares_triton_kernels(subject):
        return result
    note = NO_TRITON_LAUNCH + ("" if subject.pretend_cuda else _HINT)
    return replace(result, details={**(result.details or {}), "no_triton_launch": note})
