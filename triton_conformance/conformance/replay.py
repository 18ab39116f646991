"""What every reproducer calls: run one example of a cell again, as its cell did, and say the verdict.

:func:`replay` imports the subject's module, finds the cell's kind, and asks
it to run the example again (:meth:`~.kinds.base.CellKind.replay`): a spec
through the same example runner the search used, under the same guards,
poison and sentinels (so a memory bug reproduces as the verdict, never as a
crash first); a design's seed for a stochastic cell; the fixed example of the
large-index cell.  It prints the example's tensors and the verdict, and raises
:class:`~triton_conformance.errors.StillFails` (an AssertionError) if the example still fails.

:func:`example_tensors` rebuilds a spec's tensors as the example runs them (the same
:func:`~triton_conformance.strategies._internal.tensors.build_inputs` and
:func:`~.battery.backward.grad_output`), for a person to look at; inside :func:`dumping_to`, :func:`replay`
saves them (``triton-conformance replay --dump FILE``) before it runs the example.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from triton_conformance.conformance.backend import current_backend
from triton_conformance.conformance.battery.backward import grad_output, output_shape
from triton_conformance.conformance.battery.checks import FIRST
from triton_conformance.conformance.harness import marked
from triton_conformance.conformance.kinds import judge_for, kind_of, subject_scopes
from triton_conformance.conformance.judge import claimed
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.conformance.search.allowance import Allowance
from triton_conformance.conformance.search.policy import SearchPolicy
from triton_conformance.errors import InvalidArgument, StillFails
from triton_conformance.model.cells import cell_id
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.spec import Spec, strides_for
from triton_conformance.model.subject import Subject, get_subject
from triton_conformance.strategies._internal.tensors import build_inputs, torch_dtype

__all__ = ["ExampleTensors", "dumping_to", "example_tensors", "replay", "replay_context"]

# Where replay() saves the example's tensors before running it (set by dumping_to), or None.
_DUMP_TO: contextvars.ContextVar[str | None] = contextvars.ContextVar("dump_to", default=None)


def replay_context(subject: Subject, cell: str, backend: Any, config: RunConfig | None = None) -> CellContext:
    """A context to run one example of ``subject``'s ``cell`` in, outside any search (no budgets)."""
    config = config or RunConfig(device="cuda" if backend.compiles else "interpreter")
    subject, _ = claimed(subject, backend.compiles)  # as the cell read it: its per-device claims resolved
    policy = SearchPolicy.of(config)
    # The launcher called as every cell calls it (marked, and pretending CUDA where the subject says so).
    return CellContext(subject=marked(subject), cell=cell, backend=backend, config=config,
                       judge=judge_for(subject, backend), policy=policy,
                       allowance=Allowance(memory_cap=policy.memory_cap, shrink_calls=policy.shrink_calls))


def _print_tensors(subject: Subject, spec: Spec) -> None:
    for name, decl in subject.contract.inputs.items():
        shape = tuple(spec.dims[s] for s in decl.shape)
        strides, offset, _ = strides_for(shape, spec.layout(name))
        print(f"{name}: shape={shape} stride={strides} offset={offset} dtype={spec.dtypes.get(name)}")


@dataclass(frozen=True)
class ExampleTensors:
    """One example's values, as its launcher gets them.

    - ``inputs``: each input as the launcher is handed it: its real shape, strides and storage offset, a view
      into storage whose other elements hold the first sentinel (NaN for floats), as in the first run;
    - ``scalars``: the scalar arguments, by name;
    - ``grad_outputs``: for a ``grad`` cell, the grad_output the backward is handed (its layout, values and
      sentinel storage), one per output that gets a gradient; empty for any other cell;
    - ``spec``: the :class:`~triton_conformance.model.spec.Spec` they were built from.
    """

    subject: str
    cell: str
    spec: Spec
    inputs: dict[str, torch.Tensor]
    scalars: dict[str, Any]
    grad_outputs: tuple[torch.Tensor, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What ``replay --dump`` saves: ``inputs``, ``scalars``, ``grad_outputs`` and ``spec`` (a plain dict)."""
        return {"inputs": dict(self.inputs), "scalars": dict(self.scalars), "grad_outputs": list(self.grad_outputs),
                "spec": self.spec.to_dict(), "subject": self.subject, "cell": self.cell}

    def save(self, path: str) -> None:
        """``torch.save`` :meth:`to_dict` to ``path`` (``torch.load(path)`` reads it back, views intact)."""
        torch.save(self.to_dict(), path)


def example_tensors(subject: Subject, cell: str, example: Any, *, device: str = "cpu",
                    grad_dtype: str | None = None) -> ExampleTensors:
    """The tensors ``example`` (a Spec, or its dict) of ``subject``'s ``cell`` runs on, built on ``device``.

    grad_output is in ``grad_dtype`` (default: the dtype of the first input that gets a gradient, which is the
    output's for a launcher whose output keeps its input's dtype; the battery uses the output's own)."""
    kind, _ = kind_of(cell)  # an unknown cell is an InvalidArgument naming the known ones
    if kind.spec_examples and isinstance(example, dict) and "dims" in example:
        example = Spec.from_dict(example)
    if not kind.spec_examples or not isinstance(example, Spec):
        raise InvalidArgument(f"example_tensors: example={example!r} of cell={cell!r}, expected a Spec (the "
                              "counterexample of a searched or grad cell); a stochastic design's seed or the "
                              "large-index cell's fixed plan has no spec to build")
    backend = current_backend(device)
    sentinel = FIRST[0]
    built = build_inputs(subject.contract, example, sentinel=sentinel, device=backend.device)
    grads: tuple[torch.Tensor, ...] = ()
    backward = subject.contract.backward
    if kind.dimension.name == "grad" and backward is not None:
        dtype = torch_dtype(grad_dtype or example.dtypes[backward.grads[0]])
        grads = (grad_output(example, output_shape(subject, example), dtype, sentinel, backend.device).view,)
    return ExampleTensors(subject=subject.name, cell=cell, spec=example, inputs=built.views,
                          scalars=dict(example.scalars), grad_outputs=grads)


@contextlib.contextmanager
def dumping_to(path: str) -> Iterator[None]:
    """Inside it, :func:`replay` first saves its example's tensors to ``path`` (:meth:`ExampleTensors.save`)."""
    token = _DUMP_TO.set(path)
    try:
        yield
    finally:
        _DUMP_TO.reset(token)


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
    if _DUMP_TO.get() is not None:
        example_tensors(subject, cell, example, device=device).save(_DUMP_TO.get())
        print(f"saved the example's inputs, scalars and grad_outputs to {_DUMP_TO.get()} (torch.load it)")
    with subject_scopes(context):
        verdict = kind.replay(context, value, example)
    words = verdict if isinstance(verdict, str) else f"{verdict.outcome} / {verdict.kind}: {verdict.message}"
    print(f"{cell_id(subject.name, cell)} at {getattr(example, 'dims', example)}")
    print(f"verdict: {words}")
    if check and isinstance(verdict, Finding):
        raise StillFails(f"{subject.name}: {verdict.outcome} ({verdict.kind}): {verdict.message}")
    return verdict
