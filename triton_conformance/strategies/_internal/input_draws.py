"""What each input of a spec gets: its dtype for the cell's dtype, and its layout for the cell's layout class."""

from __future__ import annotations

from hypothesis import strategies as st

from triton_conformance.model.contract import Contract
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.scales import Scale
from triton_conformance.model.spec import Layout
from triton_conformance.strategies._internal.cached import nonempty_subsets, sampled_from
from triton_conformance.strategies._internal.layouts import drawn_layouts

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
                                      vocabulary.DTYPES.names(draw=("float", "fp8"))):
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
    table = vocabulary.LAYOUTS
    row = table[layout_class] if layout_class is not None else None
    if row is not None and row.scope == "tensor" and row.draw != "contiguous":
        eligible = [n for n in contract.inputs if row.applies(ranks[n])
                    and not (row.inputs_only and n in contract.inplace)]  # a written input: no stride 0
        chosen = draw(nonempty_subsets(tuple(eligible))) if eligible else []
        for n in chosen:
            out[n] = draw(drawn_layouts(row, ranks[n]))
    elif row is not None and row.scope == "spec":
        tensor_rows = table.select(scope="tensor")
        for n, spec in contract.inputs.items():
            if row.draw == "per-claimed-input" and spec.layouts == "contiguous":
                continue
            kind = draw(sampled_from(tuple(r for r in tensor_rows if r.applies(ranks[n])
                                           and not (r.inputs_only and n in contract.inplace))))
            out[n] = draw(drawn_layouts(kind, ranks[n]))
    mask = contract.mask_name
    if mask_class is not None and mask is not None and vocabulary.MASKS[mask_class].one_row and ranks[mask] >= 2:
        out[mask] = Layout("broadcast", broadcast=(ranks[mask] - 2,))  # one mask row for all rows
    return {k: v for k, v in out.items() if v != Layout()}
