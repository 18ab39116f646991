"""The example runners of the battery: what a search runs for each drawn spec, and a replay for one.

A runner is called with a spec and gives its verdict (see
:class:`~..search.engine.ExampleRunner`); it runs under the cell's judge and
allowance, taken from the cell's context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from triton_conformance.conformance.battery.backward import GRAD_OUTPUT, output_shape, run_gradient_example
from triton_conformance.conformance.battery.forward import run_example
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
        subject = self.context.subject
        shape = output_shape(subject, spec)
        strides, offset, _ = strides_for(shape, spec.layout(GRAD_OUTPUT))
        dtype = spec.dtypes[subject.contract.backward.grads[0]]
        return counterexample(subject, spec, {GRAD_OUTPUT: TensorView(shape=shape, strides=strides,
                                                                      storage_offset=offset, dtype=dtype)})
