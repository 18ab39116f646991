"""The backward battery: one example of a subject that declares a backward (``register(..., backward=...)``).

One example runs the launcher's forward on the spec's inputs (leaves that
require grad, embedded in sentinel storage as the searched cells build them),
then backpropagates a ``grad_output`` drawn with a layout class of its own
(contiguous, transposed, sliced, padded, offset, or stride-0 broadcast as
``.sum().backward()`` and ``expand()`` produce), itself embedded in sentinel
storage.  The forward and the backward run under the guarded, poisoned
allocations of :mod:`.memory`.  From that come the checks:

- agreement with the oracle: the float64 autograd of the forward oracle on
  float64 copies of the inputs, backpropagating the same grad_output in
  float64; every declared gradient is compared, each with the bound of its own
  reduction (dW sums over the rows, so its bound grows with M:
  ``Contract.grad_reduction``, through ``oracles/tolerance.default_bound``);
- a missing gradient (None for an input the contract says gets one);
- memory: a backward that writes into a saved input or into grad_output
  (unless ``Backward(overwrites_grad_output=True)``), past the ends of a
  gradient it allocated (guard bands), or leaves gradient elements unwritten
  (poison left);
- with ``second=True`` (the ``grad:memory`` cell), the same example again in
  the other sentinel and poison: a gradient that changes reads outside its
  inputs (or of grad_output), unless the repeat shows it is nondeterministic;
- with ``determinism=True``, a repeat compared bit for bit.

:func:`.gradient_search.search_gradients` searches a cell's specs with
Hypothesis (its own shrinking; no per-dim pass); :func:`replay_gradients` is
what a reproducer calls.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st

from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.compiles import BudgetExhausted
from triton_conformance.conformance.judge import (
    Judge,
    OracleError,
    as_tuple,
    exception_text,
)
from triton_conformance.conformance.launching import launch, outputs_of
from triton_conformance.conformance.memory import (
    flat_bytes,
    guarded_allocations,
    unwritten_elements,
)
from triton_conformance.conformance.safety import discarding_out_of_memory, raise_if_out_of_memory
from triton_conformance.errors import StillFails
from triton_conformance.model.outcomes import (
    Finding,
    worst,
)
from triton_conformance.model.spec import GUARD_ELEMENTS, Layout, Spec, strides_for
from triton_conformance.model.subject import Subject
from triton_conformance.oracles.comparison import compare
from triton_conformance.oracles.tolerance import default_bound
from triton_conformance.strategies._internal.layouts import layouts
from triton_conformance.strategies._internal.specs import specs
from triton_conformance.strategies._internal.tensors import (
    _sentinel_value,
    build_inputs,
)
from triton_conformance.strategies._internal.values import fill_values

__all__ = [
    "GRAD_LAYOUTS",
    "GRAD_OUTPUT",
    "cell_options",
    "gradient_specs",
    "output_shape",
    "replay_gradients",
    "run_gradient_example",
]

# The spec's layouts key for grad_output (not an input of the contract: the suite draws it).
GRAD_OUTPUT = "grad_output"
GRAD_LAYOUTS = ("contiguous", "transposed", "sliced", "padded", "offset", "broadcast")


def output_shape(subject: Subject, spec: Spec) -> tuple[int, ...]:
    return tuple(spec.dims[s] for s in subject.contract.backward.output)


def gradient_specs(subject: Subject, *, grad_layout: str | None, dtype: str | None, memory: bool,
                   dtypes: tuple[str, ...], max_elements: int, max_outer: int) -> st.SearchStrategy[Spec]:
    """Specs of ``subject``'s forward inputs (contiguous, or any claimed layout with ``memory``) plus a
    layout for grad_output: of class ``grad_layout``, or any class (``None``)."""
    contract = subject.contract
    rank = len(contract.backward.output)
    base = specs(contract, layout="memory" if memory else None, dtype=dtype, dtypes=dtypes,
                 max_elements=max_elements, max_outer=max_outer)
    if grad_layout is None:
        classes = [k for k in GRAD_LAYOUTS if rank >= 2 or k not in ("transposed", "padded")]
        layout = st.sampled_from(classes).flatmap(lambda k: layouts(k, rank))
    elif grad_layout == "broadcast" and rank:
        # Every dim stride 0 first (the grad of .sum(): ones expanded), then any subset.
        layout = st.one_of(st.just(Layout("broadcast", broadcast=tuple(range(rank)))), layouts("broadcast", rank))
    else:
        layout = layouts(grad_layout, rank)
    return st.tuples(base, layout).map(
        lambda pair: Spec(**{**_spec_fields(pair[0]), "layouts": {**pair[0].layouts, GRAD_OUTPUT: pair[1]}}))


def _spec_fields(spec: Spec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in spec.__dataclass_fields__}


@dataclass
class _GradOutput:
    view: torch.Tensor
    buffer: torch.Tensor
    snapshot: torch.Tensor
    values: torch.Tensor  # its contents before the backward, in float64 (what the oracle backpropagates)


def _grad_output(spec: Spec, shape: tuple[int, ...], dtype: torch.dtype, sentinel: str, device: Any) -> _GradOutput:
    """grad_output as a view of ``spec``'s layout for it, in sentinel-filled storage."""
    layout = spec.layout(GRAD_OUTPUT)
    strides, offset, span = strides_for(shape, layout)
    buffer = torch.full((span + GUARD_ELEMENTS,), _sentinel_value(dtype, sentinel), dtype=dtype, device=device)
    physical = tuple(1 if d in layout.broadcast else s for d, s in enumerate(shape))
    if buffer.numel() and all(shape):
        values = fill_values(physical, dtype, "ordinary", spec.seed * 7919 + 997, device=device).to(dtype)
        phys_strides = tuple(0 if d in layout.broadcast else s for d, s in enumerate(strides))
        buffer.as_strided(physical, phys_strides, offset).copy_(values.to(device))
    view = buffer.as_strided(shape, strides, offset)
    return _GradOutput(view, buffer, buffer.view(torch.uint8).clone(), view.detach().to(torch.float64, copy=True))


@dataclass
class _Backprop:
    grads: tuple | None = None
    error: Finding | None = None
    allocations: list | None = None
    before: dict | None = None  # the inputs' contents before the forward (what the oracle is given)


def _crash(what: str, exc: BaseException) -> Finding:
    raise_if_out_of_memory(exc, f"in the {what}")  # the machine's limit: the example is discarded
    return Finding("crash", "exception", f"{type(exc).__name__} in the {what} on an input inside the contract: "
                   f"{exc}", {"traceback": exception_text(exc)})


def _backprop(subject: Subject, spec: Spec, backend: Backend, sentinel: str, variant: int
              ) -> tuple[Any, _GradOutput | None, _Backprop]:
    """Forward and backward once; the built inputs, grad_output and what the backward gave."""
    contract = subject.contract
    names = contract.backward.grads
    with discarding_out_of_memory("building the inputs"):
        built = build_inputs(contract, spec, sentinel=sentinel, device=backend.device)
    before = {n: v.detach().clone() for n, v in built.views.items()}
    for n in names:
        built.views[n].requires_grad_(True)
    with guarded_allocations(device_override=backend.allocation_device, variant=variant):
        try:
            raw = launch(subject, built.views, spec.scalars, seed=spec.seed)
        except BudgetExhausted:
            raise
        except Exception as exc:  # noqa: BLE001 - any exception is an outcome
            return built, None, _Backprop(error=_crash("forward", exc))
    backend.synchronize()
    mutated = built.mutated(contract.inplace)
    if mutated:  # the forward's own memory cells report this; here it would be blamed on the backward
        return built, None, _Backprop(error=Finding("unsafe", "mutated-input", f"the forward changed the storage "
                                                    f"of input(s) {mutated}", {"inputs": mutated}))
    out = outputs_of(subject, raw, built.views)[0]
    if not isinstance(out, torch.Tensor) or out.grad_fn is None:
        return built, None, _Backprop(error=Finding(
            "wrong", "no-backward", "the output has no grad_fn: no gradient flows back to "
            f"{list(names)} (a forward that detaches, or runs under no_grad?)"))
    shape = output_shape(subject, spec)
    if tuple(out.shape) != shape:
        return built, None, _Backprop(error=Finding(
            "wrong", "bad-shape", f"output shape {tuple(out.shape)}, the backward declares {shape}"))
    go = _grad_output(spec, shape, out.dtype, sentinel, backend.device)
    leaves = [built.views[n] for n in names]
    with guarded_allocations(device_override=backend.allocation_device, variant=variant) as allocations:
        try:
            grads = torch.autograd.grad(out, leaves, grad_outputs=go.view, allow_unused=True)
        except BudgetExhausted:
            raise
        except Exception as exc:  # noqa: BLE001
            return built, go, _Backprop(error=_crash("backward", exc))
    backend.synchronize()
    return built, go, _Backprop(grads=grads, allocations=allocations, before=before)


def _memory_findings(subject: Subject, built: Any, go: _GradOutput, call: _Backprop) -> list[Finding]:
    backward = subject.contract.backward
    findings = []
    mutated = built.mutated(subject.contract.inplace)
    if mutated:
        findings.append(Finding("unsafe", "mutated-input", f"the backward changed the storage of saved input(s) "
                                f"{mutated}", {"inputs": mutated}))
    if not backward.overwrites_grad_output and not torch.equal(go.buffer.view(torch.uint8), go.snapshot):
        findings.append(Finding("unsafe", "mutated-grad-output", "the backward wrote into grad_output (declare "
                                "Backward(overwrites_grad_output=True) if that is intended)"))
    for alloc in call.allocations:
        damage = alloc.guard_damage()
        if damage:
            side, at = damage[0]
            findings.append(Finding(
                "unsafe", "oob-write", f"the backward wrote outside a {tuple(alloc.tensor.shape)} "
                f"{alloc.tensor.dtype} allocation: guard band {side} changed (first changed byte at offset {at})",
                {"side": side, "byte_offset": at, "span_bytes": alloc.span_bytes}))
    for name, grad in zip(backward.grads, call.grads):
        if not isinstance(grad, torch.Tensor):
            continue
        owner = next((a for a in call.allocations if a.owns(grad)), None)
        if owner is None:
            continue
        holes = unwritten_elements(grad.detach(), owner.variant)
        if holes.any():
            first = tuple(int(v) for v in torch.nonzero(holes)[0]) if holes.dim() else ()
            findings.append(Finding(
                "unsafe", "unwritten", f"grad {name}: {int(holes.sum())} of {grad.numel()} elements never "
                f"written; first at {first}", {"gradient": name, "unwritten": int(holes.sum()),
                                               "total": grad.numel(), "first_index": first}))
    return findings


def _oracle_grads(subject: Subject, before: dict, go: _GradOutput, spec: Spec) -> tuple:
    contract = subject.contract
    names = contract.backward.grads
    copies = {n: (v.to(torch.float64, copy=True) if v.dtype.is_floating_point else v.clone())
              for n, v in before.items()}
    for n in names:
        copies[n].requires_grad_(True)
    try:
        with torch.enable_grad():
            ref = as_tuple(contract.oracle(**copies, **spec.scalars))[0]
            grads = torch.autograd.grad(ref, [copies[n] for n in names],
                                        grad_outputs=go.values, allow_unused=True)
    except Exception as exc:  # noqa: BLE001 - an error in the user's own reference is theirs
        raise_if_out_of_memory(exc, "in the oracle's float64 autograd")
        raise OracleError("oracle's float64 autograd", exc) from None
    return tuple(torch.zeros_like(copies[n]) if g is None else g for n, g in zip(names, grads))


def _error_scales(subject: Subject, before: dict, go: _GradOutput, spec: Spec) -> dict[str, Any]:
    fn = subject.contract.backward.error_scale
    if fn is None:
        return {}
    copies = {n: (v.to(torch.float64) if v.dtype.is_floating_point else v.clone()) for n, v in before.items()}
    try:
        with torch.no_grad():
            scales = fn(**copies, grad_output=go.values, **spec.scalars)
        return dict(scales)
    except Exception as exc:  # noqa: BLE001
        raise OracleError("backward error_scale", exc) from None


def _judge_grads(subject: Subject, spec: Spec, grads: tuple, refs: tuple, scales: dict[str, Any]) -> Finding | None:
    contract = subject.contract
    for name, grad, ref in zip(contract.backward.grads, grads, refs):
        if grad is None:
            return Finding("wrong", "missing-gradient", f"no gradient for {name!r} (the backward returned None "
                           "for an input the contract says gets one)", {"gradient": name})
        finite = ref[torch.isfinite(ref)]
        scale = float(finite.abs().max()) if finite.numel() else 1.0
        if name in scales:
            scale = scales[name].abs().to(torch.float64) if isinstance(scales[name], torch.Tensor) else scales[name]
        reduction = contract.grad_reduction(name, spec.dims)
        accumulate = contract.grad_accumulation(name, spec.dtypes)  # each gradient's own (Backward.accumulate)
        bound = default_bound(out_dtype=str(grad.dtype).replace("torch.", ""), accumulate=accumulate,
                              reduction=reduction, scale=scale)
        mismatch = compare(grad.detach(), ref.detach(), bound, name=f"grad {name}")
        if mismatch is not None:
            details = {**mismatch.to_dict(), "gradient": name, "reduction": reduction}
            return Finding("wrong", mismatch.kind, f"{mismatch.message} (reduction {reduction} terms)", details)
    return None


def _bits_differ(a: tuple, b: tuple) -> bool:
    for x, y in zip(a, b):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            continue
        if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(flat_bytes(x), flat_bytes(y)):
            return True
    return False


def run_gradient_example(subject: Subject, spec: Spec, backend: Backend, judge: Judge | None = None, *,
                         second: bool = False, determinism: bool = False) -> Finding | str:
    """Every backward check on one example: a Finding, or ``"honoured"``."""
    judge = judge or Judge(subject, on_cuda=backend.compiles)
    built, go, call = _backprop(subject, spec, backend, "nan", 0)
    if call.error is not None:
        return call.error
    findings: list[Finding] = _memory_findings(subject, built, go, call)
    wrong = _judge_grads(subject, spec, call.grads, _oracle_grads(subject, call.before, go, spec),
                         _error_scales(subject, call.before, go, spec))
    if wrong is not None:
        findings.append(wrong)
    deterministic = subject.contract.backward.deterministic
    if second and not findings:
        _, _, other = _backprop(subject, spec, backend, "big", 1)
        if other.error is not None:
            findings.append(other.error)
        elif deterministic and _bits_differ(call.grads, other.grads):
            _, _, again = _backprop(subject, spec, backend, "nan", 0)
            if again.error is None and _bits_differ(call.grads, again.grads):
                findings.append(Finding("wrong", "nondeterministic", "two backward passes on identical inputs "
                                        "gave different gradient bits"))
            else:
                findings.append(Finding(
                    "unsafe", "poisoned-read", "a gradient changed when only the memory around the inputs and "
                    "grad_output (gaps, padding, guard band) changed: the backward reads outside their elements"))
    if determinism and not findings:
        _, _, again = _backprop(subject, spec, backend, "nan", 0)
        if again.error is None and _bits_differ(call.grads, again.grads):
            findings.append(Finding("wrong", "nondeterministic", "two backward passes on identical inputs gave "
                                    "different gradient bits"))
    found = worst(findings)
    return "honoured" if found is None else found


def cell_options(cell: str) -> dict[str, Any]:
    """What a ``grad:...`` cell pins: the grad_output layout, the dtype, memory layouts, repeats."""
    value = cell.split(":", 1)[1] if ":" in cell else ""
    kind, _, arg = value.partition(":")
    return {"grad_layout": arg if kind == "layout" else None if kind in ("memory", "dtype") else "contiguous",
            "dtype": arg if kind == "dtype" else None, "memory": kind == "memory",
            "second": kind == "memory", "determinism": kind == "determinism"}


def replay_gradients(module: str, name: str, cell: str, spec: Spec | dict, *, device: str = "cpu",
                     check: bool = True) -> Finding | str:
    """Re-run a ``grad`` cell's example under the same guards; raise AssertionError if it still fails."""
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.model.subject import get_subject

    importlib.import_module(module)
    subject = get_subject(name)
    backend = current_backend("cuda" if device.startswith("cuda") else "interpreter")
    spec = spec if isinstance(spec, Spec) else Spec.from_dict(spec)
    options = cell_options(cell)
    verdict = run_gradient_example(subject, spec, backend, Judge(subject, on_cuda=backend.compiles),
                                   second=options["second"], determinism=options["determinism"])
    print(f"verdict: {verdict if isinstance(verdict, str) else verdict.outcome + ' / ' + verdict.kind}: "
          f"{getattr(verdict, 'message', '')}")
    if check and isinstance(verdict, Finding):
        raise StillFails(f"{subject.name}: {verdict.outcome} ({verdict.kind}): {verdict.message}")
    return verdict
