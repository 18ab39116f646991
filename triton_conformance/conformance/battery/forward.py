"""One forward example: call the launcher and classify what it did.

The launcher runs on the spec's inputs embedded in a NaN sentinel, and (for a
deterministic contract) once more in a large finite one with the other output
poison.  From those runs come every check (:mod:`.checks`): clean rejection
of out-of-contract input, input mutation, writes past an output's ends,
unwritten output, reads of memory outside the inputs' elements,
nondeterminism, and agreement with the float64 oracle (:class:`..judge.Judge`).
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.battery.checks import (
    FIRST,
    OTHER,
    Run,
    descriptor_finding,
    memory_findings,
    repeat_findings,
)
from triton_conformance.compat.descriptors import recording as descriptors_recorded
from triton_conformance.conformance.battery.launching import launch, outputs_of
from triton_conformance.conformance.battery.memory import guarded_allocations
from triton_conformance.conformance.expectation import (
    EXAMPLE_ACCEPTED,
    EXAMPLE_HONOURED,
    EXAMPLE_REJECTED,
    EXAMPLE_REJECTED_UNEXPLAINED,
    EXAMPLE_UNJUDGED,
    expectation,
)
from triton_conformance.conformance.judge import Judge, OracleError, exception_text, rejection
from triton_conformance.conformance.discards import discarding_out_of_memory, raise_if_out_of_memory
from triton_conformance.conformance.search.allowance import Allowance
from triton_conformance.model.outcomes import Finding, worst
from triton_conformance.model.spec import Spec
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.tensors import BuiltInputs, build_inputs

__all__ = ["call_example", "run_example"]


def _call(subject: Subject, built: BuiltInputs, spec: Spec, backend: Any, variant: int,
          allowance: Allowance) -> Run:
    # The oracle judges an in-place input's final contents from what it held before the call.
    before = {n: built.views[n].clone() for n in subject.contract.inplace}
    allowance.call_started()  # its part of the example's share of interpreted work
    with guarded_allocations(device_override=backend.allocation_device, variant=variant) as allocations, \
            descriptors_recorded() as descriptors:
        try:
            # A torch-seeded stochastic subject gets the example's seed, the same for every call of it.
            raw = launch(subject, built.views, spec.scalars, seed=spec.seed, dims=spec.dims)
        except Exception as exc:  # noqa: BLE001 - any exception is an outcome
            return Run(None, exc, allocations, before=before, built=built, descriptors=descriptors)
    backend.synchronize()
    return Run(outputs_of(subject, raw, built.views), None, allocations, raw, before, built, descriptors)


def call_example(subject: Subject, spec: Spec, backend: Any, allowance: Allowance, sentinel: str = FIRST[0],
                 variant: int = FIRST[1], contents_of: BuiltInputs | None = None) -> Run:
    """Build ``spec``'s inputs in ``sentinel`` and call the launcher once, its outputs guarded and poisoned
    (``variant``): the :class:`~.checks.Run` every check reads. Out of memory is a discard.
    ``contents_of``: an earlier call's inputs, whose contents are copied instead of drawn again."""
    with discarding_out_of_memory("building the inputs"):
        inputs = build_inputs(subject.contract, spec, sentinel=sentinel, device=backend.device,
                              contents_of=contents_of)
    call = _call(subject, inputs, spec, backend, variant, allowance)
    raise_if_out_of_memory(call.error, "in the launcher")
    return call


def run_example(subject: Subject, spec: Spec, backend: Any, judge: Judge | None = None, *,
                determinism: bool = False, allowance: Allowance | None = None) -> Finding | str:
    """Run every check on one example: a Finding, or ``"honoured"`` / ``"rejected"`` / ...

    - ``judge``: how outputs are judged (default: the subject's oracle and tolerance);
    - ``determinism``: also repeat the call and compare bit for bit (the determinism cell);
    - ``allowance``: the cell's (the interpreter's cost is told of each call).
    """
    judge = judge or Judge(subject, on_cuda=backend.compiles)
    allowance = allowance or Allowance()
    contract = subject.contract
    # A second call in the other sentinel (a model's output is fixed by its seed); the determinism cell's third.
    twice = bool(contract.deterministic or determinism or contract.model is not None)
    allowance.example_started(calls=1 + twice + bool(determinism), before_inputs=True)
    expect = expectation(contract, spec)

    built = None  # the first call's inputs: every later call copies their contents

    def run(sentinel: str, variant: int) -> Run:
        return call_example(subject, spec, backend, allowance, sentinel, variant, contents_of=built)

    first = run(*FIRST)
    built = first.built
    outside = expect.kind == "reject"
    misaligned = descriptor_finding(first)
    if misaligned is not None:  # the GPU faults or reads garbage, whether or not triton's asserts refused here
        return _accepted_outside(misaligned, expect) if outside else misaligned
    if first.error is not None:
        if expect.kind in ("reject", "either"):
            refusal = rejection(first.error)
            if refusal == "clean":
                return EXAMPLE_REJECTED
            if refusal == "unexplained" and not contract.strict:  # any refusal is fine: never computed on
                return EXAMPLE_REJECTED_UNEXPLAINED
        kind = "unclean-rejection" if outside else "exception"
        message = (f"{_outside(expect)}: {type(first.error).__name__} instead of a clean refusal: {first.error}"
                   if outside else f"{type(first.error).__name__} on an input inside the contract: {first.error}")
        return Finding("crash", kind, message,
                       {"traceback": exception_text(first.error), "expected": expect.kind,
                        "reasons": list(expect.reasons)})
    if outside and contract.strict:
        return Finding("wrong", "accepted-out-of-contract", f"{_outside(expect)}: returned a result, not a refusal",
                       {"reasons": list(expect.reasons)})
    findings: list[Finding] = []
    other = None
    if twice:
        other = run(*OTHER)
        if other.error is not None:
            findings.append(Finding("crash", "exception", f"second call raised {other.error!r}",
                                    {"traceback": exception_text(other.error)}))
    findings += memory_findings(built, first, other, inplace=contract.inplace)
    unjudged = False
    try:
        wrong = judge.compare({**built.views, **(first.before or {})}, spec.dims, spec.dtypes, spec.scalars,
                              first.outputs)
    except OracleError:
        if not outside:
            raise
        wrong, unjudged = None, True  # the oracle does not take such inputs: right or wrong, nobody knows
    if wrong is not None:
        findings.append(wrong)
    findings += repeat_findings(run, first, other, determinism=determinism, already_found=bool(findings))
    found = worst(findings)
    if found is None:
        return (EXAMPLE_UNJUDGED if unjudged else EXAMPLE_ACCEPTED) if outside else EXAMPLE_HONOURED
    if outside:  # the real bug: garbage, or memory misbehaviour, for an input its callers can easily pass
        return _accepted_outside(found, expect)
    return found


def _accepted_outside(found: Finding, expect: Any) -> Finding:
    """``found`` on an input outside the contract that the launcher took: said so, with why it is outside."""
    return Finding(found.outcome, found.kind, f"{_outside(expect)}, accepted by the launcher: {found.message}",
                   {**found.details, "outside_contract": list(expect.reasons)})


def _outside(expect: Any) -> str:
    """The first words of a finding on an input outside the contract: that it is, and why."""
    return f"outside the contract ({'; '.join(expect.reasons)})"
