"""One backward example, for a subject that declares a backward (``register(..., backward=...)``).

The launcher's forward runs on the spec's inputs (leaves that require grad,
embedded in sentinel storage as every example's inputs are), then every
output that carries a gradient (``Backward.outputs``; by default every float
output: a fused add+norm's ``(out, residual)`` both) is backpropagated together,
each with a ``grad_output`` of its own values, drawn with a layout class of its
own (``spec.layouts[GRAD_OUTPUT]``, or ``grad_output[i]`` for output ``i`` where
the spec has one: contiguous, transposed, sliced, padded, offset, or stride-0
broadcast as ``.sum().backward()`` and ``expand()`` produce), itself in
sentinel storage.  Both passes run under the guarded,
poisoned allocations of :mod:`.memory`.  The checks are the forward's
(:mod:`.checks`), with the gradients as the outputs:

- agreement with float64 autograd of the oracle, through the same
  :class:`~..judge.Judge` as outputs (:meth:`~..judge.Judge.compare_gradients`);
- a missing gradient (None for an input the contract says gets one);
- memory: a backward that writes into a saved input or into grad_output
  (unless ``Backward(overwrites_grad_output=True)``), past the ends of a
  gradient it allocated, or leaves gradient elements unwritten;
- with ``second=True`` (the ``grad:memory`` cell), the repeat protocol in the
  other sentinel and poison: reads outside the inputs and grad_output, or
  nondeterminism (only for a backward declared deterministic);
- with ``determinism=True``, a repeat compared bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from triton_conformance.conformance.battery.checks import FIRST, OTHER, Run, memory_findings, repeat_findings
from triton_conformance.conformance.battery.launching import launch, outputs_of
from triton_conformance.conformance.battery.memory import guarded_allocations
from triton_conformance.conformance.judge import Judge, exception_text
from triton_conformance.conformance.discards import discarding_out_of_memory, raise_if_out_of_memory
from triton_conformance.conformance.search.allowance import Allowance
from triton_conformance.conformance.discards import ExampleDiscarded
from triton_conformance.model.outcomes import Finding, worst
from triton_conformance.model.spec import GUARD_ELEMENTS, Spec, strides_for
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.tensors import _sentinel_value, build_inputs
from triton_conformance.strategies._internal.values import fill_values

__all__ = ["GRAD_OUTPUT", "gradient_outputs", "grad_output_key", "output_shape", "output_symbols",
           "run_gradient_example"]

# The spec's layouts key for grad_output (not an input of the contract: the suite draws it).
GRAD_OUTPUT = "grad_output"


def grad_output_key(position: int) -> str:
    """The spec's layouts key for output ``position``'s grad_output (``GRAD_OUTPUT`` for output 0, and the
    fallback of an output the spec has no layout of its own for)."""
    return GRAD_OUTPUT if position == 0 else f"{GRAD_OUTPUT}[{position}]"


def output_symbols(subject: Subject, position: int = 0) -> tuple[str, ...]:
    """The dim symbols of output ``position``'s shape, as the backward declares it."""
    backward = subject.contract.backward
    return (backward.outputs or {}).get(position, backward.output)


def output_shape(subject: Subject, spec: Spec, position: int = 0) -> tuple[int, ...]:
    return tuple(spec.dims[s] for s in output_symbols(subject, position))


def gradient_outputs(subject: Subject, outputs: tuple) -> tuple[int, ...]:
    """The positions of the ``outputs`` (the launcher's, or the oracle's) that carry a gradient: those the
    backward declares, else every float tensor."""
    declared = subject.contract.backward.outputs
    if declared is not None:
        return tuple(declared)
    return tuple(i for i, o in enumerate(outputs) if isinstance(o, torch.Tensor) and o.is_floating_point())


@dataclass
class GradOutput:
    """grad_output as the backward gets it: a view of sentinel storage, a snapshot of that storage, and its
    values in float64 (what the oracle backpropagates)."""

    view: torch.Tensor
    buffer: torch.Tensor
    snapshot: torch.Tensor
    values: torch.Tensor

    def mutated(self) -> bool:
        return not torch.equal(self.buffer.view(torch.uint8), self.snapshot)


def grad_output(spec: Spec, shape: tuple[int, ...], dtype: torch.dtype, sentinel: str, device: Any,
                position: int = 0) -> GradOutput:
    """Output ``position``'s grad_output as a view of ``spec``'s layout for it, in sentinel-filled storage,
    with values of its own (output 0's seed is the one a single output always had)."""
    layout = spec.layouts.get(grad_output_key(position)) or spec.layout(GRAD_OUTPUT)
    strides, offset, span = strides_for(shape, layout)
    buffer = torch.full((span + GUARD_ELEMENTS,), _sentinel_value(dtype, sentinel), dtype=dtype, device=device)
    physical = tuple(1 if d in layout.broadcast else s for d, s in enumerate(shape))
    if buffer.numel() and all(shape):
        values = fill_values(physical, dtype, "ordinary", spec.seed * 7919 + 997 + 104729 * position,
                             device=device).to(dtype)
        phys_strides = tuple(0 if d in layout.broadcast else s for d, s in enumerate(strides))
        buffer.as_strided(physical, phys_strides, offset).copy_(values.to(device))
    view = buffer.as_strided(shape, strides, offset)
    return GradOutput(view, buffer, buffer.view(torch.uint8).clone(), view.detach().to(torch.float64, copy=True))


def _crash(what: str, exc: BaseException) -> Finding:
    raise_if_out_of_memory(exc, f"in the {what}")  # the machine's limit: the example is discarded
    return Finding("crash", "exception", f"{type(exc).__name__} in the {what} on an input inside the contract: "
                   f"{exc}", {"traceback": exception_text(exc)})


def _backprop(subject: Subject, spec: Spec, backend: Any, sentinel: str, variant: int,
              allowance: Allowance, contents_of: Any = None) -> Run:
    """Forward and backward once: a :class:`Run` whose outputs are the gradients (``raw``: {output position:
    its grad_output}); ``contents_of``: an earlier pass's inputs, whose contents are copied, not drawn again.
    Each pass is one of the example's calls: its part of the example's share of interpreted work."""
    contract = subject.contract
    names = contract.backward.grads
    with discarding_out_of_memory("building the inputs"):
        built = build_inputs(contract, spec, sentinel=sentinel, device=backend.device, contents_of=contents_of)
    before = {n: v.detach().clone() for n, v in built.views.items()}
    for n in names:
        built.views[n].requires_grad_(True)

    def failed(error: Finding, gos: dict[int, GradOutput] | None = None) -> Run:
        return Run(None, error, before=before, built=built, raw=gos)

    allowance.call_started()
    with guarded_allocations(device_override=backend.allocation_device, variant=variant):
        try:
            raw = launch(subject, built.views, spec.scalars, seed=spec.seed, dims=spec.dims)
        except ExampleDiscarded:
            raise
        except Exception as exc:  # noqa: BLE001 - any exception is an outcome
            return failed(_crash("forward", exc))
    backend.synchronize()
    mutated = built.mutated(contract.inplace)
    if mutated:  # the forward's own memory cells report this; here it would be blamed on the backward
        return failed(Finding("unsafe", "mutated-input", f"the forward changed the storage of input(s) {mutated}",
                              {"inputs": mutated}))
    outs = outputs_of(subject, raw, built.views)
    leaves = [built.views[n] for n in names]
    gos: dict[int, GradOutput] = {}
    for position in gradient_outputs(subject, outs) or (0,):
        name = "the output" if len(outs) == 1 else f"output[{position}]"
        if position >= len(outs):
            return failed(Finding("wrong", "bad-output", f"the launcher returned {len(outs)} output(s), the backward "
                                  f"declares a gradient for output[{position}]"))
        out = outs[position]
        # An output that is a differentiated input itself (x.contiguous() of a contiguous x is x) has no grad_fn,
        # and its gradient is grad_output.
        if not isinstance(out, torch.Tensor) or (out.grad_fn is None and not any(out is leaf for leaf in leaves)):
            return failed(Finding("wrong", "no-backward", f"{name} has no grad_fn: no gradient flows back from it to "
                                  f"{list(names)} (a forward that detaches, or runs under no_grad?)",
                                  {"output": position}))
        shape = output_shape(subject, spec, position)
        if tuple(out.shape) != shape:
            hint = "" if contract.backward.outputs is not None else (
                " (every float output carries a gradient unless Backward(outputs=...) says which, and how shaped)")
            return failed(Finding("wrong", "bad-shape", f"{name} shape {tuple(out.shape)}, the backward declares "
                                  f"{shape}{hint}", {"output": position}))
        gos[position] = grad_output(spec, shape, out.dtype, sentinel, backend.device, position)
    allowance.call_started()
    with guarded_allocations(device_override=backend.allocation_device, variant=variant) as allocations:
        try:  # every output at once: sum_i <out_i, g_i>, as a training step backpropagates them
            grads = torch.autograd.grad([outs[p] for p in gos], leaves, grad_outputs=[g.view for g in gos.values()],
                                        allow_unused=True)
        except ExampleDiscarded:
            raise
        except Exception as exc:  # noqa: BLE001
            return failed(_crash("backward", exc), gos)
    backend.synchronize()
    return Run(tuple(grads), None, allocations, raw=gos, before=before, built=built)


def run_gradient_example(subject: Subject, spec: Spec, backend: Any, judge: Judge | None = None, *,
                         second: bool = False, determinism: bool = False,
                         allowance: Allowance | None = None) -> Finding | str:
    """Every backward check on one example: a Finding, or ``"honoured"``."""
    judge = judge or Judge(subject, on_cuda=backend.compiles)
    allowance = allowance or Allowance()
    allowance.example_started(calls=2 * (1 + second + determinism), before_inputs=True)  # forward, backward
    backward = subject.contract.backward

    def run(sentinel: str, variant: int) -> Run:
        return _backprop(subject, spec, backend, sentinel, variant, allowance, contents_of=first.built)

    first = _backprop(subject, spec, backend, *FIRST, allowance)
    if first.error is not None:
        return first.error
    gos: dict[int, GradOutput] = first.raw
    findings = memory_findings(first.built, first, inplace=subject.contract.inplace, what="the backward",
                               names=backward.grads)
    mutated = [p for p, go in gos.items() if go.mutated()]
    if not backward.overwrites_grad_output and mutated:
        which = "grad_output" if list(gos) == [0] else f"the grad_output of output(s) {mutated}"
        findings.append(Finding("unsafe", "mutated-grad-output", f"the backward wrote into {which} (declare "
                                "Backward(overwrites_grad_output=True) if that is intended)"))
    wrong = judge.compare_gradients(first.before, {p: go.values for p, go in gos.items()}, spec.dims, spec.dtypes,
                                    spec.scalars, first.outputs)
    if wrong is not None:
        findings.append(wrong)
    other = None
    if second and not findings:
        other = run(*OTHER)
        if other.error is not None:
            findings.append(other.error)
            other = None
    findings += repeat_findings(run, first, other if backward.deterministic else None, determinism=determinism,
                                already_found=bool(findings), what="backward passes",
                                around="the inputs and grad_output")
    found = worst(findings)
    return "honoured" if found is None else found
