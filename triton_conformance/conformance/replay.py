"""What every reproducer calls: run one example of a cell again, as its cell did, and say the verdict.

:func:`replay` imports the subject's module, finds the cell's kind, and asks
it to run the example again (:meth:`~.kinds.base.CellKind.replay`): a spec
through the same example runner the search used, under the same guards,
poison and sentinels (so a memory bug reproduces as the verdict, never as a
crash first); a design's seed for a stochastic cell; the fixed example of the
large-index cell.  It prints the example's tensors and the verdict, and raises
:class:`~triton_conformance.errors.StillFails` (an AssertionError) if the example still fails.
"""

from __future__ import annotations

import importlib
from typing import Any

from triton_conformance.conformance.backend import current_backend
from triton_conformance.conformance.kinds import judge_for, kind_of, subject_scopes
from triton_conformance.conformance.search.allowance import Allowance
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.conformance.search.policy import SearchPolicy
from triton_conformance.errors import StillFails
from triton_conformance.model.cells import cell_id
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.spec import Spec, strides_for
from triton_conformance.model.subject import Subject, get_subject

__all__ = ["replay", "replay_context"]


def replay_context(subject: Subject, cell: str, backend: Any, config: RunConfig | None = None) -> CellContext:
    """A context to run one example of ``subject``'s ``cell`` in, outside any search (no budgets)."""
    config = config or RunConfig(device="cuda" if backend.compiles else "interpreter")
    policy = SearchPolicy.of(config)
    return CellContext(subject=subject, cell=cell, backend=backend, config=config,
                       judge=judge_for(subject, backend), policy=policy,
                       allowance=Allowance(memory_cap=policy.memory_cap, shrink_calls=policy.shrink_calls))


def _print_tensors(subject: Subject, spec: Spec) -> None:
    for name, decl in subject.contract.inputs.items():
        shape = tuple(spec.dims[s] for s in decl.shape)
        strides, offset, _ = strides_for(shape, spec.layout(name))
        print(f"{name}: shape={shape} stride={strides} offset={offset} dtype={spec.dtypes.get(name)}")


def replay(module: str, name: str, cell: str, example: Any = None, *, device: str = "cpu",
           check: bool = True) -> Finding | str:
    """Run ``example`` of subject ``name``'s ``cell`` again (``device``: ``"cpu"`` for the interpreter, or a
    CUDA device); print the verdict.  With ``check``, raise AssertionError carrying the finding if it still
    fails.  Returns the Finding, or the word the example passed with (``"honoured"``, ``"rejected"``...)."""
    importlib.import_module(module)
    subject = get_subject(name)
    backend = current_backend(device)
    kind, value = kind_of(cell)
    context = replay_context(subject, cell, backend)
    if isinstance(example, dict) and "dims" in example:
        example = Spec.from_dict(example)
    if isinstance(example, Spec):
        _print_tensors(subject, example)
    with subject_scopes(context):
        verdict = kind.replay(context, value, example)
    words = verdict if isinstance(verdict, str) else f"{verdict.outcome} / {verdict.kind}: {verdict.message}"
    print(f"{cell_id(subject.name, cell)} at {getattr(example, 'dims', example)}")
    print(f"verdict: {words}")
    if check and isinstance(verdict, Finding):
        raise StillFails(f"{subject.name}: {verdict.outcome} ({verdict.kind}): {verdict.message}")
    return verdict
