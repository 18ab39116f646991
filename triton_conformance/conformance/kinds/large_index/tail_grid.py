"""Run the end of an interpreted Triton launch, checking every address.

Used by the ``shape:large-index`` cell (:mod:`.example`) to emulate a launch
over more than 2^31 elements on the CPU.  Triton's interpreter runs a
launch's programs one after another (``GridExecutor.__call__`` sets each
program id with ``interpreter_builder.set_grid_idx``).  Here a launch runs
its programs *backwards* from the last one of the grid, in the order that
makes the grid's largest axis the slowest, so every program of the smaller
axes runs for the last indices of the largest (a ``(rows, tiles)`` grid runs
whole rows, a ``(tiles, rows)`` grid too).  The launch stops before its next program:

- when every element past ``cover_from`` (2^31, where an int32 offset wraps)
  of every huge tensor of the launch has been loaded or stored: the programs
  that own the end of the tensors have run (``stopped="covered"``);
- when its window has spent ``budget`` units of interpreted work, counted by
  :mod:`...search.interpreter_cost` (the same on every machine) (``"budget"``);
- after a load outside the launch's tensors (``"address"``); a store there
  stops it at once.

``tl.program_id`` and ``tl.num_programs`` see the real grid, so the programs
compute the offsets they would in the full launch.

A *persistent* kernel launches a fixed grid (SMs x occupancy) and loops
``for row in range(pid, M, num_programs)``: each program would loop over
about M / programs rows.  With ``long_loop``, a ``range`` (or ``tl.range``)
of more than that many iterations runs only its last
``ceil(loop_iterations / programs of the grid)`` (at least one), the ones
that reach the end of the tensors: the union over the grid's programs
covers its last rows, and the work stays about ``loop_iterations`` loop
bodies whatever the grid.  A loop that carries a sum over the skipped
iterations computes a partial answer; the cell compares only rows.

Each launch leaves a :class:`LaunchWindow`: how many of its programs ran,
why it stopped, the loops it trimmed, and how far apart one program's
accesses to one tensor lie (``reach``: a block or a row where each program
owns one, most of the tensor for a persistent one).  From them the cell
decides what it may blame on the kernel (:mod:`.example`).
"""

from __future__ import annotations

import builtins
import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from triton_conformance.conformance.search.interpreter_cost import metering_cost

__all__ = ["LONG_LOOP", "LOOP_ITERATIONS", "WINDOW_COST", "LaunchWindow", "OutOfBoundsAccess", "tail_programs"]

LONG_LOOP = 4096  # a loop of more iterations walks the huge dim (every other dim is small in the example)
LOOP_ITERATIONS = 256  # such loops keep this many iterations in all, shared among the grid's programs
WINDOW_COST = 1_000_000  # units of interpreted work a launch may spend (1.5 to 3 s on a loaded 2-core CPU)
WATCHED = 1 << 20  # the most elements past cover_from watched in one tensor (its last ones)
_UNLIMITED = 1 << 62  # the meter's pool: it measures, the window stops itself


class OutOfBoundsAccess(Exception):
    """A load or store whose address lies outside every tensor of the launch."""

    def __init__(self, kind: str, address: int, ranges: list[tuple[int, int, str]]):
        lo, hi, name = min(ranges, key=lambda r: min(abs(address - r[0]), abs(address - r[1])))
        where = (f"{lo - address} bytes before {name}" if address < lo else f"{address - hi} bytes past the end "
                 f"of {name}") + " (the nearest tensor of the launch)"
        wrapped = " (over 1 GiB away: an int32 offset that wrapped around?)" \
            if min(abs(address - lo), abs(address - hi)) > (1 << 30) else ""
        super().__init__(f"{kind} at address {address:#x}, {where}{wrapped}")
        self.kind = kind


class _WindowEnd(Exception):
    """The window of a launch is over: raised at a program boundary, caught where the launch began."""


@dataclass
class LaunchWindow:
    """The programs of one launch that ran: ``ran`` of the grid's, counted from its last."""

    kernel: str
    grid: tuple[int, int, int]
    order: tuple[int, ...]  # the grid's axes, slowest first: the largest one first
    ran: int = 0
    stopped: str = ""  # "covered", "budget", "address", or "" (it ran to the grid's first program)
    trimmed_loops: int = 0
    kept_iterations: int = 0  # what each trimmed loop kept
    reach: int = 0  # the most elements between one program's first and last access of one tensor
    start_cost: int = 0
    cover_from: int = 1 << 31
    long_loop: int = LONG_LOOP

    @property
    def programs(self) -> int:
        return math.prod(self.grid)

    @property
    def complete(self) -> bool:
        """Whether this launch did all it would have done in full: every program, every iteration."""
        return self.ran == self.programs and not self.trimmed_loops

    def program_id(self, i: int) -> tuple[int, int, int]:
        """The id of the ``i``-th program run: counted back from the grid's last, the largest axis slowest."""
        rest, ids = self.programs - 1 - i, [0, 0, 0]
        for axis in reversed(self.order):
            rest, ids[axis] = divmod(rest, self.grid[axis])
        return ids[0], ids[1], ids[2]

    def describe(self) -> str:
        mark = "2^31" if self.cover_from == 1 << 31 else f"{self.cover_from:,}"
        why = {"covered": f"they reached every element past {mark}",
               "budget": f"its cost allowance was spent before they reached every element past {mark}",
               "address": "an address outside the tensors"}.get(self.stopped, "")
        text = f"{self.kernel}: {'all' if self.ran == self.programs else f'the last {self.ran:,} of'} " \
               f"{self.programs:,} programs{f' (stopped: {why})' if why else ''}"
        if self.trimmed_loops:
            text += f", {self.trimmed_loops} loops of more than {self.long_loop} iterations ran their last " \
                    f"{self.kept_iterations}"
        return text


@dataclass
class _Tensor:
    """One tensor argument of the launch: its bytes, and what the current program touched."""

    name: str
    lo: int
    hi: int
    itemsize: int
    watch_from: int  # the first byte of the watched end (hi: none watched)
    seen: Any = None  # numpy bool per watched element: loaded or stored by a program that ran
    first: int = -1
    last: int = -1


@dataclass
class _Emulation:
    """State of one :func:`tail_programs` context: the current launch, its tensors, what every launch ran."""

    budget: int
    long_loop: int
    loop_iterations: int
    cover_from: int
    meter: Any = None
    windows: list[LaunchWindow] = field(default_factory=list)
    tensors: list[_Tensor] = field(default_factory=list)
    host: tuple = ()  # the launch's arguments, device and host copies, to restore after a window ends
    highest: dict[int, int] = field(default_factory=dict)  # a huge tensor's first byte -> the last byte touched
    violation: OutOfBoundsAccess | None = None  # the first store outside (it stopped the launch)
    read_violation: OutOfBoundsAccess | None = None  # the first load outside (masked off; its launch stopped)
    active: bool = True

    @property
    def window(self) -> LaunchWindow | None:
        return self.windows[-1] if self.windows else None

    @property
    def complete(self) -> bool:
        return all(w.complete for w in self.windows)

    @property
    def trimmed_loops(self) -> int:
        return sum(w.trimmed_loops for w in self.windows)

    @property
    def reach(self) -> int:
        return max((w.reach for w in self.windows), default=0)

    def describe(self, most: int = 3) -> str:
        shown = "; ".join(w.describe() for w in self.windows[:most])
        return shown + (f"; and {len(self.windows) - most} launches more" if len(self.windows) > most else "")

    def reached(self, tensor: Any) -> int | None:
        """The highest element of a huge ``tensor`` that a program which ran touched, over every launch (or None)."""
        last = self.highest.get(tensor.data_ptr())
        return None if last is None else (last - tensor.data_ptr()) // tensor.element_size()

    def range(self, start: Any, stop: Any = None, step: Any = None, **_: Any) -> range:
        """``range`` / ``tl.range`` inside the kernel: a long loop keeps only its last iterations."""
        r = builtins.range(start) if stop is None else builtins.range(start, stop, 1 if step is None else step)
        window = self.window
        if self.active and window is not None and self.long_loop and len(r) > self.long_loop:
            window.kept_iterations = max(1, -(-self.loop_iterations // max(1, window.programs)))
            window.trimmed_loops += 1
            return r[-window.kept_iterations:]
        return r

    def launch(self, kernel: str, grid: tuple[int, ...]) -> int:
        """A launch begins: its window, and the number of programs the interpreter is to loop over."""
        g = tuple(int(n) for n in grid) + (1,) * (3 - len(grid))
        order = tuple(sorted(range(3), key=lambda axis: -g[axis]))  # stable: ties keep x before y before z
        self.windows.append(LaunchWindow(kernel, g, order, start_cost=self.meter.spent, cover_from=self.cover_from,
                                         long_loop=self.long_loop))
        return math.prod(g)

    def next_program(self, i: int) -> tuple[int, int, int]:
        """The real id of the ``i``-th program, or :class:`_WindowEnd` when the window is over."""
        window = self.window
        self._close_program(window)
        if window.ran:
            watched = [t.seen for t in self.tensors if t.seen is not None]
            if self.read_violation is not None:
                window.stopped = "address"
            elif watched and all(bool(s.all()) for s in watched):
                window.stopped = "covered"
            elif self.meter.spent - window.start_cost >= self.budget:
                window.stopped = "budget"
            if window.stopped:
                raise _WindowEnd(window.stopped)
        window.ran += 1
        return window.program_id(i)

    def end_launch(self) -> None:
        if self.window is not None:
            self._close_program(self.window)

    def _close_program(self, window: LaunchWindow) -> None:
        for t in self.tensors:
            if t.last >= 0:
                window.reach = max(window.reach, (t.last - t.first) // t.itemsize)
            t.first = t.last = -1

    def arguments(self, named: list[tuple[str, Any]]) -> None:
        """The launch's tensor arguments: their byte ranges, and the ends to watch."""
        self.tensors = []
        for name, arg in named:
            if hasattr(arg, "data_ptr") and hasattr(arg, "stride") and arg.numel():
                # The tensor's own extent, not its storage's: views of one buffer stay apart.
                size = arg.element_size()
                lo = arg.data_ptr() + sum((n - 1) * st for n, st in zip(arg.shape, arg.stride()) if st < 0) * size
                span = sum((n - 1) * abs(st) for n, st in zip(arg.shape, arg.stride())) + 1
                watched = min(WATCHED, span - self.cover_from) if span > self.cover_from else 0
                self.tensors.append(_Tensor(name, lo, lo + span * size, size, lo + (span - watched) * size,
                                            np.zeros(watched, dtype=bool) if watched else None))

    def check(self, kind: str, ptrs: Any, mask: Any, itemsize: int):
        """Boolean array: which live (unmasked) addresses lie outside every tensor of the launch; records what
        the current program touched."""
        addresses = np.asarray(ptrs).astype(np.uint64)
        live = np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape) if mask is not None else \
            np.ones(addresses.shape, dtype=bool)
        if not self.tensors:
            return np.zeros(addresses.shape, dtype=bool)
        inside = np.zeros(addresses.shape, dtype=bool)
        for t in self.tensors:
            here = (addresses >= t.lo) & (addresses + itemsize <= t.hi)
            inside |= here
            touched = addresses[here & live]
            if touched.size:
                low, high = int(touched.min()), int(touched.max())
                t.first = low if t.first < 0 else min(t.first, low)
                t.last = max(t.last, high)
                if t.seen is not None:  # a huge tensor: how far into it the emulation got
                    self.highest[t.lo] = max(self.highest.get(t.lo, high), high)
                    if high >= t.watch_from:
                        ends = touched[touched >= t.watch_from]
                        t.seen[(ends - np.uint64(t.watch_from)) // np.uint64(t.itemsize)] = True
        bad = live & ~inside
        if bad.any():
            found = OutOfBoundsAccess(kind, int(addresses[bad].reshape(-1)[0]),
                                      [(t.lo, t.hi, t.name) for t in self.tensors])
            if kind == "store":
                self.violation = self.violation or found
            else:
                self.read_violation = self.read_violation or found
        return bad


def _window_ended(exc: BaseException) -> bool:
    seen = exc
    while seen is not None:
        if isinstance(seen, _WindowEnd):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def tail_programs(budget: int = WINDOW_COST, *, long_loop: int = LONG_LOOP, loop_iterations: int = LOOP_ITERATIONS,
                  cover_from: int = 1 << 31) -> Iterator[_Emulation]:
    """While active, interpreted launches run their programs backwards from the grid's last, until the
    elements past ``cover_from`` of their huge tensors are all reached, or ``budget`` units are spent
    (loops longer than ``long_loop``, if set, keep their last iterations: see the module's docstring).

    Every load and store is checked against the byte ranges of the launch's
    tensor arguments.  A load outside them is masked off (it reads ``other``
    or zero) and recorded as ``state.read_violation``; a store outside them
    raises :class:`OutOfBoundsAccess`, recorded as ``state.violation`` (the
    interpreter re-raises errors as its own).  Neither touches the address.
    ``state.windows`` holds a :class:`LaunchWindow` per launch.
    """
    # The interpreter's internals: imported only when a launch is emulated (TRITON_INTERPRET is set by then).
    import triton.language as tl
    from triton.runtime import interpreter

    executor = getattr(interpreter, "GridExecutor", None)
    builder = getattr(interpreter, "interpreter_builder", None)
    needed = [(executor, "__init__"), (executor, "_init_args_hst"), (executor, "_restore_args_dev"),
              (builder, "set_grid_idx"), (builder, "set_grid_dim"), (builder, "create_masked_load"),
              (builder, "create_masked_store")]
    missing = [name for owner, name in needed if owner is None or not hasattr(owner, name)]
    if missing:
        raise NotImplementedError(f"tail_programs: this Triton's interpreter lacks {missing}")
    with metering_cost(_UNLIMITED, _UNLIMITED, 1, subject="the large-index emulation") as meter:
        if meter is None:
            raise NotImplementedError("tail_programs: this Triton's interpreter cannot be metered")
        state = _Emulation(budget=budget, long_loop=long_loop, loop_iterations=loop_iterations,
                           cover_from=cover_from, meter=meter)
        with _patched(state, executor, builder, interpreter, tl):
            yield state


@contextlib.contextmanager
def _patched(state: _Emulation, executor: Any, builder: Any, interpreter: Any, tl: Any) -> Iterator[None]:
    original_init, original_args = executor.__init__, executor._init_args_hst
    original_call, original_patch = executor.__call__, interpreter._patch_lang
    set_idx, set_dim = builder.set_grid_idx, builder.set_grid_dim
    load, store = builder.create_masked_load, builder.create_masked_store

    def init(self, fn, arg_names, grid, *args, **kwargs):
        original_init(self, fn, arg_names, grid, *args, **kwargs)
        real = self.grid

        def window(call_args):  # the interpreter loops over a line of programs; next_program maps each to its id
            return (state.launch(getattr(fn, "__name__", "a kernel"),
                                 tuple(real(call_args) if callable(real) else real)),)

        self.grid = window

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_args(self, args_dev, kwargs)
        state.host = (args_dev, args_hst, kwargs, kwargs_hst)
        names = list(getattr(self, "arg_names", ()) or ())
        named = [(names[i] if i < len(names) else f"argument {i}", a) for i, a in enumerate(args_hst)]
        state.arguments(named + list(kwargs_hst.items()))
        return args_hst, kwargs_hst

    def masked_load(ptrs, mask, other, cache_policy, is_volatile):
        bad = state.check("load", ptrs.data, mask.data, _itemsize(ptrs))
        if bad.any():  # read nothing there: the elements take `other`, as if masked
            mask = interpreter.TensorHandle(mask.data & ~bad, mask.dtype)
        return load(ptrs, mask, other, cache_policy, is_volatile)

    def masked_store(ptrs, value, mask, cache_policy):
        if state.check("store", ptrs.data, mask.data, _itemsize(ptrs)).any():
            raise state.violation
        return store(ptrs, value, mask, cache_policy)

    def patch_lang(fn):  # tl.range inside the kernel (the interpreter maps it to range)
        scope = original_patch(fn)
        for value in list(fn.__globals__.values()):
            if value is tl or value is tl.core:
                scope.set_attr(value, "range", state.range)
        return scope

    def call(self, *args, **kwargs):  # the builtin range inside the kernel, and the window's end, for this launch
        names = self.fn.__globals__
        had, old = "range" in names, names.get("range")
        if state.long_loop:
            names["range"] = state.range
        try:
            return original_call(self, *args, **kwargs)
        except Exception as exc:  # only the window's own end is caught
            if not _window_ended(exc):
                if state.violation is not None and not state.window.stopped:
                    state.window.stopped = "address"
                raise
            self._restore_args_dev(*state.host)  # what the launch does after its last program
            return None
        finally:
            state.end_launch()
            if state.long_loop:
                if had:
                    names["range"] = old
                else:
                    names.pop("range", None)

    executor.__init__, executor._init_args_hst, executor.__call__ = init, init_args, call
    if state.long_loop:
        interpreter._patch_lang = patch_lang
    builder.set_grid_dim = lambda nx, ny, nz: set_dim(*state.window.grid)
    builder.set_grid_idx = lambda x, y, z: set_idx(*state.next_program(x))
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    try:
        yield
    finally:
        state.active = False
        executor.__init__, executor._init_args_hst = original_init, original_args
        executor.__call__, interpreter._patch_lang = original_call, original_patch
        for name in ("set_grid_idx", "set_grid_dim", "create_masked_load", "create_masked_store"):
            builder.__dict__.pop(name, None)  # back to the class's methods


def _itemsize(ptrs: Any) -> int:
    try:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    except AttributeError:
        return 1
