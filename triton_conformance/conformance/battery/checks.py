"""The checks every example shares, forward and backward: guards, poison, mutation and the repeat protocol.

An example runs the kernel (a launcher call, or a forward and backward pass)
with its inputs embedded in sentinel-filled storage and its outputs served
from guarded, poisoned allocations (:mod:`.memory`).  What one such run left
behind is a :class:`Run`; from it come the memory findings
(:func:`memory_findings`): an input whose storage changed, a guard band
written past, output elements that kept their poison.

**The repeat protocol** (:func:`repeat_findings`).  The same example run
again with the other sentinel and the other poison must give the same bits.
If it does not, the kernel either reads memory outside its inputs' elements
(it answers each sentinel the same way every time) or is nondeterministic (it
need not): both runs are repeated, in the opposite order, to tell which.  A
determinism check without the sentinel swap repeats the first run once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from triton_conformance.conformance.battery.memory import unwritten_elements
from triton_conformance.model.outcomes import Finding

__all__ = ["Run", "descriptor_finding", "differing_outputs", "memory_findings", "outputs_differ", "repeat_findings", "FIRST", "OTHER"]

# The two sentinels and poisons an example is run with: (input sentinel, output poison variant).
FIRST = ("nan", 0)
OTHER = ("big", 1)


@dataclass
class Run:
    """One run of an example: its outputs (or the error it raised) and the allocations it was served.

    ``outputs``: what is judged (the launcher's outputs, or the gradients); ``before``: the inputs'
    contents before the run that the oracle is given (the in-place ones, or all of them for a backward).
    """

    outputs: tuple | None
    error: BaseException | Finding | None
    allocations: list = field(default_factory=list)
    raw: Any = None
    before: dict[str, torch.Tensor] | None = None
    built: Any = None  # the inputs it ran on (strategies' BuiltInputs)
    descriptors: list = field(default_factory=list)  # the rule-breaking descriptors it built (DescriptorUse)
    _holes: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # output index -> holes

    def holes(self, i: int) -> torch.Tensor | None:
        """Poison left in output ``i``, or None if the suite did not allocate it (read once: the memory
        findings and the repeat protocol both ask)."""
        if i not in self._holes:
            out = self.outputs[i] if self.outputs is not None and i < len(self.outputs) else None
            owner = next((a for a in self.allocations if a.owns(out)), None) if isinstance(out, torch.Tensor) \
                else None
            self._holes[i] = None if owner is None else unwritten_elements(out.detach(), owner.variant)
        return self._holes[i]


def _holes(run: Run, other: Run | None, i: int) -> torch.Tensor | None:
    """Elements of output ``i`` that kept their poison (in both runs, when there are two)."""
    holes = run.holes(i)
    if holes is None or other is None or other.error is not None:
        return holes
    again = other.holes(i)
    return holes if again is None or again.shape != holes.shape else holes & again


def memory_findings(built: Any, run: Run, other: Run | None = None, *, inplace: tuple[str, ...] = (),
                    what: str = "the call", names: tuple[str, ...] | None = None) -> list[Finding]:
    """What ``run`` did to memory: changed input storage (beyond the declared in-place inputs' elements),
    guard bands written past, output elements never written (in both runs, with ``other``).

    ``what`` names the run in messages (``"the backward"``); ``names`` the outputs (gradients by name).
    """
    findings = []
    mutated = built.mutated(inplace)
    undeclared = [n for n in mutated if n not in inplace]
    if undeclared:
        declared = f" (declared in place: {list(inplace)})" if inplace else ""
        findings.append(Finding("unsafe", "mutated-input", f"input storage changed by {what}: {undeclared}"
                                f"{declared}", {"inputs": undeclared}))
    around = [n for n in mutated if n in inplace]
    if around:
        findings.append(Finding(
            "unsafe", "oob-write", f"{what} wrote outside the elements of in-place input(s) {around}: their gaps, "
            "padding, storage offset or guard band changed", {"inputs": around}))
    for alloc in run.allocations:
        damage = alloc.guard_damage()
        if damage:
            side, at = damage[0]
            shape, dtype = tuple(alloc.tensor.shape), str(alloc.tensor.dtype).replace("torch.", "")
            findings.append(Finding(
                "unsafe", "oob-write",
                f"{what} wrote outside a {shape} {dtype} allocation: guard band {side} it changed (first changed "
                f"byte at offset {at} from the tensor's start, tensor is {alloc.span_bytes} bytes)",
                {"side": side, "byte_offset": at, "span_bytes": alloc.span_bytes, "shape": list(shape),
                 "dtype": dtype}))
    for i, out in enumerate(run.outputs or ()):
        holes = _holes(run, other, i)
        if holes is not None and holes.any():
            first = tuple(int(v) for v in torch.nonzero(holes)[0]) if holes.dim() else ()
            label = f"grad {names[i]}" if names else f"output {i}"
            details = {"unwritten": int(holes.sum()), "total": out.numel(), "first_index": first}
            details.update({"gradient": names[i]} if names else {"output": i})
            findings.append(Finding("unsafe", "unwritten", f"{label}: {int(holes.sum())} of {out.numel()} elements "
                                    f"never written; first at {first}", details))
    return findings


def descriptor_finding(run: Run) -> Finding | None:
    """The run's first descriptor that breaks the hardware's rules, as an ``unsafe`` finding naming the input
    it was built on and the rule: on the GPU a fault or garbage, whatever triton's asserts did here."""
    if not run.descriptors:
        return None
    use = run.descriptors[0]
    on = [n for n, b in (run.built.buffers.items() if run.built is not None else ())
          if b.data_ptr() <= use.address < b.data_ptr() + b.numel() * b.element_size()]
    what = f"input {on[0]!r}: " if on else ""
    return Finding("unsafe", "misaligned-descriptor", f"{what}{use.describe()}",
                   {"descriptor": use.to_dict(), "input": on[0] if on else None,
                    "descriptors": len(run.descriptors)})


def outputs_differ(a: Run, b: Run) -> bool:
    """Whether two runs' outputs differ in any element both of them wrote, bit for bit."""
    return bool(differing_outputs(a, b))


def differing_outputs(a: Run, b: Run) -> list[int]:
    """The outputs of two runs that differ in an element both of them wrote, bit for bit (-0.0 is not 0.0,
    and float64 is compared in all its bits), by index."""
    differ = []
    for i, (x, y) in enumerate(zip(a.outputs or (), b.outputs or ())):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            differ.append(i)
            continue
        # Compared in place as integers of the element size (a bool as its byte), whatever the strides.
        as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
        changed = x.detach().view(as_int) != y.detach().view(as_int)
        for holes in (a.holes(i), b.holes(i)):
            if holes is not None:
                changed &= ~holes
        if bool(changed.any()):
            differ.append(i)
    return differ


def _nondeterministic(what: str) -> Finding:
    return Finding("wrong", "nondeterministic", f"two {what} on identical inputs gave different bits")


def repeat_findings(run: Callable[[str, int], Run], first: Run, other: Run | None, *, determinism: bool,
                    already_found: bool, what: str = "calls", around: str = "the inputs") -> list[Finding]:
    """The repeat protocol: a Finding if repeated runs of the example disagree, telling a read outside
    ``around`` (the same answer to each sentinel, every time) from nondeterminism.

    - ``run(sentinel, variant)``: runs the example again (:data:`FIRST` or :data:`OTHER`);
    - ``other``: the run in the other sentinel and poison, or None;
    - ``determinism``: without a difference there, repeat the first run once and compare bit for bit
      (only if nothing was ``already_found``).
    """
    if other is not None and other.error is None and outputs_differ(first, other):
        # Both runs again, in the opposite order, so a result that merely alternates still shows.
        other_again = run(*OTHER)
        first_again = run(*FIRST)
        if (first_again.error is None and outputs_differ(first, first_again)) or (
                other_again.error is None and outputs_differ(other, other_again)):
            return [_nondeterministic(what)]
        return [Finding("unsafe", "poisoned-read", f"the result changed when only the memory around {around} (gaps, "
                        f"padding, guard band) changed: the kernel reads outside their elements")]
    if determinism and not already_found:
        again = run(*FIRST)
        if again.error is None and outputs_differ(first, again):
            return [_nondeterministic(what)]
    return []
