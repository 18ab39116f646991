"""The large-index cell's one example: which dims are the rows, how wide a row is, how many rows pass 2^31.

:func:`large_index_plan` turns a contract into a :class:`LargeIndexPlan` (or
the reason the cell does not apply, a :class:`~triton_conformance.model.outcomes.SkipReason`);
:mod:`.example` builds and runs it.

The rows are the product of the *outer* dims: the leading dims every row input
shares, up to (not including) the reduced dim, a dim a parameter holds, or a
row input's last dim.  The example reaches two offsets past 2^31: an element
index, and the start of the last row (``row * stride`` in int32 wraps there,
though every element offset within a row is small).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from triton_conformance.model.contract import Contract
from triton_conformance.model.outcomes import SkipReason

__all__ = ["LARGE", "EXTRA", "ROW_MARGIN", "TAIL_ELEMENTS", "MAX_ROW_ELEMENTS", "LargeIndexPlan",
           "large_index_plan", "rows_needed"]

LARGE = 1 << 31
EXTRA = 4099  # past 2^31 by 4 blocks of 1024 and 3: the last block is partial
ROW_MARGIN = 1024  # the last row starts at least this many elements past 2^31
TAIL_ELEMENTS = 1 << 16  # elements filled (and compared) at the end of each input
MAX_ROW_ELEMENTS = 1 << 16  # inner dims are widened (for bounded outer dims) up to this many elements a row


@dataclass(frozen=True)
class LargeIndexPlan:
    """The one example of the cell: dims, dtype, and how many trailing rows are filled and compared.

    ``outer``: the dims whose product is the rows, ``row_dim`` first; every row input
    leads with them.  ``params``: inputs broadcast over the rows (a weight or bias),
    built whole and small.  ``fill_rows`` counts rows of the flattened outer dims (within
    the last index of all but the last outer dim).  ``reduced``: the rows are reduced
    over (a sum over everything, a loss), so the answer depends on every row: emulated,
    only the memory checks apply.
    """

    dims: dict[str, int]
    dtype: str
    row_dim: str
    fill_rows: int
    scalars: dict[str, float] = field(default_factory=dict)
    params: tuple[str, ...] = ()
    reduced: bool = False
    outer: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.outer:
            object.__setattr__(self, "outer", (self.row_dim,))

    @property
    def rows(self) -> int:
        """The product of the outer dims."""
        return math.prod(self.dims[s] for s in self.outer)

    def elements(self, contract: Contract, name: str) -> int:
        return math.prod(self.dims[s] for s in contract.inputs[name].shape)

    def row_inputs(self, contract: Contract) -> list[str]:
        return [n for n in contract.inputs if n not in self.params]

    def offsets(self, contract: Contract) -> dict[str, int]:
        """The offsets the example reaches in its widest row input: its last element, and its last row's start."""
        name = max(self.row_inputs(contract), key=lambda n: self.elements(contract, n))
        row = self.elements(contract, name) // self.rows
        return {"input": name, "last_element": self.elements(contract, name) - 1,
                "last_row_start": (self.rows - 1) * row, "row_elements": row}


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


def _rows_and_params(contract: Contract) -> tuple[str, tuple[str, ...]] | SkipReason:
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
    return SkipReason("not row-separable (each input must lead with the same dim or lack it, a parameter "
                      "broadcast over the rows): the tail of the output cannot be checked from the tail of the "
                      "inputs", code="large-index:not-row-separable")


def _outer_dims(contract: Contract, row: str, rows_in: list[str], params: tuple[str, ...]) -> tuple[str, ...]:
    """``row`` and the dims after it that every row input leads with, before the reduced dim, a dim a
    parameter holds, and each row input's last dim (a row keeps at least its innermost dim)."""
    shapes = [tuple(contract.inputs[n].shape) for n in rows_in]
    in_params = {s for n in params for s in contract.inputs[n].shape}
    shortest = min(len(s) for s in shapes)
    outer = [row]
    for i in range(1, shortest - 1 if shortest > 1 else 1):
        dim = shapes[0][i]
        if row == contract.reduces or dim == contract.reduces or dim in in_params or dim in outer \
                or any(s[i] != dim for s in shapes):
            break
        outer.append(dim)
    return tuple(outer)


def rows_needed(row_elements: int) -> int:
    """The fewest rows of ``row_elements`` that hold past 2^31 + EXTRA elements and start the last row
    past 2^31 + ROW_MARGIN (with rows of 32769, 65535 rows start their last at 2^31 - 2)."""
    inner = max(1, row_elements)
    by_elements = -(-(LARGE + EXTRA) // inner)
    by_row_start = -(-(LARGE + ROW_MARGIN) // inner) + 1
    return max(by_elements, by_row_start) if inner > 1 else by_elements


def _row_elements(contract: Contract, rows_in: list[str], dims: dict[str, int], outer: tuple[str, ...]) -> int:
    """Elements in one row of the widest row input (the product of its dims after the outer dims)."""
    return max(math.prod(dims[s] for s in contract.inputs[n].shape[len(outer):]) for n in rows_in)


def _default(contract: Contract, s: str) -> int:
    return min(contract.dims[s].max, max(contract.dims[s].min, 33))


def _inner_dims(contract: Contract, outer: tuple[str, ...], rows_in: list[str]) -> dict[str, int]:
    """Every dim but the outer ones: 33 (not a power of two, so masks matter) within its declared range,
    widened when the outer dims alone cannot reach 2^31 elements inside their ranges.

    A row kernel declared with rows up to 2^24 needs rows of at least 129 elements; each
    inner dim of the row inputs is widened in turn (the widest declared range first) to the
    smallest size that is enough, within its range, and no row past ``MAX_ROW_ELEMENTS``
    (the compared tail, and on the interpreter one program's work, stay small).  Where that
    is not enough the dims stay at the most they could take, and the caller skips the cell.
    """
    dims = {s: _default(contract, s) for s in contract.dims if s not in outer}
    most_rows = math.prod(contract.dims[s].max for s in outer)

    def enough(row: int) -> bool:
        return rows_needed(row) <= most_rows

    start = _row_elements(contract, rows_in, dims, outer)
    if enough(start):
        return dims
    limit = max(start, MAX_ROW_ELEMENTS)
    inner = dict.fromkeys(s for n in rows_in for s in contract.inputs[n].shape[len(outer):])
    for s in sorted(inner, key=lambda s: -contract.dims[s].max):
        def size(v: int, s: str = s) -> int:
            return _row_elements(contract, rows_in, {**dims, s: v}, outer)

        lo, hi = dims[s], contract.dims[s].max
        while lo < hi and size(hi) > limit:  # the largest size within the limit
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if size(mid) <= limit else (lo, mid - 1)
        top, lo = hi, dims[s]
        while lo < hi:  # the smallest size that is enough, or the top
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if enough(size(mid)) else (mid + 1, hi)
        dims[s] = min(lo, top)
        if enough(size(dims[s])):
            break
    return dims


def _grow_outer(contract: Contract, outer: tuple[str, ...], rows: int) -> dict[str, int] | None:
    """Sizes of the outer dims, within their ranges, whose product is at least ``rows``: the first grows
    first, and each next one only once those before it are at their maximum; None if they cannot."""
    sizes = {s: _default(contract, s) for s in outer}
    for s in outer:
        rest = math.prod(v for t, v in sizes.items() if t != s)
        want = max(contract.dims[s].min, -(-rows // rest))
        if contract.dims[s].admits(want):
            sizes[s] = want
            return sizes
        sizes[s] = contract.dims[s].max
    return sizes if math.prod(sizes.values()) >= rows else None


def large_index_plan(contract: Contract) -> LargeIndexPlan | SkipReason:
    """The example for ``contract``, or why the cell does not apply to it."""
    if contract.model is not None:
        return SkipReason("stochastic subject: its outputs are checked by the stochastic cells",
                          code="large-index:stochastic")
    if contract.mask_name is not None:
        return SkipReason("the large-index emulation does not build mask inputs", code="large-index:mask")
    if contract.relations:
        return SkipReason("the large-index plan grows dims one by one, and the contract relates its dims "
                          f"({', '.join(r.describe() for r in contract.relations)})", code="large-index:related-dims")
    # max_elements caps the drawn examples' cost, not what the launcher accepts: the lazy emulation is cheap.
    biggest = max(math.prod(contract.dims[s].max for s in contract.inputs[n].shape)
                  for n in contract.tensor_names)
    if biggest < LARGE:
        return SkipReason(f"contract admits at most {biggest} elements per input (< 2^31): an int32 offset "
                          "cannot overflow inside it (shape:beyond-range checks that larger inputs are rejected)",
                          code="large-index:contract-below-2^31")
    found = _rows_and_params(contract)
    if isinstance(found, str):
        return found
    row, params = found
    rows_in = [n for n in contract.inputs if n not in params]
    outer = _outer_dims(contract, row, rows_in, params)
    dims = _inner_dims(contract, outer, rows_in)
    inner = _row_elements(contract, rows_in, dims, outer)
    rows = rows_needed(inner)
    sizes = _grow_outer(contract, outer, rows)
    if sizes is None:
        widened = {s: v for s, v in dims.items() if v > _default(contract, s)}
        how = (f" (inner dims widened within their ranges to {', '.join(f'{s}={v}' for s, v in widened.items())}: "
               f"rows of {inner} elements, the most the cell builds)") if widened else ""
        ranges = " x ".join(f"{s} in " * (len(outer) > 1) + f"[{contract.dims[s].min}, {contract.dims[s].max}]"
                            for s in outer)
        return SkipReason(f"{'*'.join(outer)}={rows} rows would be needed for 2^31 elements and a row start past "
                          f"2^31, outside {ranges}{how}", code="large-index:rows-out-of-range")
    dtype = _pick_dtype(contract)
    if dtype is None:
        return SkipReason("the inputs claim no dtype in common", code="large-index:no-common-dtype")
    scalars = {n: s.representative() for n, s in contract.scalars.items()}
    fill = max(1, -(-TAIL_ELEMENTS // inner))
    # The compared rows lie within the last index of every outer dim but the last: a block the oracle can take.
    fill = min(fill, sizes[outer[-1]] if len(outer) > 1 else math.prod(sizes.values()))
    return LargeIndexPlan(dims={**sizes, **dims}, dtype=dtype, row_dim=row, fill_rows=fill, scalars=scalars,
                          params=params, reduced=row == contract.reduces, outer=outer)
