"""The large-index cell's one example: which dim is the rows, how wide a row is, how many rows pass 2^31.

:func:`large_index_plan` turns a contract into a :class:`LargeIndexPlan` (or
the reason the cell does not apply); :mod:`.large_index` builds and runs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from triton_conformance.model.contract import Contract

__all__ = ["LARGE", "EXTRA", "TAIL_ELEMENTS", "MAX_ROW_ELEMENTS", "LargeIndexPlan", "large_index_plan"]

LARGE = 1 << 31
EXTRA = 4099  # past 2^31 by 4 blocks of 1024 and 3: the last block is partial
TAIL_ELEMENTS = 1 << 16  # elements filled (and compared) at the end of each input
MAX_ROW_ELEMENTS = 1 << 16  # inner dims are widened (for a bounded row dim) up to this many elements a row


@dataclass(frozen=True)
class LargeIndexPlan:
    """The one example of the cell: dims, dtype, and how many trailing rows are filled and compared.

    ``params``: inputs broadcast over the rows (a weight or bias), built whole and small;
    every other input leads with ``row_dim``.  ``reduced``: the rows are reduced over (a
    sum over everything, a loss), so the answer depends on every row: emulated, only the
    memory checks apply.
    """

    dims: dict[str, int]
    dtype: str
    row_dim: str
    fill_rows: int
    scalars: dict[str, float] = field(default_factory=dict)
    params: tuple[str, ...] = ()
    reduced: bool = False

    def elements(self, contract: Contract, name: str) -> int:
        return math.prod(self.dims[s] for s in contract.inputs[name].shape)

    def row_inputs(self, contract: Contract) -> list[str]:
        return [n for n in contract.inputs if n not in self.params]


def _pick_dtype(contract: Contract) -> str | None:
    """The narrowest dtype every tensor input claims (fp16 before bf16, whose interpreter is broken)."""
    common = None
    for name in contract.tensor_names:
        claimed = set(contract.inputs[name].dtypes or ("float16", "bfloat16", "float32"))
        if getattr(contract.inputs[name], "index_of", None) or getattr(contract.inputs[name], "same_dtype_as", None):
            continue  # an index input keeps its own integer dtype; a follower takes its leader's
        common = claimed if common is None else common & claimed
    order = ("float16", "bfloat16", "int8", "uint8", "int16", "float32", "int32", "float64", "int64")
    return next((d for d in order if common and d in common), None)


def _rows_and_params(contract: Contract) -> tuple[str, tuple[str, ...]] | str:
    """The dim the rows run along and the inputs broadcast over them, or why there is none.

    Each input either leads with the row dim (a row input) or lacks it (a parameter
    broadcast over the rows, such as a layer norm's weight); ``Tensor(rows=...)``
    overrides the inference.  Candidates are the inputs' leading dims, the one most
    inputs lead with first.
    """
    inputs = contract.inputs
    declared = [n for n, t in inputs.items() if getattr(t, "rows", None) is True]
    leads = [t.shape[0] for n, t in inputs.items() if t.shape and getattr(t, "rows", None) is not False]
    candidates = sorted(dict.fromkeys(inputs[n].shape[0] for n in declared) if declared else dict.fromkeys(leads),
                        key=lambda d: -leads.count(d))
    for row in candidates:
        params = []
        for name, t in inputs.items():
            declared_param = getattr(t, "rows", None) is False
            if t.shape and t.shape[0] == row and not declared_param:
                continue
            if row in t.shape or getattr(t, "rows", None) is True:
                break  # the row dim inside, not leading (or a declared row input leading with another)
            params.append(name)
        else:
            if len(params) < len(inputs):
                return row, tuple(params)
    return ("not row-separable (each input must lead with the same dim or lack it, a parameter broadcast over "
            "the rows): the tail of the output cannot be checked from the tail of the inputs")


def _row_elements(contract: Contract, rows_in: list[str], dims: dict[str, int]) -> int:
    """Elements in one row of the widest row input (the product of its dims after the row dim)."""
    return max(math.prod(dims[s] for s in contract.inputs[n].shape[1:]) for n in rows_in)


def _inner_dims(contract: Contract, row: str, rows_in: list[str]) -> dict[str, int]:
    """Every dim but the row dim: 33 (not a power of two, so masks matter) within its declared range,
    widened when the rows alone cannot reach 2^31 elements inside the row dim's range.

    A row kernel declared with rows up to 2^24 needs rows of at least 129 elements; each
    inner dim of the row inputs is widened in turn (the widest declared range first) to the
    smallest size that is enough, within its range, and no row past ``MAX_ROW_ELEMENTS``
    (the compared tail, and on the interpreter one program's work, stay small).  Where that
    is not enough the dims stay at the most they could take, and the caller skips the cell.
    """
    dims = {s: min(d.max, max(d.min, 33)) for s, d in contract.dims.items() if s != row}
    need = -(-(LARGE + EXTRA) // max(1, contract.dims[row].max))  # the fewest elements a row can hold
    start = _row_elements(contract, rows_in, dims)
    if start >= need:
        return dims
    limit = max(start, MAX_ROW_ELEMENTS)
    inner = dict.fromkeys(s for n in rows_in for s in contract.inputs[n].shape[1:])
    for s in sorted(inner, key=lambda s: -contract.dims[s].max):
        def size(v: int, s: str = s) -> int:
            return _row_elements(contract, rows_in, {**dims, s: v})

        lo, hi = dims[s], contract.dims[s].max
        while lo < hi and size(hi) > limit:  # the largest size within the limit
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if size(mid) <= limit else (lo, mid - 1)
        top, lo = hi, dims[s]
        while lo < hi:  # the smallest size that is enough, or the top
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if size(mid) >= need else (mid + 1, hi)
        dims[s] = min(lo, top)
        if size(dims[s]) >= need:
            break
    return dims


def large_index_plan(contract: Contract) -> LargeIndexPlan | str:
    """The example for ``contract``, or why the cell does not apply to it."""
    if contract.model is not None:
        return "stochastic subject: its outputs are checked by the stochastic cells"
    if contract.mask_name is not None:
        return "the large-index emulation does not build mask inputs"
    # max_elements caps the drawn examples' cost, not what the launcher accepts: the lazy emulation is cheap.
    biggest = max(math.prod(contract.dims[s].max for s in contract.inputs[n].shape)
                  for n in contract.tensor_names)
    if biggest < LARGE:
        return (f"contract admits at most {biggest} elements per input (< 2^31): an int32 offset cannot "
                "overflow inside it (shape:beyond-range checks that larger inputs are rejected)")
    found = _rows_and_params(contract)
    if isinstance(found, str):
        return found
    row, params = found
    rows_in = [n for n in contract.inputs if n not in params]
    dims = _inner_dims(contract, row, rows_in)
    inner = _row_elements(contract, rows_in, dims)
    rows = -(-(LARGE + EXTRA) // inner)
    if not contract.dims[row].admits(rows):
        widened = {s: v for s, v in dims.items() if v > min(contract.dims[s].max, max(contract.dims[s].min, 33))}
        how = (f" (inner dims widened within their ranges to {', '.join(f'{s}={v}' for s, v in widened.items())}: "
               f"rows of {inner} elements, the most the cell builds)") if widened else ""
        return f"{row}={rows} rows would be needed for 2^31 elements, outside [{contract.dims[row].min}, " \
               f"{contract.dims[row].max}]{how}"
    dtype = _pick_dtype(contract)
    if dtype is None:
        return "the inputs claim no dtype in common"
    scalars = {n: s.representative() for n, s in contract.scalars.items()}
    fill = max(1, -(-TAIL_ELEMENTS // inner))
    return LargeIndexPlan(dims={row: rows, **dims}, dtype=dtype, row_dim=row, fill_rows=min(fill, rows),
                          scalars=scalars, params=params, reduced=row == contract.reduces)
