"""What one example must do: be honoured, be rejected, or either.

An example lies inside the contract when every dim is in its range, its dims keep every relation, every
input's dtype is claimed, every layout is claimed, and a fully masked row
meets a policy other than ``reject``.  A "contiguous" claim means what
torch's ``is_contiguous()`` means: row-major strides, wherever the view
starts in its storage (an offset of one element included).  Size-1 dims may
carry any stride, so such an input may be honoured or rejected.

Outside the contract, a launcher may refuse the input or compute it right
(:mod:`.checks`); a ``strict`` contract must refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass

from triton_conformance.model.contract import Contract
from triton_conformance.model.relations import broken_relations
from triton_conformance.model.spec import Layout, Spec, strides_for

__all__ = ["Expectation", "expectation", "actual_layout", "EXAMPLE_HONOURED", "EXAMPLE_REJECTED",
           "EXAMPLE_REJECTED_UNEXPLAINED", "EXAMPLE_ACCEPTED", "EXAMPLE_UNJUDGED"]

# The words a passing example's verdict is said in (a failing one is a Finding).
EXAMPLE_HONOURED = "honoured"
EXAMPLE_REJECTED = "rejected"
# Refused, but not in words: a bare assert, or an error from inside triton or torch.
EXAMPLE_REJECTED_UNEXPLAINED = "rejected-unexplained"
# Outside the contract, returned, and right: the claim could be wider.
EXAMPLE_ACCEPTED = "accepted"
# Outside the contract and returned, but the oracle cannot evaluate such inputs either.
EXAMPLE_UNJUDGED = "unjudged"

# Layout classes that a "contiguous" claim covers; size-1 dims with odd strides are either.
_CONTIGUOUS_OK = ("contiguous",)


@dataclass(frozen=True)
class Expectation:
    """What one example must do: ``"honour"``, ``"reject"``, or ``"either"``; ``reasons`` name each breach."""

    kind: str
    reasons: tuple[str, ...] = ()


def actual_layout(shape: tuple[int, ...], layout: Layout) -> str:
    """What a drawn layout really is for this shape, as torch's ``is_contiguous()`` sees it.

    One of ``"contiguous"`` (a storage offset does not matter; a transpose of
    size-1 dims is contiguous), ``"strided"``, or ``"size1"`` (contiguous but
    for odd strides of size-1 dims).
    """
    strides, _, _ = strides_for(shape, layout)
    expected, running, odd = [], 1, False
    for size in reversed(shape):
        expected.append(running)
        running *= size
    for size, got, want in zip(shape, strides, reversed(expected)):
        if size == 0:
            return "contiguous"
        if size != 1 and got != want:
            return "strided"
        odd = odd or (size == 1 and got != want)
    return "size1" if odd else "contiguous"


def expectation(contract: Contract, spec: Spec) -> Expectation:
    """Whether ``spec`` lies inside ``contract``; the reasons name each breach."""
    breaches: list[str] = []
    either: list[str] = []
    for sym, n in spec.dims.items():
        d = contract.dims[sym]
        if not d.admits(n):
            breaches.append(f"dim {sym}={n} outside [{d.min}, {d.max}]")
    breaches += [f"dims break the relation {why}" for why in broken_relations(contract.relations, spec.dims)]
    for name, decl in contract.inputs.items():
        dtype = spec.dtypes[name]
        if dtype not in decl.dtypes:
            breaches.append(f"{name}.dtype={dtype} not in {decl.dtypes}")
        layout = spec.layout(name)
        if decl.layouts == "contiguous" and layout.kind not in _CONTIGUOUS_OK:
            shape = tuple(spec.dims[s] for s in decl.shape)
            actual = actual_layout(shape, layout)
            if actual == "size1":
                either.append(f"{name} has size-1 dims with odd strides")
            elif actual != "contiguous":
                breaches.append(f"{name} is {layout.kind}, contract claims contiguous only")
        if decl.is_mask and spec.mask == "fully-masked" and decl.fully_masked == "reject":
            breaches.append(f"{name} has fully masked rows, policy is 'reject'")
    if breaches:
        return Expectation("reject", tuple(breaches))
    if either:
        return Expectation("either", tuple(either))
    return Expectation("honour")
