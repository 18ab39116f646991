"""Layouts that break a tensor descriptor's rules: the draws of the ``descriptor`` cells.

Each class (a row of :data:`~triton_conformance.model.vocabulary.DESCRIPTOR_LAYOUTS`) gives some of the inputs a
contract reads through a descriptor one fixed layout that breaks one rule; :func:`breaks_descriptor_rules`
keeps only the specs in which it really does (rows of K+1 fp16 elements are 16-byte aligned when K+1 is a
multiple of 8, and a transpose of a single row has a last stride of 1).
"""

from __future__ import annotations

from hypothesis import strategies as st

from triton_conformance.model.contract import Contract
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.descriptors import descriptor_breaches
from triton_conformance.model.inputs import DTYPE_BYTES
from triton_conformance.model.scales import Scale, scale_shape
from triton_conformance.model.spec import Layout, Spec, strides_for
from triton_conformance.strategies._internal.cached import nonempty_subsets
from triton_conformance.strategies._internal.layouts import drawn_layouts

__all__ = ["descriptor_inputs", "descriptor_layouts", "breaks_descriptor_rules"]

def descriptor_inputs(contract: Contract, kind: str | None = None) -> tuple[str, ...]:
    """The inputs ``contract`` reads through a tensor descriptor (of a rank class ``kind`` applies to)."""
    rank = 0 if kind is None else vocabulary.DESCRIPTOR_LAYOUTS[kind].min_rank
    return tuple(n for n, d in contract.inputs.items() if getattr(d, "descriptor", False) and len(d.shape) >= rank)


@st.composite
def descriptor_layouts(draw, contract: Contract, kind: str) -> dict[str, Layout]:
    """Some of the descriptor inputs (shrinking to one), each in descriptor class ``kind``'s layout (its row's draw)."""
    chosen = draw(nonempty_subsets(descriptor_inputs(contract, kind)))
    row = vocabulary.DESCRIPTOR_LAYOUTS[kind]
    return {n: draw(drawn_layouts(row, len(contract.inputs[n].shape))) for n in chosen}


def breaks_descriptor_rules(contract: Contract, spec: Spec) -> bool:
    """Whether some input laid out in a descriptor class breaks that class's rule at ``spec``'s dims and dtypes
    (its storage taken to start 16-byte aligned, as a fresh allocation does)."""
    table = vocabulary.DESCRIPTOR_LAYOUTS
    for name, layout in spec.layouts.items():
        decl = contract.inputs.get(name)
        if layout.kind not in table or decl is None:
            continue
        shape = scale_shape(decl, spec.dims) if isinstance(decl, Scale) else tuple(spec.dims[s] for s in decl.shape)
        if not all(shape):
            continue
        itemsize = DTYPE_BYTES.get(spec.dtypes[name], 4)
        strides, offset, _ = strides_for(shape, layout)
        if any(b.rule == table[layout.kind].rule for b in descriptor_breaches(offset * itemsize, itemsize, strides)):
            return True
    return False
