"""The ``shape:large-index`` cell: inputs of more than 2^31 elements, where int32 offsets wrap.

``pid * BLOCK`` computed in int32 overflows once a tensor passes 2^31 elements, a recurring bug in
public kernel libraries.  The cell runs one example whose leading dim takes an input just past 2^31
elements (an fp16 vector of 2^31 + 4099 elements for ``add``) and compares the output's tail with the
float64 oracle on the inputs' tail.

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
from one buffer with a gap before each (:class:`~.arena.Arena`), so an offset that
wrapped lands in a gap, never in another tensor:

- **CUDA:** real tensors (a 2^31 + 4099-element fp16 tensor is 4 GiB; with
  the gaps, 28 GiB of a 141 GB H200 for ``add``), filled with random
  values.  The whole grid runs.  The gaps are real memory holding a byte
  pattern, so a wrapped store writes there instead of faulting (a fault
  would leave the CUDA context unusable); the gaps are checked afterwards
  (*unsafe: oob-write*), then the last rows of the output are compared.
- **Interpreter:** the buffer is an unbacked mapping whose pages stay
  untouched until written; only the inputs' tails are filled, and
  :func:`.tail_grid.tail_programs` makes each launch run its programs
  backwards from the grid's last (whole rows of a grid over rows x tiles),
  until they have reached every element past 2^31 of its huge tensors or
  spent their cost allowance, with a persistent kernel's long loops cut to
  their last iterations.  Every address is checked against the launch's
  tensors: a load outside them is masked off and recorded, a store outside
  them stops the launch before it writes (*unsafe: oob-write*).  The rows
  those programs wrote at the output's end are compared; what the programs
  that did not run would have written is never blamed on the kernel (the
  result's notes say what was left unchecked).  Only the touched pages cost
  memory (a few MB), and the cell takes a second or a few.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch

from triton_conformance.conformance.battery.allocations import intercept_allocations
from triton_conformance.conformance.battery.memory import poison_bytes, unwritten_elements
from triton_conformance.conformance.judge import Judge, as_tuple, exception_text
from triton_conformance.conformance.kinds.large_index.arena import NAN_BYTE, Arena, refuse_what_cannot_fit
from triton_conformance.conformance.kinds.large_index.plan import (
    EXTRA,
    LARGE,
    TAIL_ELEMENTS,
    LargeIndexPlan,
    large_index_plan,
)
from triton_conformance.conformance.kinds.large_index.tail_grid import OutOfBoundsAccess, tail_programs
from triton_conformance.conformance.discards import (
    discarding_out_of_memory,
    raise_if_out_of_memory,
)
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.contract import Contract
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.performance import ITEMSIZE
from triton_conformance.strategies._internal.tensors import torch_dtype
from triton_conformance.strategies._internal.values import fill_values

__all__ = ["LARGE", "EXTRA", "TAIL_ELEMENTS", "ExampleReport", "LargeIndexPlan", "OutOfBoundsAccess",
           "large_index_plan", "run_large_index_example", "tail_programs"]

# Emulated: the most elements apart that one program's accesses of a tensor may lie for the program to count
# as owning a block (a row of up to 65536 elements, a tile of rows); a persistent kernel's reach ~2^30 or more.
LOCAL_REACH = 1 << 24


# -- the example ------------------------------------------------------------------

def _row_split(shape: tuple[int, ...], rows: int) -> int | None:
    """How many leading dims of ``shape`` multiply to ``rows`` (the outer dims, or them flattened), or None."""
    product = 1
    for i, n in enumerate(shape):
        product *= n
        if product == rows:
            return i + 1
        if product > rows:
            return None
    return None


def as_rows(t: Any, rows: int) -> Any:
    """``t`` seen as ``(rows, *inner)``, its outer dims flattened (a view where ``t`` is contiguous), or None."""
    if not isinstance(t, torch.Tensor):
        return None
    split = _row_split(tuple(t.shape), rows)
    return None if split is None else t.reshape(rows, *t.shape[split:])


def _tail_block(t: Any, rows: int, count: int) -> Any:
    """The last ``count`` rows of ``t`` in its own rank: 1 in every outer dim but the last, which holds ``count``
    (they lie within the last index of those dims: the plan's fill rows do)."""
    split = _row_split(tuple(t.shape), rows)
    return as_rows(t, rows)[-count:].reshape(*(1,) * (split - 1), count, *t.shape[split:])


def _tail_server(rows: int, fill: int, arena: Arena | None = None, served: list | None = None):
    """An allocation server (:mod:`.allocations`): every ``torch.empty``-style allocation that is huge or
    leads with the rows (the outer dims, or their product) gets poison in its last ``fill`` rows (so an
    unwritten row shows), and nothing else; with an ``arena``, huge ones are carved from it.  ``served``
    (a list) receives each one that leads with the rows, to tell which rows the programs wrote (a
    launcher may return a converted copy)."""
    def serve(request):  # noqa: ANN001, ANN202 - an allocations.Request; a tensor or None
        meta = request.meta
        huge, split = meta.numel() >= LARGE, _row_split(tuple(meta.shape), rows)
        if request.zero or not (huge or split is not None):
            return None  # small, or zeros (zeroing a lazy mapping would touch every page): torch's own
        t = None
        if huge and arena is not None and request.factory != "empty_strided":
            t = arena.tensor(tuple(meta.shape), meta.dtype)
        if t is None:
            t = request.allocate()
        if served is not None and split is not None:
            served.append(t)
        if t.is_contiguous() and t.dtype.is_floating_point and t.numel():
            row = t.numel() // rows if split is not None else (t.numel() // t.shape[0] if t.dim() else 1)
            tail = t.view(-1)[-min(t.numel(), (fill if split is not None else 1) * row):]
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
           arena: Arena | None = None, emulate: bool = True) -> dict[str, Any]:
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
        tail = as_rows(t, plan.rows)[-plan.fill_rows:]
        tail.copy_(_values(contract, plan, name, tuple(tail.shape), dtype, seed * 7919 + index))
        out[name] = t
    return out


@dataclass
class ExampleReport:
    """What the one example could not check, or how the emulation bounded its work: a line each (``notes``),
    whether any output was compared with the oracle (``value_compared``), and, emulated, each huge input's
    highest element a program that ran touched (``reached``)."""

    notes: list[str] = field(default_factory=list)
    value_compared: bool = True
    reached: dict[str, int | None] | None = None

    def unchecked(self, note: str) -> str:
        """No output compared: only the memory checks applied."""
        self.value_compared = False
        self.notes.append(note)
        return "honoured"


def run_large_index_example(subject: Any, backend: Any, judge: Any = None, seed: int = 0, *,
                            emulate: bool | None = None, report: ExampleReport | None = None):
    """Run the cell's one example: a Finding, or ``"honoured"``.

    ``emulate`` (default: on the CPU) runs the last programs of each launch
    (:mod:`.tail_grid`) on lazily allocated tensors; without it the whole grid
    runs on real ones.  The output's tail is compared with the oracle on the
    inputs' tail through the same judge as every other example (``judge``: the
    subject's oracle, tolerance and error scale).  Parameter inputs (broadcast
    over the rows) are passed whole to the oracle.

    Emulated, nothing the programs that did not run would have done is blamed
    on the kernel: the rows compared are the ones the programs that ran wrote
    at the end of the output, and an unwritten end is the kernel's only where
    the emulation can tell that no program it skipped would have written it
    (:func:`_stops_short`).  An output that is not split into rows (a full
    reduction's 0-d result, or a reduction over the rows) cannot be judged from
    the tails: emulated, only the memory checks apply to it (every address of
    the programs that ran); on real tensors it is judged against the oracle on
    the whole inputs.  ``report`` receives a line for each such limit, and whether any output was compared.
    """
    report = ExampleReport() if report is None else report
    try:
        return _run_example(subject, backend, judge or Judge(subject, on_cuda=backend.compiles), seed, emulate,
                            report)
    finally:  # its tensors are gone: give their (GiBs of) device memory back to the other cells of this worker
        if backend.on_device:
            torch.cuda.empty_cache()


def _run_example(subject: Any, backend: Any, judge: Any, seed: int, emulate: bool | None, report: ExampleReport):
    contract = subject.contract
    plan = large_index_plan(contract)
    if isinstance(plan, str):
        raise InvalidArgument(f"run_large_index_example: subject={subject.name!r}, expected one the cell "
                              f"applies to: {plan}")
    device = backend.device
    row_inputs = plan.row_inputs(contract)
    sizes = {n: ITEMSIZE[input_dtype(contract, plan, n)] for n in contract.inputs}
    largest = max(plan.elements(contract, n) * sizes[n] for n in row_inputs)
    # The gaps hold a wrapped offset of the widest huge tensor (an int64 index input is not one).
    widest = max((sizes[n] for n in row_inputs if plan.elements(contract, n) >= LARGE), default=ITEMSIZE[plan.dtype])
    emulate = not backend.on_device if emulate is None else emulate
    rows, fill = plan.rows, plan.fill_rows
    tensors = len(row_inputs) + (len(row_inputs) if emulate else 1)
    if not emulate:  # real memory: predict the peak first, and skip what cannot fit
        refuse_what_cannot_fit(plan, contract, tensors, largest, widest, device)
    # Room for the inputs and their outputs (one output where the gaps are real memory).
    with discarding_out_of_memory(f"building the large-index example {plan.dims} {plan.dtype}"):
        arena = Arena(tensors, largest, widest, device, reserve=emulate)
        inputs = _build(contract, plan, device, seed, arena, emulate)
    emulation = tail_programs(cover_from=LARGE) if emulate else contextlib.nullcontext()
    served: list = []  # the allocations that lead with the rows, as served
    launch = _Launch(subject, backend, inputs, plan, _tail_server(rows, fill, arena, served), len(arena.regions))
    with emulation as state:
        raw, error = launch()
    if emulate and state.windows:
        report.notes.append(f"programs run: {state.describe()}")
    if emulate:
        report.reached = {n: state.reached(inputs[n]) for n in row_inputs if plan.elements(contract, n) >= LARGE}
    violation = getattr(state, "violation", None)
    if violation is not None:
        return Finding("unsafe", "oob-write", f"{violation} (last programs of the grid, "
                       f"{plan.dims} {plan.dtype})", {"address_error": str(violation)})
    if error is not None:
        return Finding("crash", "exception", f"{type(error).__name__} on {plan.dims} {plan.dtype}: {error}",
                       {"traceback": exception_text(error)})
    with discarding_out_of_memory("checking the gaps between the large-index tensors"):
        damage = arena.gap_damage()
    if damage is not None:
        return Finding("unsafe", "oob-write", f"wrote outside every tensor: {damage} ({plan.dims} {plan.dtype})",
                       {"address_error": damage})
    read = getattr(state, "read_violation", None)
    if read is not None:
        return Finding("unsafe", "poisoned-read", f"{read} (last programs of the grid, {plan.dims} "
                       f"{plan.dtype}; the load was masked off)", {"address_error": str(read)})
    first = None if emulate else _nonfinite(as_tuple(raw))  # the emulation sees reads itself
    found = _judged(contract, plan, judge, inputs, as_tuple(raw), served, state, emulate, report)
    if first is None or not (found == "honoured" or found.outcome == "wrong"):
        return found
    raw = None  # the first run's outputs: the second run's take their place in the arena
    served.clear()
    return _reads_the_gaps(launch, arena, first, plan) or found  # where reading the gaps is the cause


class _Launch:
    """The launcher called on the example's inputs, its allocations served (from the arena where huge)."""

    def __init__(self, subject: Any, backend: Any, inputs: dict[str, Any], plan: LargeIndexPlan, server: Any,
                 inputs_carved: int):
        self.subject, self.backend, self.inputs, self.plan, self.server = subject, backend, inputs, plan, server
        self.inputs_carved = inputs_carved  # the arena's regions that are inputs, the rest its outputs

    def __call__(self) -> tuple[Any, Exception | None]:
        with intercept_allocations(self.server):
            try:
                raw = self.subject.launcher(**self.inputs, **self.plan.scalars)
                self.backend.synchronize()
                return raw, None
            except Exception as exc:  # noqa: BLE001 - any exception is an outcome
                raise_if_out_of_memory(exc, f"in the launcher, on {self.plan.dims} {self.plan.dtype}")
                return None, exc


def _nonfinite(outputs: tuple) -> list[int]:
    """The NaN and inf elements of each float output (0 for any other)."""
    return [int((~torch.isfinite(o)).sum()) if isinstance(o, torch.Tensor) and o.dtype.is_floating_point else 0
            for o in outputs]


def _reads_the_gaps(launch: _Launch, arena: Arena, first: list[int], plan: LargeIndexPlan) -> Finding | None:
    """Real memory: the same launch again with NaN in every gap.  A wrapped load reads the gaps, so it is
    seen where more outputs are NaN or inf than the first run's (gaps of finite bytes) gave; values alone
    cannot tell it, a few thousand wrong terms in a sum of 2^31 lie within any bound.  Nondeterminism
    never makes a NaN of finite inputs.  None when nothing shows (or the second run raised)."""
    with discarding_out_of_memory("running the large-index example again with NaN in the gaps"):
        arena.rewind(launch.inputs_carved)
        arena.fill_gaps(NAN_BYTE)
        raw, error = launch()
    if error is not None:
        return None
    again = _nonfinite(as_tuple(raw))
    for i, (before, after) in enumerate(zip(first, again)):
        if after > before:
            return Finding("unsafe", "poisoned-read", f"output {i}: {after - before} more NaN/inf elements when "
                           f"only the gaps around the huge tensors held NaN bytes instead of finite ones "
                           f"({plan.dims} {plan.dtype}): the kernel reads outside its tensors (an int32 offset "
                           "that wrapped around 2^31?)", {"refilled": "gaps", "output": i,
                                                         "nonfinite": [before, after]})
    return None


def _judged(contract: Contract, plan: LargeIndexPlan, judge: Any, inputs: dict[str, Any], outputs: tuple,
            served: list, state: Any, emulate: bool, report: ExampleReport):
    """The outputs judged: a Finding, or ``"honoured"``."""
    rows, fill = plan.rows, plan.fill_rows
    dtypes = {n: input_dtype(contract, plan, n) for n in contract.inputs}
    if plan.reduced or any(isinstance(o, torch.Tensor) and as_rows(o, rows) is None for o in outputs):
        # A full reduction (or one over the rows): the answer depends on every row.
        if emulate:
            return report.unchecked("memory only: an output not split into rows (a reduction over the rows, or "
                                    "0-d) was not compared, since only the last programs of the grid ran; every "
                                    "address they used was inside the tensors")
        with discarding_out_of_memory(f"judging the whole {plan.dims} output"):  # float64 copies of 2^31 elements
            found = judge.compare(inputs, plan.dims, dtypes, plan.scalars, outputs, where="whole ")
        return found if found is not None else "honoured"
    # Emulated, only the last programs ran: the rows they wrote are a suffix, read off the allocations too (a
    # converted copy of one, loss.to(dtype), shows no poison where its programs did not run).  One with no
    # row written is a scratch buffer, or an output whose own holes are judged below.
    suffixes = [_written_suffix(unwritten_elements(as_rows(t, rows)[-fill:])) for t in served
                if emulate and t.is_contiguous() and t.dtype.is_floating_point]
    written = min([fill] + [n for n in suffixes if n > 0])
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            return Finding("wrong", "bad-output", f"output {i} is {type(out).__name__}, expected a tensor")
        holes = unwritten_elements(as_rows(out, rows)[-fill:])
        suffix = _written_suffix(holes)
        why = "" if not emulate else " (every program of the grid ran)" if state.complete else \
            (" (the last programs of the grid ran, each within a block of its tensors: none wrote the output's end)"
             if suffix == 0 and _stops_short(holes, state) else None)
        if holes.any() and why is not None:
            first = tuple(int(v) for v in torch.nonzero(holes)[0])
            return Finding("unsafe", "unwritten", f"output {i}: the last rows of a {tuple(out.shape)} output "
                           f"were never written{why} (first hole at tail row {first}; an offset that wrapped "
                           "around 2^31 writes elsewhere)", {"unwritten": int(holes.sum())})
        written = min(written, suffix)
    if written == 0:
        return report.unchecked("memory only: the programs the emulation ran wrote no whole row at the end of the "
                                "output (it belongs to programs it did not run), so no row was compared; every "
                                "address they used was inside the tensors")
    if written < fill:
        report.notes.append(f"the last {written} rows compared: the programs the emulation ran wrote those")
    tails = {n: (v if n in plan.params else _tail_block(v, rows, written)) for n, v in inputs.items()}
    dims = {**plan.dims, **dict.fromkeys(plan.outer[:-1], 1), plan.outer[-1]: written}
    with discarding_out_of_memory(f"judging the last {written} rows"):
        found = judge.compare(tails, dims, dtypes, plan.scalars, tuple(_tail_block(o, rows, written) for o in outputs),
                              where=f"last {written} rows of ")
    return found if found is not None else "honoured"


def _stops_short(holes: Any, state: Any) -> bool:
    """Whether an output whose end is unwritten, though not every program ran, is the kernel's fault.

    So it is where the output's last element is unwritten, no loop was
    trimmed, and every program that ran reached only a block of each tensor
    (``reach``): programs that each own a block, run from the grid's last,
    own the end of the output, and none of them wrote it (a grid that stops
    short).  A persistent kernel's programs each reach rows all over the
    tensors, so the end may be a program's that did not run: not blamed.
    """
    return bool(holes.reshape(-1)[-1]) and not state.trimmed_loops and state.reach <= LOCAL_REACH


def _written_suffix(holes: Any) -> int:
    """How many trailing rows of ``holes`` (True = unwritten) are fully written."""
    per_row = holes.reshape(holes.shape[0], -1).any(dim=1) if holes.dim() else holes.reshape(1)
    bad = per_row.nonzero()
    return int(per_row.shape[0] - 1 - int(bad[-1])) if bad.numel() else int(per_row.shape[0])
