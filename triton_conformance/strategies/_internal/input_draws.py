"""What each input of a spec gets: its dtype for the cell's dtype, and its layout for the cell's layout class."""

from __future__ import annotations

from hypothesis import strategies as st

from triton_conformance.model.contract import Contract
from triton_conformance.model.inputs import FP8_DTYPES
from triton_conformance.model.scales import Scale
from triton_conformance.model.spec import LAYOUT_CLASSES, Layout, layout_applies
from triton_conformance.strategies._internal.cached import nonempty_subsets, sampled_from
from triton_conformance.strategies._internal.layouts import layouts

__all__ = ["input_dtypes", "input_layouts"]


def input_dtypes(contract: Contract, dtype: str) -> dict[str, str]:
    """Give ``dtype`` to every tensor input that claims it, and masks their own dtype.

    An input declared ``same_dtype_as=`` another takes that input's dtype, so a
    probe of an unclaimed dtype changes them together.
    """
    out = {}
    for name, spec in contract.inputs.items():
        if getattr(spec, "same_dtype_as", None) is not None:
            continue
        if spec.is_mask or isinstance(spec, Scale):  # a scale keeps its own dtype: the probes are the data's
            out[name] = spec.dtypes[0]
        elif dtype in spec.dtypes or (dtype not in contract.float_dtypes() and spec.dtypes[0] in
                                      ("float16", "bfloat16", "float32", "float64") + FP8_DTYPES):
            out[name] = dtype
        else:
            out[name] = spec.dtypes[0]
    for name, spec in contract.inputs.items():
        if getattr(spec, "same_dtype_as", None) is not None:
            out[name] = out[spec.same_dtype_as]
    return {name: out[name] for name in contract.inputs}


@st.composite
def input_layouts(draw, contract: Contract, layout_class: str | None, mask_class: str | None) -> dict[str, Layout]:
    ranks = {n: len(s.shape) for n, s in contract.inputs.items()}
    out: dict[str, Layout] = {}
    if layout_class in LAYOUT_CLASSES and layout_class != "contiguous":
        eligible = [n for n in contract.inputs if layout_applies(layout_class, ranks[n])
                    and not (layout_class == "broadcast" and n in contract.inplace)]  # a written input: no stride 0
        chosen = draw(nonempty_subsets(tuple(eligible))) if eligible else []
        for n in chosen:
            out[n] = draw(layouts(layout_class, ranks[n]))
    elif layout_class in ("mixed", "memory"):
        for n, spec in contract.inputs.items():
            if layout_class == "memory" and spec.layouts == "contiguous":
                continue
            kind = draw(sampled_from(tuple(k for k in LAYOUT_CLASSES if layout_applies(k, ranks[n])
                                           and not (k == "broadcast" and n in contract.inplace))))
            out[n] = draw(layouts(kind, ranks[n]))
    mask = contract.mask_name
    if mask_class == "broadcast" and mask is not None and ranks[mask] >= 2:
        out[mask] = Layout("broadcast", broadcast=(ranks[mask] - 2,))  # one mask row for all rows
    return {k: v for k, v in out.items() if v != Layout()}
