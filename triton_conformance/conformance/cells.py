"""The contract cells of a subject, and what each example of a cell expects.

A cell is one (subject, contract dimension) pair, such as
``(softmax, layout:transposed)``.  The list of cells depends only on the
contract, so collection is stable across processes; whether a cell can run
here (bf16 on a broken interpreter, say) is decided when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from triton_conformance.model.contract import MASK_CLASSES, VALUE_CLASSES, Contract
from triton_conformance.conformance.stochastic import STOCHASTIC_CELLS, stochastic_cells
from triton_conformance.model.spec import LAYOUT_CLASSES, Spec, layout_applies, strides_for

__all__ = ["SHAPE_CLASSES", "PROBED_DTYPES", "DIMENSIONS", "cells_for", "cell_sort_key", "skip_reason", "expectation",
           "Expectation"]

# "large-index": one input past 2^31 elements, where int32 offsets wrap (conformance/large_index.py).
SHAPE_CLASSES = ("tiny", "non-pow2", "beyond-block", "empty", "beyond-range", "large-index")
# Float dtypes every float subject is probed with; unclaimed ones must be rejected.
PROBED_DTYPES = ("float16", "bfloat16", "float32")
# Layout classes that a "contiguous" claim covers; size-1 dims with odd strides are either.
_CONTIGUOUS_OK = ("contiguous",)


def cells_for(contract: Contract) -> list[str]:
    """Every cell id of ``contract``, in a stable order."""
    cells = [f"layout:{k}" for k in LAYOUT_CLASSES] + ["layout:mixed"]
    floats = contract.float_dtypes()
    if floats:
        cells += [f"dtype:{d}" for d in dict.fromkeys(floats + PROBED_DTYPES)]
    else:
        cells += [f"dtype:{d}" for d in contract.inputs[contract.tensor_names[0]].dtypes]
    cells += [f"shape:{s}" for s in SHAPE_CLASSES]
    cells += [f"values:{v}" for v in VALUE_CLASSES]
    if contract.mask_name:
        cells += [f"mask:{m}" for m in MASK_CLASSES]
    cells += ["memory"]
    if contract.deterministic and contract.model is None:
        cells += ["determinism"]
    cells += stochastic_cells(contract)  # reproducibility is one of them
    if contract.performance is not None:  # timed on CUDA only (performance_cell.py)
        cells += ["performance"]
    return cells


DIMENSIONS = ("layout", "dtype", "shape", "values", "mask", "memory", "determinism", "stochastic", "performance")
_VALUE_ORDER = {
    "layout": LAYOUT_CLASSES + ("mixed",),
    "dtype": PROBED_DTYPES,
    "shape": SHAPE_CLASSES,
    "values": VALUE_CLASSES,
    "mask": MASK_CLASSES,
    "stochastic": STOCHASTIC_CELLS,
}


def cell_sort_key(cell: str) -> tuple[int, int, str]:
    """Canonical order of cells: by dimension, then as the classes are listed."""
    dimension, _, value = cell.partition(":")
    d = DIMENSIONS.index(dimension) if dimension in DIMENSIONS else len(DIMENSIONS)
    values = _VALUE_ORDER.get(dimension, ())
    return d, values.index(value) if value in values else len(values), value


def skip_reason(contract: Contract, cell: str, *, untestable_dtypes: dict[str, str] | None = None) -> str | None:
    """Why ``cell`` does not apply to ``contract`` here, or None if it runs."""
    dimension, _, value = cell.partition(":")
    ranks = [len(s.shape) for s in contract.inputs.values()]
    untestable = untestable_dtypes or {}
    if dimension == "layout":
        if value == "mixed":
            if sum(1 for s in contract.inputs.values() if s.layouts == "any") == 0:
                return "no input claims arbitrary layouts"
        elif not any(layout_applies(value, r) for r in ranks):
            return f"layout {value!r} needs an input of rank >= 2"
        if value == "size1" and not any(d.min <= 1 <= d.max for d in contract.dims.values()):
            return "no dim admits size 1"
    if dimension == "dtype" and value in untestable:
        return untestable[value]
    if dimension == "values" and value not in contract.values:
        return f"value class {value!r} not claimed"
    if cell == "shape:large-index":
        from triton_conformance.conformance.large_index import large_index_skip_reason

        return large_index_skip_reason(contract)
    if dimension == "shape":
        if value == "beyond-block":
            biggest = max(d.max for d in contract.dims.values())
            if biggest < 64:
                return "no dim can exceed a block"
        if value == "beyond-range" and all(d.max >= 1 << 24 and d.min <= 1 for d in contract.dims.values()):
            return "every dim range is unbounded in practice"
    if dimension == "determinism" and not contract.deterministic:
        return "subject does not claim determinism"
    if contract.model is not None and dimension in ("determinism",):
        return "stochastic subject: see its stochastic cells"
    return None


def _actual_layout(shape: tuple[int, ...], layout) -> str:
    """What a drawn layout really is for this shape: a transpose of size-1 dims is contiguous."""
    strides, offset, _ = strides_for(shape, layout)
    if offset:
        return "offset"
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


@dataclass(frozen=True)
class Expectation:
    """What one example must do: ``"honour"``, ``"reject"``, or ``"either"``."""

    kind: str
    reasons: tuple[str, ...] = ()


def expectation(contract: Contract, spec: Spec) -> Expectation:
    """Whether ``spec`` lies inside ``contract``; the reasons name each breach."""
    breaches: list[str] = []
    either: list[str] = []
    for sym, n in spec.dims.items():
        d = contract.dims[sym]
        if not d.admits(n):
            breaches.append(f"dim {sym}={n} outside [{d.min}, {d.max}]")
    for name, decl in contract.inputs.items():
        dtype = spec.dtypes[name]
        if dtype not in decl.dtypes:
            breaches.append(f"{name}.dtype={dtype} not in {decl.dtypes}")
        layout = spec.layout(name)
        if decl.layouts == "contiguous" and layout.kind not in _CONTIGUOUS_OK:
            shape = tuple(spec.dims[s] for s in decl.shape)
            actual = _actual_layout(shape, layout)
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

