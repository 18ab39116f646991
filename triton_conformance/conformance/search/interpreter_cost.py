"""Bound what an example may cost on the Triton interpreter, in counted work, never in seconds.

The interpreter runs a launch's programs one after another
(``GridExecutor.__call__``: ``interpreter_builder.set_grid_idx(x, y, z)``,
then the kernel's body, for every program id), so an example costs about
programs x work per program, not elements: ~4,000 one-element rows of a row
kernel are 4,000 interpreted programs, minutes a cell (examples/FINDINGS.md, S2).

**The unit.**  Every interpreted operation returns a ``TensorHandle`` (a
load, an add, a constant, each step of a custom reduction); each costs
:data:`HANDLE_COST`, plus one per ``2**ELEMENT_SHIFT`` elements it holds;
a ``tl.dot`` one more per ``2**DOT_SHIFT`` multiply-adds (M x N x K of its
blocks: its result holds only M x N), charged before it runs.
Each program costs :data:`PROGRAM_COST` more, each call of a ``@triton.jit``
function inside a kernel (``tl.max``, ``tl.sum``, a helper: the interpreter
re-patches ``triton.language`` for each) :data:`CALL_COST`, each launch
:data:`LAUNCH_COST`.  Counts, not times: the same kernel on the same inputs
costs the same on every machine (with the pinned triton).  A unit is about
1.5 us on this project's loaded 2-core CPU; docs/benchmarks.md has the figures
(with numpy's BLAS on one thread, as :mod:`.blas_threads` keeps it in a cell:
on two, a block's ``np.matmul`` costs several times as much).

**The estimate.**  At each program boundary of a launch (``set_grid_idx``)
the launch's cost is projected as what it spent so far plus the programs
still to run x the mean work of the programs that ran (after its first
program, that first program's work: learned from the launch itself, before
the rest of the grid runs).  A launcher call whose spend so far plus that
projection passes its part of the example's allowance (the example battery
tells the cell's :class:`~.allowance.Allowance` how many calls an example
makes: two for a deterministic contract) is stopped there: :class:`OverCost`,
an :class:`~triton_conformance.conformance.discards.ExampleDiscarded`, which the one search and its shrinker
discard and count (``over-cost``) instead of running it.  A later program that loops for
long is stopped once its spend passes the allowance.

**The cut.**  A launch's first program may run past its call's allowance (it is
what the projection learns from, and a long program the pool can pay for is
still judged), but never past the cell's pool: one whose spend would pass what
the pool holds is **cut** there, halfway (:class:`ProgramCut`, discarded as
``cut``), after more than an example's share inside that one program (less is
an ordinary ``over-cost`` stop of a pool nearly spent).  So a cell's interpreted
work never passes its pool, and a hang is not a silent discard: the cut names
the kernel, the program and the operations it ran, the cell's result says so
(``details["interpreter_cost"]["cut"]``), and a cell that judged no example
because a program was cut is a ``timeout`` (:func:`cut_result`), as the wall
clock would have made it, only sooner and the same on every machine.

**The allowance.**  Each cell has a pool (``Profile.interpreter_cost``); an
example may spend its share (``Profile.interpreter_example_cost``), or, while
the pool holds more than the shares of the search's examples still to come
(a reserve: share x the examples not yet run), everything above that
reserve; never more than the pool still holds.  So a wide outer dim is still
run, once or twice a cell (more easily as the search goes on), and not at
every example; a cell's interpreted work never passes its pool, and cheap
examples (under their share) are never stopped while the pool lasts.  Every
figure is a count, and a derandomized profile draws the same examples in the
same order, so a ``ci`` run makes the same decisions on any machine.

The hooks are class attributes of triton's ``InterpreterBuilder`` and
``TensorHandle``, so the instance patches of :mod:`.tail_grid` stack on top
of them.  A triton whose interpreter lacks one of them is not metered.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from triton_conformance.conformance.discards import CUT, OVER_COST, ExampleDiscarded
from triton_conformance.conformance.results import cell_result

__all__ = ["HANDLE_COST", "ELEMENT_SHIFT", "DOT_SHIFT", "PROGRAM_COST", "CALL_COST", "LAUNCH_COST", "OverCost",
           "ProgramCut", "CostMeter", "metering_cost", "cost_details", "cut_result", "active_meter", "CUT_FINDING"]

# The weights, fitted to the interpreter's times on a 2-core CPU (docs/benchmarks.md): an operation's
# Python overhead dwarfs numpy's per-element work until its block holds about 16k elements.
HANDLE_COST = 16  # units per interpreted operation (one TensorHandle made)
ELEMENT_SHIFT = 10  # and one unit per 2**ELEMENT_SHIFT elements it holds
DOT_SHIFT = 14  # a tl.dot: one more per 2**DOT_SHIFT multiply-adds (fp16 blocks: ~40 ns per 1k, one thread)
PROGRAM_COST = 128  # units per program, besides its operations
CALL_COST = 256  # units per call of a @triton.jit function (tl.max, tl.sum, a helper): triton.language re-patched
LAUNCH_COST = 256  # units per launch (its arguments' copies; its patching counts as a call)


class OverCost(ExampleDiscarded):
    """An example would pass its allowance of interpreted work: discarded, not failed."""

    def __init__(self, subject: str, estimate: int, allowance: int, where: str):
        super().__init__(OVER_COST, f"{subject}: this example's interpreted work would be about {estimate:,} units, "
                         f"over its allowance of {allowance:,} ({where})")
        self.subject, self.allowance, self.where = subject, allowance, where
        self.estimate = estimate


class ProgramCut(ExampleDiscarded):
    """One program ran the cell's pool out halfway, after more than an example's share: cut there, discarded."""

    def __init__(self, subject: str, where: str):
        super().__init__(CUT, f"{subject}: {where}")
        self.subject, self.where = subject, where


CUT_FINDING = "interpreter-cut"  # the finding of a cell that judged nothing because a program was cut


@dataclass
class CostMeter:
    """One cell's interpreted work: its pool, and the current example's allowance and launch."""

    pool: int
    share: int
    examples: int  # the search's: the shares of those not yet run are held in reserve
    subject: str = ""
    spent: int = 0  # units the cell has spent
    limit: int = 0  # the spend at which the current call (or example) is stopped
    allowance: int = 0
    calls: int = 1  # launcher calls the current example makes (run_example knows): each gets its part
    example_start: int = 0
    stopped: bool = False
    over: int = 0  # examples stopped
    ran: int = 0  # examples that spent interpreted work and were not stopped
    largest: int = 0  # the most units an example spent
    widest: int = 0  # the most programs of a launch that ran to its end
    programs: int = 0  # the current launch's grid
    done: int = 0  # its programs started so far
    launch_start: int = 0
    kernel: str = ""
    launches: int = 0  # Triton launches the cell made (none: the launcher took a non-Triton path)
    ops: int = 0  # interpreted operations the cell ran (TensorHandles made)
    pid: tuple = ()  # the current program's id
    program_start: int = 0  # the spend, and the operations, when the current program started
    program_ops: int = 0
    cuts: int = 0  # programs cut halfway (examples discarded as ``cut``)
    first_cut: str = ""  # where the first was cut

    def __post_init__(self) -> None:
        self.start_example()

    def start_example(self, calls: int = 1, *, before_inputs: bool = False) -> None:
        """A new example, which will call the launcher ``calls`` times: its allowance from what the pool
        holds.  ``before_inputs``: an example of a spent pool is stopped at once, before it is built."""
        self._close_example()
        self.example_start, self.stopped, self.calls = self.spent, False, max(1, calls)
        remaining, reserve = self.pool - self.spent, self.share * max(0, self.examples - self.ran)
        self.allowance = max(0, min(remaining, max(self.share, remaining - reserve)))
        self.limit = self.spent + self.allowance
        if before_inputs and self.allowance == 0:
            self.stop(0, f"the cell's pool of {self.pool:,} units is spent")

    def start_call(self) -> None:
        """One of the example's launcher calls: each may spend its part of the example's allowance (so
        a call is stopped before, not after, the calls it shares the example with are paid; the
        repeats of a call that found something, past the calls expected, get as much again)."""
        self._close_launch()
        if not self.stopped:  # never past the pool: an earlier call's first program may have run long
            self.limit = min(self.pool, self.spent + self.allowance // self.calls)

    def _close_example(self) -> None:
        self._close_launch()
        spent = self.spent - self.example_start
        self.largest = max(self.largest, spent)
        self.ran += spent > 0 and not self.stopped
        self.example_start = self.spent

    def _close_launch(self) -> None:
        if self.programs and self.done == self.programs:
            self.widest = max(self.widest, self.programs)
        self.programs = self.done = 0

    def _halt(self) -> None:
        self.over += 1
        self.stopped, self.limit = True, -1  # until the next example (a launcher that swallowed it launches again)

    def stop(self, estimate: int, where: str = "") -> None:
        self._halt()
        share = f"; one of {self.calls} calls" if self.calls > 1 else ""
        raise OverCost(self.subject, estimate, self.allowance // self.calls, where or f"{self.kernel} over a grid "
                       f"of {self.programs:,} programs, after {self.done:,} of them{share}")

    def charge(self, units: int) -> None:
        self.spent += units
        if self.spent > self.limit:
            if self.done > 1:
                self.stop(self.spent - self.example_start)
            elif self.spent > self.pool:  # a first program may pass its call's part, never the cell's pool
                self.cut()

    def operation(self, elements: int) -> None:
        self.ops += 1
        self.charge(HANDLE_COST + (elements >> ELEMENT_SHIFT))

    def dot(self, multiply_adds: int) -> None:
        """A ``tl.dot`` about to run: its work grows with M x N x K, its result's elements only with M x N."""
        self.charge(multiply_adds >> DOT_SHIFT)

    def cut(self) -> None:
        """Stop the current program halfway: the pool ran out inside it.  After more than an example's share
        in this one program, a cut (:class:`ProgramCut`, naming where); after less, the pool was nearly
        spent when it started: an ordinary over-cost stop."""
        units = self.spent - self.program_start
        if units <= self.share:
            self.stop(self.spent - self.example_start, f"{self.kernel}: the cell's pool of {self.pool:,} units ran "
                      f"out in program {self.pid} of a grid of {self.programs:,}")
        where = (f"cut after {self.ops - self.program_ops:,} operations ({units:,} units) in program {self.pid} of "
                 f"{self.kernel} (a grid of {self.programs:,} programs): the cell's pool of {self.pool:,} units ran "
                 f"out inside it")
        self._halt()
        self.cuts += 1
        self.first_cut = self.first_cut or where
        raise ProgramCut(self.subject, where)

    def launch(self, programs: int, kernel: str) -> None:
        self._close_launch()
        self.programs, self.done, self.kernel = programs, 0, kernel
        self.launches += 1
        self.charge(LAUNCH_COST)
        self.launch_start = self.spent

    def program(self, pid: tuple = ()) -> None:
        done = self.done
        if done:
            so_far = self.spent - self.launch_start
            projected = self.spent + (self.programs - done) * -(-so_far // done)  # the mean, rounded up
            if projected > self.limit:
                self.stop(projected - self.example_start)
        self.done = done + 1
        self.pid, self.program_start, self.program_ops = pid, self.spent, self.ops
        self.spent += PROGRAM_COST

    def summary(self) -> dict[str, int]:
        self._close_example()
        figures = {"spent": self.spent, "pool": self.pool, "share": self.share, "stopped": self.over,
                   "largest_example": self.largest, "widest_launch": self.widest}
        if self.cuts:
            figures.update(cut=self.cuts, first_cut=self.first_cut)
        return figures


_ACTIVE: list[CostMeter] = []  # the innermost metered cell last


def active_meter() -> CostMeter | None:
    return _ACTIVE[-1] if _ACTIVE else None


def _hook_points() -> tuple[Any, Any, Any] | None:
    """The interpreter module, its builder and its handle class, or None where they cannot be metered."""
    try:  # imported here, not at the top: a triton whose interpreter does not import is simply not metered
        from triton.runtime import interpreter
    except Exception:  # noqa: BLE001 - no triton, or one whose interpreter does not import here
        return None
    builder, handle = getattr(interpreter, "InterpreterBuilder", None), getattr(interpreter, "TensorHandle", None)
    if builder is None or handle is None:
        return None
    if not all(callable(getattr(builder, n, None)) for n in ("set_grid_dim", "set_grid_idx")):
        return None
    if not callable(getattr(handle, "__post_init__", None)):
        return None
    return interpreter, builder, handle


def _kernel_name() -> str:
    frame = sys._getframe(2)  # the launch that called set_grid_dim (GridExecutor.__call__, or tail_grid's shim)
    for _ in range(3):
        if frame is None:
            break
        fn = getattr(frame.f_locals.get("self"), "fn", None)
        if fn is not None:
            return getattr(fn, "__name__", "a kernel")
        frame = frame.f_back
    return "a kernel"


_PATCHED: dict[str, Any] = {}


def _install(interpreter: Any, builder: Any, handle: Any) -> None:
    set_dim, set_idx, post_init = builder.set_grid_dim, builder.set_grid_idx, handle.__post_init__
    patch_lang, create_dot = getattr(interpreter, "_patch_lang", None), getattr(builder, "create_dot", None)

    def metered_set_grid_dim(self: Any, nx: Any, ny: Any, nz: Any) -> Any:
        if _ACTIVE:
            _ACTIVE[-1].launch(int(nx) * int(ny) * int(nz), _kernel_name())
        return set_dim(self, nx, ny, nz)

    def metered_set_grid_idx(self: Any, x: Any, y: Any, z: Any) -> Any:
        if _ACTIVE:
            _ACTIVE[-1].program((x, y, z))
        return set_idx(self, x, y, z)

    def metered_post_init(self: Any) -> None:
        post_init(self)
        if _ACTIVE:
            _ACTIVE[-1].operation(getattr(self.data, "size", 1))

    def metered_patch_lang(fn: Any) -> Any:
        if _ACTIVE:
            _ACTIVE[-1].charge(CALL_COST)
        return patch_lang(fn)

    def metered_create_dot(self: Any, a: Any, b: Any, *args: Any) -> Any:
        if _ACTIVE:  # (..., M, K) @ (..., K, N): M x K x N multiply-adds, batched dims included
            _ACTIVE[-1].dot(getattr(a.data, "size", 0) * (b.data.shape[-1] if getattr(b.data, "ndim", 0) else 1))
        return create_dot(self, a, b, *args)

    _PATCHED.update(set_grid_dim=set_dim, set_grid_idx=set_idx, __post_init__=post_init, _patch_lang=patch_lang,
                    create_dot=create_dot)
    builder.set_grid_dim, builder.set_grid_idx = metered_set_grid_dim, metered_set_grid_idx
    handle.__post_init__ = metered_post_init
    if callable(patch_lang):  # optional: without it, calls are not counted
        interpreter._patch_lang = metered_patch_lang
    if callable(create_dot):  # optional too: without it, a dot costs its result's elements only
        builder.create_dot = metered_create_dot


def _uninstall(interpreter: Any, builder: Any, handle: Any) -> None:
    builder.set_grid_dim, builder.set_grid_idx = _PATCHED.pop("set_grid_dim"), _PATCHED.pop("set_grid_idx")
    handle.__post_init__ = _PATCHED.pop("__post_init__")
    patch_lang, create_dot = _PATCHED.pop("_patch_lang"), _PATCHED.pop("create_dot")
    if callable(patch_lang):
        interpreter._patch_lang = patch_lang
    if callable(create_dot):
        builder.create_dot = create_dot


@contextlib.contextmanager
def metering_cost(pool: int | None, share: int | None, examples: int, *, subject: str = "",
                  enabled: bool = True) -> Iterator[CostMeter | None]:
    """Meter one cell's interpreted work (see the module's docstring); yields the meter, or None when not
    metered (``enabled`` False, no ``pool``, or a triton whose interpreter lacks the hook points).

    - ``pool``: units the cell may spend; ``share``: an example's own (default: the pool over twice
      ``examples``); ``examples``: the search's examples, whose shares are held in reserve until they ran.
    """
    points = _hook_points() if enabled and pool else None
    if points is None:
        yield None
        return
    share = share if share else max(1, pool // (2 * max(1, examples)))
    meter = CostMeter(pool=pool, share=share, examples=max(1, examples), subject=subject)
    outermost = not _ACTIVE
    if outermost:
        _install(*points)
    _ACTIVE.append(meter)
    try:
        yield meter
    finally:
        _ACTIVE.remove(meter)
        if outermost:
            _uninstall(*points)


def cost_details(result: Any, meter: CostMeter | None) -> Any:
    """``result`` with the meter's figures in ``details["interpreter_cost"]`` when it stopped an example."""
    if meter is None or not meter.over:
        return result
    return replace(result, details={**(result.details or {}), "interpreter_cost": meter.summary()})


def cut_result(subject: Any, cell: str, meter: CostMeter, details: dict | None = None) -> Any:
    """The result of a cell that judged no example because a program was cut: a ``timeout``, saying where
    (a program that never ends and one too long for the interpreter look the same to a count)."""
    return cell_result(subject, cell, "timeout", f"no example judged: {meter.first_cut} ({meter.cuts} cut; a "
                       "program that never ends, or one too long for the interpreter)", finding=CUT_FINDING,
                       details=dict(details or {}))
