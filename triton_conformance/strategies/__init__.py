"""Hypothesis strategies for adversarial kernel inputs.

Small composable strategies: :func:`sizes` for dims biased to block
boundaries, :func:`layouts` for strides and offsets, and :func:`specs`, which
draws a whole example for one contract cell.  Tensors are built from a spec
with :func:`build_inputs`.
"""

from triton_conformance.model.spec import LAYOUT_CLASSES, Layout, Spec, strides_for
from triton_conformance.strategies._internal.layouts import layouts
from triton_conformance.model.contract import MASK_CLASSES, VALUE_CLASSES
from triton_conformance.strategies._internal.sizes import (
    boundary_sizes,
    non_power_of_two_sizes,
    palette_sizes,
    sizes,
    specialization_class,
)
from triton_conformance.strategies._internal.specs import specs

__all__ = [
    "LAYOUT_CLASSES",
    "MASK_CLASSES",
    "VALUE_CLASSES",
    "Layout",
    "Spec",
    "boundary_sizes",
    "build_inputs",
    "layouts",
    "non_power_of_two_sizes",
    "palette_sizes",
    "sizes",
    "specialization_class",
    "specs",
    "strides_for",
]


def __getattr__(name: str):
    # build_inputs needs torch; import it only when asked for.
    if name == "build_inputs":
        from triton_conformance.strategies._internal.tensors import build_inputs

        return build_inputs
    raise AttributeError(name)
