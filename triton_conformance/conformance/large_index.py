"""The ``shape:large-index`` cell: inputs of more than 2^31 elements, where int32 offsets wrap.

``pid * BLOCK`` computed in int32 overflows once a tensor passes 2^31
elements, a recurring bug in public kernel libraries.  The cell runs one
example whose leading dim takes an input just past 2^31 elements (an fp16
vector of 2^31 + 4099 elements for ``add``) and compares the output's tail
with the float64 oracle on the inputs' tail.

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
  The written suffix of the output is compared.  Only the touched pages cost
  memory (a few MB), and the cell takes well under a second.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from triton_conformance.model.contract import Contract
from triton_conformance.conformance.tail_grid import OutOfBoundsAccess, tail_programs
from triton_conformance.errors import InvalidArgument

__all__ = ["LARGE", "LargeIndexPlan", "OutOfBoundsAccess", "large_index_plan", "large_index_skip_reason",
           "replay_large_index", "run_large_index_cell", "tail_programs"]

LARGE = 1 << 31
EXTRA = 4099  # past 2^31 by 4 blocks of 1024 and 3: the last block is partial
TAIL_ELEMENTS = 1 << 16  # elements filled (and compared) at the end of each input


@dataclass(frozen=True)
class LargeIndexPlan:
    """The one example of the cell: dims, dtype, and how many trailing rows are filled and compared."""

    dims: dict[str, int]
    dtype: str
    row_dim: str
    fill_rows: int
    scalars: dict[str, float] = field(default_factory=dict)

    def elements(self, contract: Contract, name: str) -> int:
        return math.prod(self.dims[s] for s in contract.inputs[name].shape)


def _pick_dtype(contract: Contract) -> str | None:
    """The narrowest dtype every tensor input claims (fp16 before bf16, whose interpreter is broken)."""
    common = None
    for name in contract.tensor_names:
        claimed = set(contract.inputs[name].dtypes)
        common = claimed if common is None else common & claimed
    order = ("float16", "bfloat16", "int8", "uint8", "int16", "float32", "int32", "float64", "int64")
    return next((d for d in order if common and d in common), None)


def large_index_plan(contract: Contract) -> LargeIndexPlan | str:
    """The example for ``contract``, or why the cell does not apply to it."""
    if contract.model is not None:
        return "stochastic subject: its outputs are checked by the stochastic cells"
    if contract.mask_name is not None:
        return "the large-index emulation does not build mask inputs"
    cap = contract.max_elements or math.inf
    biggest = max(min(cap, math.prod(contract.dims[s].max for s in contract.inputs[n].shape))
                  for n in contract.tensor_names)
    if biggest < LARGE:
        return (f"contract admits at most {biggest} elements per input (< 2^31): an int32 offset cannot "
                "overflow inside it (shape:beyond-range checks that larger inputs are rejected)")
    leads = {contract.inputs[n].shape[0] if contract.inputs[n].shape else None for n in contract.inputs}
    row = next(iter(leads))
    if len(leads) != 1 or row is None or row == contract.reduces:
        return ("not row-separable (every input's leading dim the same, unreduced dim): the tail of the "
                "output cannot be checked from the tail of the inputs")
    dims = {s: min(d.max, max(d.min, 33)) for s, d in contract.dims.items() if s != row}
    inner = max(math.prod(dims[s] for s in contract.inputs[n].shape[1:]) for n in contract.tensor_names)
    rows = -(-(LARGE + EXTRA) // inner)
    if not contract.dims[row].admits(rows):
        return f"{row}={rows} rows would be needed for 2^31 elements, outside [{contract.dims[row].min}, " \
               f"{contract.dims[row].max}]"
    if rows * inner > cap:
        return f"max_elements={contract.max_elements} is below 2^31 + {EXTRA}"
    dtype = _pick_dtype(contract)
    if dtype is None:
        return "the inputs claim no dtype in common"
    scalars = {n: (int(s.low) if s.kind == "int" else (s.low + s.high) / 2) for n, s in contract.scalars.items()}
    fill = max(1, -(-TAIL_ELEMENTS // inner))
    return LargeIndexPlan(dims={row: rows, **dims}, dtype=dtype, row_dim=row, fill_rows=min(fill, rows),
                          scalars=scalars)


def large_index_skip_reason(contract: Contract) -> str | None:
    """Why the cell does not apply to ``contract``, or None (used by ``cells.skip_reason``)."""
    plan = large_index_plan(contract)
    return plan if isinstance(plan, str) else None


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
        import torch

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
        import torch

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


@contextlib.contextmanager
def _poisoned_tails(rows_of: dict[int, int], arena: _Arena | None = None) -> Iterator[None]:
    """Fill the last rows of every huge ``torch.empty``-style allocation with poison, and nothing else.

    With an ``arena``, huge allocations are served from it.
    """
    import torch

    from triton_conformance.conformance.memory import poison_bytes

    factories = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}

    def wrap(name, original):
        def factory(*args, **kwargs):
            t = None
            if arena is not None and name != "empty_strided":
                meta = original(*args, **{**kwargs, "device": "meta"})
                if meta.numel() >= LARGE:
                    t = arena.tensor(tuple(meta.shape), meta.dtype)
            if t is None:
                t = original(*args, **kwargs)
            if t.numel() >= LARGE and t.is_contiguous() and t.dtype.is_floating_point:
                row = t.numel() // t.shape[0] if t.dim() else 1
                tail = t.view(-1)[-min(t.numel(), rows_of.get(t.shape[0] if t.dim() else 1, 1) * row):]
                size = t.element_size()
                pattern = int.from_bytes(poison_bytes(t.dtype), "little", signed=True)
                tail.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[size]).fill_(pattern)
            return t

        return factory

    try:
        for name, fn in factories.items():
            setattr(torch, name, wrap(name, fn))
        yield
    finally:
        for name, fn in factories.items():
            setattr(torch, name, fn)


def _build(contract: Contract, plan: LargeIndexPlan, device: str, seed: int = 0,
           arena: _Arena | None = None, emulate: bool = True) -> dict[str, Any]:
    """The inputs: contiguous, lazily allocated; the last ``fill_rows`` rows hold ordinary values.

    On CUDA the rest is filled too (with randn), so the kernel reads real data everywhere.
    """
    import torch

    from triton_conformance.strategies._internal.tensors import torch_dtype
    from triton_conformance.strategies._internal.values import fill_values

    dtype = torch_dtype(plan.dtype)
    out = {}
    for index, name in enumerate(contract.inputs):
        shape = tuple(plan.dims[s] for s in contract.inputs[name].shape)
        t = arena.tensor(shape, dtype, f"input {name!r}") if arena is not None else None
        if t is None:
            t = torch.empty(shape, dtype=dtype, device=device)
        if not emulate:  # real data everywhere; the emulation leaves all but the tail untouched
            if dtype.is_floating_point:
                t.normal_(generator=torch.Generator(device=device).manual_seed(seed + index))
            else:
                t.zero_()
        tail = t[-plan.fill_rows:]
        tail.copy_(fill_values(tuple(tail.shape), dtype, "ordinary", seed * 7919 + index).to(dtype))
        out[name] = t
    return out


def run_large_index_example(subject: Any, device: str = "cpu", seed: int = 0, *, emulate: bool | None = None):
    """Run the cell's one example: a Finding, or ``"honoured"``.

    ``emulate`` (default: on the CPU) runs only the last programs of the grid
    on lazily allocated tensors; without it the whole grid runs on real
    tensors, as on CUDA.
    """
    import torch

    from triton_conformance.conformance.checks import _as_tuple
    from triton_conformance.conformance.memory import unwritten_elements
    from triton_conformance.model.outcomes import Finding
    from triton_conformance.oracles.comparison import compare
    from triton_conformance.oracles.tolerance import default_bound

    contract = subject.contract
    reason = large_index_skip_reason(contract)
    if reason is not None:
        raise InvalidArgument(f"run_large_index_example: subject={subject.name!r}, expected one the cell "
                              f"applies to: {reason}")
    plan = large_index_plan(contract)
    itemsize = _itemsizes[plan.dtype]
    largest = max(plan.elements(contract, n) for n in contract.inputs) * itemsize
    emulate = device == "cpu" if emulate is None else emulate
    # Room for the inputs and their outputs (one output where the gaps are real memory).
    arena = _Arena(len(contract.inputs) + (len(contract.inputs) if emulate else 1), largest, itemsize, device,
                   reserve=emulate)
    inputs = _build(contract, plan, device, seed, arena, emulate)
    rows, fill = plan.dims[plan.row_dim], plan.fill_rows
    with (tail_programs() if emulate else contextlib.nullcontext()) as state, _poisoned_tails({rows: fill}, arena):
        try:
            raw = subject.launcher(**inputs, **plan.scalars)
            if device != "cpu":
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - any exception is an outcome
            violation = getattr(state, "violation", None)
            if violation is not None:
                return Finding("unsafe", "oob-write", f"{violation} (last programs of the grid, "
                               f"{plan.dims} {plan.dtype})", {"address_error": str(violation)})
            return Finding("crash", "exception", f"{type(exc).__name__} on {plan.dims} {plan.dtype}: {exc}",
                           {"traceback": "".join(traceback.format_exception(exc))[-4000:]})
    damage = arena.gap_damage()
    if damage is not None:
        return Finding("unsafe", "oob-write", f"wrote outside every tensor: {damage} ({plan.dims} {plan.dtype})",
                       {"address_error": damage})
    read = getattr(state, "read_violation", None)
    if read is not None:
        return Finding("unsafe", "poisoned-read", f"{read} (last programs of the grid, {plan.dims} {plan.dtype}; "
                       "the load was masked off)", {"address_error": str(read)})
    outputs = _as_tuple(raw)
    refs = _as_tuple(contract.oracle(**{n: v[-fill:].to(torch.float64) for n, v in inputs.items()},
                                     **plan.scalars))
    for i, (out, ref) in enumerate(zip(outputs, refs)):
        if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != rows:
            return Finding("wrong", "bad-shape", f"output {i} has shape {getattr(out, 'shape', None)}, expected "
                           f"{rows} rows")
        tail = out[-fill:]
        holes = unwritten_elements(tail)
        # Emulated, only the last programs ran: a suffix of the rows is written.
        written = _written_suffix(holes) if emulate else fill
        if written == 0 or (not emulate and holes.any()):
            first = tuple(int(v) for v in torch.nonzero(holes)[0]) if holes.any() else ()
            return Finding("unsafe", "unwritten", f"output {i}: the last rows of a {tuple(out.shape)} output "
                           f"were never written (first hole at tail row {first}; an offset that wrapped "
                           "around 2^31 writes elsewhere)", {"unwritten": int(holes.sum())})
        got, want = tail[-written:], ref.to(torch.float64)[-written:]
        finite = want[torch.isfinite(want)]
        scale = float(finite.abs().max()) if finite.numel() else 1.0
        reduction = plan.dims.get(contract.reduces, 1) if contract.reduces else 1
        bound = default_bound(out_dtype=str(out.dtype).replace("torch.", ""), accumulate=contract.accumulate,
                              reduction=reduction, scale=scale)
        mismatch = compare(got, want, bound, name=f"output {i} (last {written} rows)")
        if mismatch is not None:
            return Finding("wrong", mismatch.kind, mismatch.message, mismatch.to_dict())
    return "honoured"


_itemsizes = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
              "int32": 4, "int64": 8, "bool": 1}


def _written_suffix(holes: Any) -> int:
    """How many trailing rows of ``holes`` (True = unwritten) are fully written."""
    per_row = holes.reshape(holes.shape[0], -1).any(dim=1) if holes.dim() else holes.reshape(1)
    bad = per_row.nonzero()
    return int(per_row.shape[0] - 1 - int(bad[-1])) if bad.numel() else int(per_row.shape[0])


def run_large_index_cell(subject: Any, *, backend: Any):
    """The ``shape:large-index`` cell of ``subject`` as a :class:`CellResult`."""
    import time

    from triton_conformance.model.outcomes import CellResult, Counterexample, Finding

    start = time.perf_counter()
    base = {"subject": subject.name, "family": subject.family, "cell": "shape:large-index",
            "expected_failure": subject.xfail}
    plan = large_index_plan(subject.contract)
    if isinstance(plan, str):
        return CellResult(outcome="skipped", message=plan, **base)
    if plan.dtype in backend.untestable:
        return CellResult(outcome="skipped", message=backend.untestable[plan.dtype], **base)
    try:
        verdict = run_large_index_example(subject, device=backend.device)
    except NotImplementedError as exc:  # an interpreter without the hooks the emulation needs
        return CellResult(outcome="skipped", message=str(exc), **base)
    if backend.device != "cpu" and not isinstance(verdict, Finding):
        import torch

        torch.cuda.empty_cache()  # give the 4 GiB tensors back to the other cells of this worker
    elapsed = time.perf_counter() - start
    where = "real tensors" if backend.device != "cpu" else "emulated: lazy tensors, last programs of the grid"
    if isinstance(verdict, Finding):
        example = {"dims": plan.dims, "dtypes": {n: plan.dtype for n in subject.contract.inputs},
                   "scalars": plan.scalars, "compared_rows": plan.fill_rows}
        return CellResult(
            outcome=verdict.outcome, finding=verdict.kind, message=f"{verdict.message} [{where}]",
            details=verdict.details, counterexample=Counterexample(example), reproducer=_reproducer(subject, backend),
            examples=1, duration_s=elapsed, **base)
    elements = max(plan.elements(subject.contract, n) for n in subject.contract.inputs)
    return CellResult(outcome="honoured", message=f"{plan.dims} {plan.dtype} ({elements} elements, "
                      f"{where}): the last rows match the oracle", examples=1, duration_s=elapsed, **base)


def _reproducer(subject: Any, backend: Any) -> str:
    device = "cpu" if backend.device == "cpu" else backend.device
    prelude = 'import os\nos.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported\n' \
        if device == "cpu" else ""
    return (f"{prelude}from triton_conformance.conformance.large_index import replay_large_index\n\n"
            f"print(replay_large_index({subject.module!r}, {subject.name!r}, device={device!r}))")


def replay_large_index(module: str, name: str, device: str = "cpu"):
    """Import ``module``, and run the large-index example of its subject ``name`` on ``device``."""
    import importlib

    from triton_conformance.model.subject import get_subject

    importlib.import_module(module)
    return run_large_index_example(get_subject(name), device=device)
