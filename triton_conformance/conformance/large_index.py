"""The ``shape:large-index`` cell: inputs of more than 2^31 elements, where int32 offsets wrap.

``pid * BLOCK`` computed in int32 overflows once a tensor passes 2^31
elements, a recurring bug in public kernel libraries.  The cell runs one
example whose leading dim takes an input just past 2^31 elements (an fp16
vector of 2^31 + 4099 elements for ``add``) and compares the output's tail
with the float64 oracle on the inputs' tail.

The dims other than the leading one are 33 (within their declared ranges);
where the leading dim's declared maximum is too small for 2^31 elements at
that width (rows declared up to 2^24), the inner dims widen within their
ranges to the smallest size that fits, up to 65536 elements a row.

It applies to subjects whose contract admits an input of >= 2^31 elements
and that are *row-separable*: every input has the same leading dim, which is
not reduced, so the last rows of the output depend only on the last rows of
the inputs (elementwise and row-wise kernels).  Any other subject is skipped
with the reason: one whose contract excludes such inputs cannot overflow
inside it, and rejecting larger ones is the ``shape:beyond-range`` cell's job.

The huge tensors (inputs, and outputs the launcher allocates) are carved
from one buffer with a gap before each (:class:`_Arena`), so an offset that
wrapped lands in a gap, never in another tensor:

- **CUDA:** real tensors (a 2^31 + 4099-element fp16 tensor is 4 GiB; with
  the gaps, 28 GiB of a 141 GB H200 for ``add``), filled with random
  values.  The whole grid runs.  The gaps are real memory holding a byte
  pattern, so a wrapped store writes there instead of faulting (a fault
  would leave the CUDA context unusable); the gaps are checked afterwards
  (*unsafe: oob-write*), then the last rows of the output are compared.
- **Interpreter:** the buffer is an unbacked mapping whose pages stay
  untouched until written; only the inputs' tails are filled, and
  :func:`.tail_grid.tail_programs` makes the interpreter run only the last
  few program ids along each grid axis while checking every address against
  the launch's tensors: a load outside them is masked off and recorded, a
  store outside them stops the launch before it writes (*unsafe: oob-write*).
  Where those programs wrote the output's end but no whole row (a row spread
  over several programs, as a grid over rows x heads does), the launch is
  run again with 8, then 64 and 512 times as many.
  The written suffix of the output is compared.  Only the touched pages cost
  memory (a few MB), and the cell takes well under a second.
"""

from __future__ import annotations

import contextlib
import math
import mmap
from dataclasses import dataclass, field
from typing import Any

import torch

from triton_conformance.conformance.allocations import intercept_allocations
from triton_conformance.conformance.judge import Judge, as_tuple, exception_text
from triton_conformance.conformance.memory import poison_bytes, unwritten_elements
from triton_conformance.conformance.tail_grid import (
    LONG_LOOP,
    TAIL_PROGRAMS,
    WHOLE_AXIS,
    OutOfBoundsAccess,
    tail_programs,
)
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.contract import Contract
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.performance import ITEMSIZE
from triton_conformance.strategies._internal.tensors import torch_dtype
from triton_conformance.strategies._internal.values import fill_values

__all__ = ["LARGE", "LargeIndexPlan", "OutOfBoundsAccess", "large_index_plan", "run_large_index_example",
           "tail_programs"]

LARGE = 1 << 31
EXTRA = 4099  # past 2^31 by 4 blocks of 1024 and 3: the last block is partial
TAIL_ELEMENTS = 1 << 16  # elements filled (and compared) at the end of each input
MAX_ROW_ELEMENTS = 1 << 16  # inner dims are widened (for a bounded row dim) up to this many elements a row
MAX_TAIL_PROGRAMS = TAIL_PROGRAMS * 8 ** 3  # emulated: programs per grid axis when a row spans several


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


# -- the example ------------------------------------------------------------------

_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value; Python 3.11 does not export it


_GAP_BYTE = 0xA5


class _Arena:
    """Huge tensors carved from one buffer, each after a gap, so that a wrapped offset lands in a gap.

    ``pid * BLOCK`` wrapped in int32 addresses 2^32 elements before where it
    meant to, that is between 2^31 elements before a tensor and its start.

    - CPU: the buffer is an unbacked MAP_NORESERVE mapping (untouched pages
      cost neither memory nor commit) and the gaps are 2^32 elements; the
      emulation's address check reports an access there, whatever the
      allocator would have put there.
    - CUDA: the buffer is real device memory (28 GiB for ``add``), the gaps
      are 2^31 elements filled with a byte pattern, so a wrapped access reads
      and writes memory the process owns instead of faulting (which would
      leave the CUDA context unusable), and :meth:`gap_damage` finds the writes.
    """

    def __init__(self, tensors: int, largest_bytes: int, itemsize: int, device: str = "cpu", *,
                 reserve: bool | None = None, gap: int | None = None):
        self.device = device
        self.reserve = device == "cpu" if reserve is None else reserve  # unbacked, or real memory with a pattern
        # A wrapped offset is 2^32 elements off, at most 2^31 elements before the tensor's start.
        self.gap = gap or (2 * LARGE if self.reserve else LARGE) * itemsize + (1 << 20)
        self.size = tensors * (self.gap + largest_bytes + 4096) + self.gap
        if self.reserve:
            self.map = mmap.mmap(-1, self.size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
            self.buffer = torch.frombuffer(self.map, dtype=torch.uint8, count=self.size)
        else:
            self.buffer = torch.full((self.size,), _GAP_BYTE, dtype=torch.uint8, device=device)
        self.used = 0
        self.regions: list[tuple[int, int, str]] = []  # (start, end, name) of each tensor, in order

    def tensor(self, shape: tuple[int, ...], dtype: Any, name: str = "an output of the launcher"):
        """A contiguous tensor after the next gap, or None when the buffer is full."""
        nbytes = math.prod(shape) * dtype.itemsize
        start = self.used + self.gap
        if start + nbytes + self.gap > self.size:
            return None
        self.used = start + nbytes + (-nbytes) % 4096
        self.regions.append((start, start + nbytes, name))
        return self.buffer[start:start + nbytes].view(dtype).view(shape)

    def gap_damage(self) -> str | None:
        """Where a write into a gap landed (CUDA only; the emulation checks addresses itself), or None."""
        if self.reserve or not self.regions:
            return None
        pattern = int.from_bytes(bytes([_GAP_BYTE]) * 8, "little", signed=True)
        ends = [0] + [end for _, end, _ in self.regions]
        starts = [start for start, _, _ in self.regions] + [self.used + self.gap]
        names = [name for _, _, name in self.regions] + ["(after the last tensor)"]
        for lo, hi, name in zip(ends, starts, names):
            lo = -(-lo // 8) * 8  # whole words only
            changed = (self.buffer[lo:hi].view(torch.int64) != pattern).nonzero()
            if changed.numel():
                first = lo + 8 * int(changed[0, 0])
                first += next(i for i, v in enumerate(self.buffer[first:first + 8].tolist()) if v != _GAP_BYTE)
                return (f"{int(changed.numel())} words changed in the gap before {name}, the first "
                        f"{hi - first} bytes before its start (an int32 offset that wrapped around?)")
        return None


def _tail_server(rows_of: dict[int, int], arena: _Arena | None = None):
    """An allocation server (:mod:`.allocations`): every huge ``torch.empty``-style allocation gets
    poison in its last rows, and nothing else; with an ``arena``, huge ones are carved from it."""
    def serve(request):  # noqa: ANN001, ANN202 - an allocations.Request; a tensor or None
        meta = request.meta
        if request.zero or meta.numel() < LARGE:
            return None  # small, or zeros (zeroing a lazy mapping would touch every page): torch's own
        t = None
        if arena is not None and request.factory != "empty_strided":
            t = arena.tensor(tuple(meta.shape), meta.dtype)
        if t is None:
            t = request.allocate()
        if t.is_contiguous() and t.dtype.is_floating_point:
            row = t.numel() // t.shape[0] if t.dim() else 1
            tail = t.view(-1)[-min(t.numel(), rows_of.get(t.shape[0] if t.dim() else 1, 1) * row):]
            pattern = int.from_bytes(poison_bytes(t.dtype), "little", signed=True)
            tail.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).fill_(pattern)
        return t

    return serve


def input_dtype(contract: Contract, plan: LargeIndexPlan, name: str) -> str:
    """The dtype input ``name`` gets: the plan's, or an index input's own integer dtype."""
    decl = contract.inputs[name]
    if getattr(decl, "index_of", None) and decl.dtypes:
        return decl.dtypes[0]
    return plan.dtype


def _values(contract: Contract, plan: LargeIndexPlan, name: str, shape: tuple[int, ...], dtype: Any, seed: int):
    decl = contract.inputs[name]
    index_of = getattr(decl, "index_of", None)
    if index_of:  # indices into dim index_of: in range
        generator = torch.Generator().manual_seed(seed)
        return torch.randint(0, max(1, plan.dims[index_of]), shape, generator=generator).to(dtype)
    return fill_values(shape, dtype, "ordinary", seed).to(dtype)


def _build(contract: Contract, plan: LargeIndexPlan, device: str, seed: int = 0,
           arena: _Arena | None = None, emulate: bool = True) -> dict[str, Any]:
    """The inputs: row inputs contiguous, lazily allocated, the last ``fill_rows`` rows holding ordinary
    values; parameters (broadcast over the rows) built whole and small.

    On CUDA the rest is filled too (with randn), so the kernel reads real data everywhere.
    """
    out = {}
    for index, name in enumerate(contract.inputs):
        dtype = torch_dtype(input_dtype(contract, plan, name))
        shape = tuple(plan.dims[s] for s in contract.inputs[name].shape)
        if name in plan.params:
            out[name] = _values(contract, plan, name, shape, dtype, seed * 7919 + index).to(device)
            continue
        t = arena.tensor(shape, dtype, f"input {name!r}") if arena is not None else None
        if t is None:
            t = torch.empty(shape, dtype=dtype, device=device)
        if not emulate:  # real data everywhere; the emulation leaves all but the tail untouched
            if getattr(contract.inputs[name], "index_of", None) or not dtype.is_floating_point:
                t.zero_()
            else:
                t.normal_(generator=torch.Generator(device=device).manual_seed(seed + index))
        tail = t[-plan.fill_rows:]
        tail.copy_(_values(contract, plan, name, tuple(tail.shape), dtype, seed * 7919 + index))
        out[name] = t
    return out


def run_large_index_example(subject: Any, backend: Any, judge: Any = None, seed: int = 0, *,
                            emulate: bool | None = None, notes: list[str] | None = None):
    """Run the cell's one example: a Finding, or ``"honoured"``.

    ``emulate`` (default: on the CPU) runs only the last programs of the grid
    on lazily allocated tensors; without it the whole grid runs on real
    tensors, as on CUDA.  The written tail of each output is judged like any
    example (``judge``: the subject's oracle, tolerance and error scale).
    Parameter inputs (broadcast over the rows) are passed whole to the oracle.

    An output that is not split into rows (a full reduction's 0-d result, or
    a reduction over the rows) cannot be judged from the tails: emulated, only
    the memory checks apply to it (every address of the programs that ran);
    on real tensors it is judged against the oracle on the whole inputs.
    ``notes`` (a list) receives a line for each such limit, for the message.
    """
    notes = [] if notes is None else notes
    judge = judge or Judge(subject, on_cuda=backend.compiles)
    contract = subject.contract
    plan = large_index_plan(contract)
    if isinstance(plan, str):
        raise InvalidArgument(f"run_large_index_example: subject={subject.name!r}, expected one the cell "
                              f"applies to: {plan}")
    device = backend.device
    itemsize = max(ITEMSIZE[input_dtype(contract, plan, n)] for n in contract.inputs)
    row_inputs = plan.row_inputs(contract)
    largest = max(plan.elements(contract, n) for n in row_inputs) * itemsize
    emulate = not backend.on_device if emulate is None else emulate
    rows, fill = plan.dims[plan.row_dim], plan.fill_rows
    keep = TAIL_PROGRAMS
    while True:
        # Room for the inputs and their outputs (one output where the gaps are real memory).
        arena = _Arena(len(row_inputs) + (len(row_inputs) if emulate else 1), largest, itemsize, device,
                       reserve=emulate)
        inputs = _build(contract, plan, device, seed, arena, emulate)
        emulation = tail_programs(keep, whole_axis=WHOLE_AXIS, long_loop=LONG_LOOP) if emulate else \
            contextlib.nullcontext()
        with emulation as state, intercept_allocations(_tail_server({rows: fill}, arena)):
            try:
                raw = subject.launcher(**inputs, **plan.scalars)
                backend.synchronize()
            except Exception as exc:  # noqa: BLE001 - any exception is an outcome
                violation = getattr(state, "violation", None)
                if violation is not None:
                    return Finding("unsafe", "oob-write", f"{violation} (last programs of the grid, "
                                   f"{plan.dims} {plan.dtype})", {"address_error": str(violation)})
                return Finding("crash", "exception", f"{type(exc).__name__} on {plan.dims} {plan.dtype}: {exc}",
                               {"traceback": exception_text(exc)})
        damage = arena.gap_damage()
        if damage is not None:
            return Finding("unsafe", "oob-write", f"wrote outside every tensor: {damage} ({plan.dims} {plan.dtype})",
                           {"address_error": damage})
        read = getattr(state, "read_violation", None)
        if read is not None:
            return Finding("unsafe", "poisoned-read", f"{read} (last programs of the grid, {plan.dims} "
                           f"{plan.dtype}; the load was masked off)", {"address_error": str(read)})
        outputs = as_tuple(raw)
        if not emulate or keep >= MAX_TAIL_PROGRAMS or not any(_partly_written(o, rows, fill) for o in outputs):
            break
        keep *= 8  # the last programs wrote part of the last row only (rows spread over programs): more of them
    if keep > TAIL_PROGRAMS:
        notes.append(f"the last {keep} programs of each grid axis ran (fewer wrote no whole row: a row spans "
                     "several programs)")
    if getattr(state, "trimmed_loops", 0):
        notes.append(f"persistent kernel: {state.trimmed_loops} loops of more than {state.long_loop} iterations "
                     f"ran only their last {state.keep_iterations}")
    dtypes = {n: input_dtype(contract, plan, n) for n in contract.inputs}
    if plan.reduced or any(isinstance(o, torch.Tensor) and (o.dim() == 0 or o.shape[0] != rows) for o in outputs):
        # A full reduction (or one over the rows): the answer depends on every row.
        if emulate:
            notes.append("memory only: an output not split into rows (a reduction over the rows, or 0-d) was not "
                         "compared, since only the last programs of the grid ran; every address they used was "
                         "inside the tensors")
            return "honoured"
        found = judge.compare(inputs, plan.dims, dtypes, plan.scalars, outputs, where="whole ")
        return found if found is not None else "honoured"
    written = fill
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            return Finding("wrong", "bad-output", f"output {i} is {type(out).__name__}, expected a tensor")
        holes = unwritten_elements(out[-fill:])
        # Emulated, only the last programs ran: a suffix of the rows is written.
        rows_written = _written_suffix(holes) if emulate else fill
        if rows_written == 0 or (not emulate and holes.any()):
            first = tuple(int(v) for v in torch.nonzero(holes)[0]) if holes.any() else ()
            return Finding("unsafe", "unwritten", f"output {i}: the last rows of a {tuple(out.shape)} output "
                           f"were never written (first hole at tail row {first}; an offset that wrapped "
                           "around 2^31 writes elsewhere)", {"unwritten": int(holes.sum())})
        written = min(written, rows_written)
    tails = {n: (v if n in plan.params else v[-written:]) for n, v in inputs.items()}
    dims = {**plan.dims, plan.row_dim: written}
    found = judge.compare(tails, dims, dtypes, plan.scalars, tuple(o[-written:] for o in outputs),
                          where=f"last {written} rows of ")
    return found if found is not None else "honoured"


def _partly_written(out: Any, rows: int, fill: int) -> bool:
    """Whether the emulated programs wrote the end of output ``out`` but not one whole row of it: a row
    spread over more programs than ran (a grid over rows x heads), not a grid that stops short."""
    if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != rows or out.numel() == 0:
        return False
    holes = unwritten_elements(out[-fill:])
    return _written_suffix(holes) == 0 and not bool(holes.reshape(-1)[-1])


def _written_suffix(holes: Any) -> int:
    """How many trailing rows of ``holes`` (True = unwritten) are fully written."""
    per_row = holes.reshape(holes.shape[0], -1).any(dim=1) if holes.dim() else holes.reshape(1)
    bad = per_row.nonzero()
    return int(per_row.shape[0] - 1 - int(bad[-1])) if bad.numel() else int(per_row.shape[0])
