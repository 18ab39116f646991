"""The battery for one example: call the launcher and classify what it did.

One example runs the launcher twice on the same spec: once with inputs
embedded in a NaN sentinel, once in a large finite one.  From those two calls
come every check: clean rejection of out-of-contract input, input mutation,
writes past an output's ends, unwritten output, reads of memory outside the
inputs' elements, and agreement with the float64 oracle.  The determinism cell
adds a third call and compares bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.search.interpreter_cost import call_started, example_started
from triton_conformance.conformance.judge import Judge, OracleError, exception_text, rejection
from triton_conformance.conformance.battery.launching import launch, outputs_of
from triton_conformance.conformance.battery.memory import flat_bytes, guarded_allocations, unwritten_elements
from triton_conformance.conformance.search.allowance import discarding_out_of_memory, raise_if_out_of_memory
from triton_conformance.model.outcomes import Finding, worst
from triton_conformance.model.spec import Spec
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.tensors import BuiltInputs, build_inputs

__all__ = ["run_example", "EXAMPLE_REJECTED_UNEXPLAINED", "EXAMPLE_ACCEPTED", "EXAMPLE_UNJUDGED", "EXAMPLE_REJECTED", "EXAMPLE_HONOURED"]

EXAMPLE_HONOURED = "honoured"
EXAMPLE_REJECTED = "rejected"
# Refused, but not in words: a bare assert, or an error from inside triton or torch.
EXAMPLE_REJECTED_UNEXPLAINED = "rejected-unexplained"
# Outside the contract, returned, and right: the claim could be wider.
EXAMPLE_ACCEPTED = "accepted"
# Outside the contract and returned, but the oracle cannot evaluate such inputs either.
EXAMPLE_UNJUDGED = "unjudged"


@dataclass
class _Call:
    outputs: tuple[torch.Tensor, ...] | None
    error: BaseException | None
    allocations: list
    raw: Any = None
    before: dict[str, torch.Tensor] | None = None  # the in-place inputs' contents before the call

    def holes(self, i: int) -> torch.Tensor | None:
        """Poison left in output ``i``, or None if the suite did not allocate it."""
        out = self.outputs[i] if self.outputs is not None and i < len(self.outputs) else None
        if not isinstance(out, torch.Tensor):
            return None
        owner = next((a for a in self.allocations if a.owns(out)), None)
        return None if owner is None else unwritten_elements(out, owner.variant)


def _call(subject: Subject, built: BuiltInputs, spec: Spec, backend: Backend, variant: int = 0) -> _Call:
    # The oracle judges an in-place input's final contents from what it held before the call.
    before = {n: built.views[n].clone() for n in subject.contract.inplace}
    call_started()  # its part of the example's allowance of interpreted work, in a metered cell
    with guarded_allocations(device_override=backend.allocation_device, variant=variant) as allocations:
        try:
            # A torch-seeded stochastic subject gets the example's seed, the same for every call of it.
            raw = launch(subject, built.views, spec.scalars, seed=spec.seed)
        except Exception as exc:  # noqa: BLE001 - any exception is an outcome
            return _Call(None, exc, allocations, before=before)
    backend.synchronize()
    return _Call(outputs_of(subject, raw, built.views), None, allocations, raw, before)


def _memory_findings(built: BuiltInputs, call: _Call, second: _Call | None,
                     inplace: tuple[str, ...] = ()) -> list[Finding]:
    findings = []
    mutated = built.mutated(inplace)
    undeclared = [n for n in mutated if n not in inplace]
    if undeclared:
        declared = f" (declared in place: {list(inplace)})" if inplace else ""
        findings.append(Finding("unsafe", "mutated-input", f"input storage changed by the call: {undeclared}"
                                f"{declared}", {"inputs": undeclared}))
    around = [n for n in mutated if n in inplace]
    if around:
        findings.append(Finding(
            "unsafe", "oob-write", f"wrote outside the elements of in-place input(s) {around}: their gaps, padding, "
            "storage offset or guard band changed", {"inputs": around}))
    for alloc in call.allocations:
        damage = alloc.guard_damage()
        if damage:
            side, at = damage[0]
            findings.append(Finding(
                "unsafe", "oob-write",
                f"wrote outside a {tuple(alloc.tensor.shape)} {alloc.tensor.dtype} allocation: guard band "
                f"{side} it changed (first changed byte at offset {at} from the tensor's start, "
                f"tensor is {alloc.span_bytes} bytes)",
                {"side": side, "byte_offset": at, "span_bytes": alloc.span_bytes}))
    for i, out in enumerate(call.outputs or ()):
        holes = _holes(call, second, i)
        if holes is not None and holes.any():
            first = tuple(int(v) for v in torch.nonzero(holes)[0]) if holes.dim() else ()
            findings.append(Finding(
                "unsafe", "unwritten",
                f"output {i}: {int(holes.sum())} of {out.numel()} elements never written; first at {first}",
                {"unwritten": int(holes.sum()), "total": out.numel(), "first_index": first}))
    return findings


def _holes(call: _Call, second: _Call | None, i: int) -> torch.Tensor | None:
    """Elements of output ``i`` that kept their poison (in both calls, when there are two)."""
    holes = call.holes(i)
    if holes is None or second is None or second.error is not None:
        return holes
    other = second.holes(i)
    return holes if other is None or other.shape != holes.shape else holes & other


def _differs(a: _Call, b: _Call) -> bool:
    """Whether two calls' outputs differ in any element both of them wrote, bit for bit."""
    for i, (x, y) in enumerate(zip(a.outputs, b.outputs)):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return True
        size = x.element_size()
        as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
        xi, yi = flat_bytes(x).view(as_int), flat_bytes(y).view(as_int)
        written = torch.ones_like(xi, dtype=torch.bool)
        for holes in (a.holes(i), b.holes(i)):
            if holes is not None:
                written &= ~holes.reshape(-1)
        if bool(((xi != yi) & written).any()):
            return True
    return False


def run_example(subject: Subject, spec: Spec, backend: Backend, judge: Judge | None = None, *,
                determinism: bool = False) -> Finding | str:
    """Run every check on one example: a Finding, or ``"honoured"`` / ``"rejected"``.

    ``judge``: how outputs are judged (default: the subject's oracle and
    tolerance, with no per-example rate test for a stochastic model).
    """
    judge = judge or Judge(subject, on_cuda=backend.compiles)
    contract = subject.contract
    # A second call in the other sentinel (a model's output is fixed by its seed); the determinism cell's third.
    twice = bool(contract.deterministic or determinism or contract.model is not None)
    # Its allowance of interpreted work, in a metered cell (OverCost at once if the cell's pool is spent).
    example_started(calls=1 + twice + bool(determinism), before_inputs=True)
    expect = expectation(contract, spec)

    def run(sentinel: str, variant: int) -> tuple[BuiltInputs, _Call]:
        with discarding_out_of_memory("building the inputs"):
            inputs = build_inputs(contract, spec, sentinel=sentinel, device=backend.device)
        call = _call(subject, inputs, spec, backend, variant=variant)
        raise_if_out_of_memory(call.error, "in the launcher")
        return inputs, call

    built, call = run("nan", 0)
    outside = expect.kind == "reject"
    if call.error is not None:
        if expect.kind in ("reject", "either"):
            refusal = rejection(call.error)
            if refusal == "clean":
                return EXAMPLE_REJECTED
            if not contract.strict:  # any refusal is fine: the input was never computed on
                return EXAMPLE_REJECTED_UNEXPLAINED
        kind = "unclean-rejection" if outside else "exception"
        where = "outside" if outside else "inside"
        return Finding("crash", kind,
                       f"{type(call.error).__name__} on an input {where} the contract: {call.error}",
                       {"traceback": exception_text(call.error), "expected": expect.kind,
                        "reasons": list(expect.reasons)})
    if outside and contract.strict:
        return Finding("wrong", "accepted-out-of-contract",
                       "returned a result for an input outside the contract (" + "; ".join(expect.reasons) + ")",
                       {"reasons": list(expect.reasons)})
    # The same example in the other sentinel and the other output poison: a change
    # in what was written is a read outside the inputs, or nondeterminism.
    second = None
    findings: list[Finding] = []
    if twice:
        _, second = run("big", 1)
        if second.error is not None:
            findings.append(Finding("crash", "exception", f"second call raised {second.error!r}",
                                    {"traceback": exception_text(second.error)}))
    findings += _memory_findings(built, call, second, contract.inplace)
    try:
        wrong = judge.compare({**built.views, **(call.before or {})}, spec.dims, spec.dtypes, spec.scalars,
                              call.outputs)
    except OracleError:
        if not outside:
            raise
        wrong = None
        findings.append(EXAMPLE_UNJUDGED)  # the oracle does not take such inputs: right or wrong, nobody knows
    if wrong is not None:
        findings.append(wrong)
    if second is not None and second.error is None and _differs(call, second):
        # Repeat both calls: a kernel that reads outside its inputs answers each
        # sentinel the same way every time; a nondeterministic one need not.
        # (In the opposite order, so a result that merely alternates still shows.)
        _, again2 = run("big", 1)
        _, again = run("nan", 0)
        if (again.error is None and _differs(call, again)) or (again2.error is None and _differs(second, again2)):
            findings.append(Finding("wrong", "nondeterministic", "two calls on identical inputs gave different bits"))
        else:
            findings.append(Finding(
                "unsafe", "poisoned-read",
                "output changed when only the memory around the inputs (gaps, padding, guard band) "
                "changed: the kernel reads outside its inputs' elements"))
    elif determinism and not findings:
        _, again = run("nan", 0)
        if again.error is None and _differs(call, again):
            findings.append(Finding("wrong", "nondeterministic", "two calls on identical inputs gave different bits"))
    unjudged = EXAMPLE_UNJUDGED in findings
    found = worst([f for f in findings if isinstance(f, Finding)])
    if found is None:
        return (EXAMPLE_UNJUDGED if unjudged else EXAMPLE_ACCEPTED) if outside else EXAMPLE_HONOURED
    if outside:  # the real bug: garbage, or memory misbehaviour, for an input its callers can easily pass
        reasons = "; ".join(expect.reasons)
        return Finding(found.outcome, found.kind, f"on an input outside the contract ({reasons}), which the "
                       f"launcher accepted: {found.message}", {**found.details, "outside_contract": list(expect.reasons)})
    return found
