"""The example runners of the battery: what a search runs for each drawn spec, and a replay for one.

A runner is called with a spec and gives its verdict (see
:class:`~..search.engine.ExampleRunner`); it runs under the cell's judge and
allowance, taken from the cell's context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from triton_conformance.conformance.battery.backward import (
    GRAD_OUTPUT,
    gradient_outputs,
    grad_output_key,
    output_shape,
    run_gradient_example,
)
from triton_conformance.conformance.battery.forward import run_example
from triton_conformance.conformance.judge import OracleError
from triton_conformance.conformance.results import counterexample
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.model.outcomes import Counterexample, Finding, TensorView
from triton_conformance.model.spec import Spec, strides_for

__all__ = ["ForwardExamples", "BackwardExamples"]


@dataclass
class ForwardExamples:
    """Each example a launcher call (or two, or three): the forward battery.

    ``subject``: the subject to call, where it is not the context's own (a tuned launcher);
    ``determinism``: also compare repeated calls bit for bit.
    """

    context: CellContext
    determinism: bool = False
    subject: Any = None
    inside_only: ClassVar[bool] = False

    def __call__(self, spec: Spec) -> Finding | str:
        c = self.context
        return run_example(self.subject or c.subject, spec, c.backend, c.judge, determinism=self.determinism,
                           allowance=c.allowance)

    def counterexample(self, spec: Spec) -> Counterexample:
        return counterexample(self.context.subject, spec)


@dataclass
class BackwardExamples:
    """Each example a forward and a backward pass: the backward battery, inside the contract only.

    ``second``: every memory check in both sentinels (the repeat protocol); ``determinism``: a repeat
    compared bit for bit.
    """

    context: CellContext
    second: bool = False
    determinism: bool = False
    inside_only: ClassVar[bool] = True

    def __call__(self, spec: Spec) -> Finding | str:
        c = self.context
        return run_gradient_example(c.subject, spec, c.backend, c.judge, second=self.second,
                                    determinism=self.determinism, allowance=c.allowance)

    def counterexample(self, spec: Spec) -> Counterexample:
        """The spec's tensors and each output's grad_output (``grad_output``, ``grad_output[1]``...)."""
        subject = self.context.subject
        dtype = spec.dtypes[subject.contract.backward.grads[0]]
        views = {}
        for position in self._positions(spec):
            shape = output_shape(subject, spec, position)
            key = grad_output_key(position)
            strides, offset, _ = strides_for(shape, spec.layouts.get(key) or spec.layout(GRAD_OUTPUT))
            views[key] = TensorView(shape=shape, strides=strides, storage_offset=offset, dtype=dtype)
        return counterexample(subject, spec, views)

    def _positions(self, spec: Spec) -> tuple[int, ...]:
        """The outputs that carry a gradient: declared, or (by default) the oracle's float outputs on the
        spec's shapes (zeros: only their number and dtypes matter)."""
        subject = self.context.subject
        if subject.contract.backward.outputs is not None:
            return tuple(subject.contract.backward.outputs)
        zeros = {}
        for name, decl in subject.contract.inputs.items():
            shape = tuple(spec.dims[s] for s in decl.shape)
            zeros[name] = torch.zeros(shape, dtype=getattr(torch, spec.dtypes[name]))
        try:
            return gradient_outputs(subject, self.context.judge.oracle(zeros, spec.scalars)) or (0,)
        except (Exception, OracleError):  # noqa: BLE001 - the cell's verdict stands; its display keeps output 0
            return (0,)
