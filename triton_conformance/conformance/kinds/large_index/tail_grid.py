"""Run only the last program ids of an interpreted Triton launch, checking every address.

Used by the ``shape:large-index`` cell (:mod:`.large_index`) to emulate a
launch over more than 2^31 elements on the CPU: the programs that own the
end of a huge tensor compute exactly the offsets they would in the full
launch (``tl.program_id`` and ``tl.num_programs`` see the real grid), while
all the others are skipped.  Triton's interpreter iterates over the grid in
``GridExecutor.__call__`` and sets each program id with
``interpreter_builder.set_grid_idx``; this module shrinks the grid the loop
sees to a window at its end and shifts the ids by the window's offset.

A *persistent* kernel launches a fixed grid (one program per SM) and loops
``for row in range(pid, M, num_programs)``: its last programs would loop
over nearly every row.  With ``long_loop``, a ``range`` (or ``tl.range``) of
more than that many iterations runs only its last ``keep_iterations`` (the
ones that reach the end of the tensors, where the filled tails are), and an
axis of at most ``whole_axis`` programs runs whole, so that the programs
sharing the last rows round-robin all run.  A loop that carries a sum over
the skipped iterations computes a partial answer; the large-index cell
compares such outputs only when they are split into rows.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TAIL_PROGRAMS", "LONG_LOOP", "KEEP_ITERATIONS", "WHOLE_AXIS", "OutOfBoundsAccess", "tail_programs"]

TAIL_PROGRAMS = 3  # programs run per grid axis
LONG_LOOP = 4096  # a loop of more iterations walks the huge dim (every other dim is small in the example)
KEEP_ITERATIONS = 8  # the iterations such a loop keeps: its last ones
WHOLE_AXIS = 256  # an axis of at most this many programs runs whole (a persistent kernel's grid)


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


@dataclass
class _Emulation:
    """State of one :func:`tail_programs` context: the current launch's grid and its tensors' byte ranges."""

    keep: int
    real_grid: tuple[int, int, int] = (1, 1, 1)
    offsets: tuple[int, int, int] = (0, 0, 0)
    ranges: list[tuple[int, int, str]] = field(default_factory=list)
    violation: OutOfBoundsAccess | None = None  # the first store outside (it stopped the launch)
    read_violation: OutOfBoundsAccess | None = None  # the first load outside (masked off; the launch went on)
    launches: int = 0
    whole_axis: int = 0
    long_loop: int = 0
    keep_iterations: int = KEEP_ITERATIONS
    trimmed_loops: int = 0  # loops that ran only their last iterations
    active: bool = True

    def range(self, start: Any, stop: Any = None, step: Any = None, **_: Any) -> range:
        """``range`` / ``tl.range`` inside the kernel: a long loop keeps only its last iterations."""
        r = builtins.range(start) if stop is None else builtins.range(start, stop, 1 if step is None else step)
        if self.active and self.long_loop and len(r) > self.long_loop:
            self.trimmed_loops += 1
            return r[-self.keep_iterations:]
        return r

    def outside(self, kind: str, ptrs: Any, mask: Any, itemsize: int):
        """Boolean array: which live (unmasked) addresses lie outside every tensor of the launch."""
        addresses = np.asarray(ptrs).astype(np.uint64)
        live = np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape) if mask is not None else \
            np.ones(addresses.shape, dtype=bool)
        if not self.ranges:
            return np.zeros(addresses.shape, dtype=bool)
        inside = np.zeros(addresses.shape, dtype=bool)
        for lo, hi, _ in self.ranges:
            inside |= (addresses >= lo) & (addresses + itemsize <= hi)
        bad = live & ~inside
        if bad.any():
            found = OutOfBoundsAccess(kind, int(addresses[bad].reshape(-1)[0]), self.ranges)
            if kind == "store":
                self.violation = self.violation or found
            else:
                self.read_violation = self.read_violation or found
        return bad


@contextlib.contextmanager
def tail_programs(keep: int = TAIL_PROGRAMS, *, whole_axis: int = 0, long_loop: int = 0,
                  keep_iterations: int = KEEP_ITERATIONS) -> Iterator[_Emulation]:
    """While active, interpreted launches run only the last ``keep`` program ids along each grid axis
    (all of an axis of at most ``whole_axis`` programs; loops longer than ``long_loop``, if set,
    run only their last ``keep_iterations``: see the module's docstring).

    ``tl.program_id`` and ``tl.num_programs`` still see the real grid, so the
    programs compute the offsets they would in the full launch.  Every load
    and store is checked against the byte ranges of the launch's tensor
    arguments.  A load outside them is masked off (it reads ``other`` or zero)
    and recorded as ``state.read_violation``; a store outside them raises
    :class:`OutOfBoundsAccess`, recorded as ``state.violation`` (the
    interpreter re-raises errors as its own).  Neither touches the address.
    """
    # The interpreter's internals: imported only when a launch is emulated (TRITON_INTERPRET is set by then).
    import triton.language as tl
    from triton.runtime import interpreter

    executor = getattr(interpreter, "GridExecutor", None)
    builder = getattr(interpreter, "interpreter_builder", None)
    needed = [(executor, "__init__"), (executor, "_init_args_hst"), (builder, "set_grid_idx"),
              (builder, "set_grid_dim"), (builder, "create_masked_load"), (builder, "create_masked_store")]
    missing = [name for owner, name in needed if owner is None or not hasattr(owner, name)]
    if missing:
        raise NotImplementedError(f"tail_programs: this Triton's interpreter lacks {missing}")
    state = _Emulation(keep=keep, whole_axis=whole_axis, long_loop=long_loop, keep_iterations=keep_iterations)
    original_init, original_args = executor.__init__, executor._init_args_hst
    original_call, original_patch = executor.__call__, interpreter._patch_lang
    set_idx, set_dim = builder.set_grid_idx, builder.set_grid_dim
    load, store = builder.create_masked_load, builder.create_masked_store

    def init(self, fn, arg_names, grid, *args, **kwargs):
        original_init(self, fn, arg_names, grid, *args, **kwargs)
        real = self.grid

        def window(call_args):
            g = tuple(real(call_args) if callable(real) else real)
            g = g + (1,) * (3 - len(g))
            state.real_grid = g
            ran = tuple(n if n <= whole_axis else min(keep, n) for n in g)
            state.offsets = tuple(n - r for n, r in zip(g, ran))
            state.launches += 1
            return ran

        self.grid = window

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_args(self, args_dev, kwargs)
        state.ranges = []
        names = list(getattr(self, "arg_names", ()) or ())
        named = [(names[i] if i < len(names) else f"argument {i}", a) for i, a in enumerate(args_hst)]
        for name, arg in named + list(kwargs_hst.items()):
            if hasattr(arg, "data_ptr") and hasattr(arg, "stride") and arg.numel():
                # The tensor's own extent, not its storage's: views of one buffer stay apart.
                lo = arg.data_ptr() + sum((n - 1) * st for n, st in zip(arg.shape, arg.stride()) if st < 0) \
                    * arg.element_size()
                span = sum((n - 1) * abs(st) for n, st in zip(arg.shape, arg.stride())) + 1
                state.ranges.append((lo, lo + span * arg.element_size(), name))
        return args_hst, kwargs_hst

    def masked_load(ptrs, mask, other, cache_policy, is_volatile):
        bad = state.outside("load", ptrs.data, mask.data, _itemsize(ptrs))
        if bad.any():  # read nothing there: the elements take `other`, as if masked
            mask = interpreter.TensorHandle(mask.data & ~bad, mask.dtype)
        return load(ptrs, mask, other, cache_policy, is_volatile)

    def masked_store(ptrs, value, mask, cache_policy):
        if state.outside("store", ptrs.data, mask.data, _itemsize(ptrs)).any():
            raise state.violation
        return store(ptrs, value, mask, cache_policy)

    def patch_lang(fn):  # tl.range inside the kernel (the interpreter maps it to range)
        scope = original_patch(fn)
        for value in list(fn.__globals__.values()):
            if value is tl or value is tl.core:
                scope.set_attr(value, "range", state.range)
        return scope

    def call(self, *args, **kwargs):  # the builtin range inside the kernel, for this launch
        names = self.fn.__globals__
        had, old = "range" in names, names.get("range")
        names["range"] = state.range
        try:
            return original_call(self, *args, **kwargs)
        finally:
            if had:
                names["range"] = old
            else:
                names.pop("range", None)

    executor.__init__, executor._init_args_hst = init, init_args
    if long_loop:
        executor.__call__, interpreter._patch_lang = call, patch_lang
    builder.set_grid_dim = lambda nx, ny, nz: set_dim(*state.real_grid)
    builder.set_grid_idx = lambda x, y, z: set_idx(x + state.offsets[0], y + state.offsets[1], z + state.offsets[2])
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    try:
        yield state
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
