"""Count Triton specializations per subject, and hold each subject to a compile budget.

A new specialization costs 75-250 ms on an H200 (about 850 ms for a
flash-attention kernel) against about 35 us for a cached launch, so the
nightly battery on CUDA is dominated by compiles unless examples reuse them.

Triton calls ``knobs.runtime.jit_cache_hook`` before it compiles (or loads
from the disk cache) a specialization that its in-memory cache lacks, as
``hook(key=..., repr=..., fn=JitFunctionInfo(module, name, jitfn),
compile={...}, is_manual_warmup=..., already_compiled=...)``.  The
:class:`CompileLedger` records the distinct ``(kernel, key)`` pairs charged to
each subject in this process.  Each cell's :class:`CellCompiles` holds the
subject's budget and is the one place it is checked (:meth:`CellCompiles.admit`):
once a subject has used its budget, an example that needs yet another
specialization is discarded (:class:`BudgetExhausted`), not failed.  The
interpreter compiles nothing, so the count is None there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from triton_conformance.conformance.discards import COMPILE_BUDGET, ExampleDiscarded

__all__ = [
    "LEDGER",
    "BudgetExhausted",
    "CellCompiles",
    "CompileLedger",
    "FIRST_GUESS",
    "counting_compiles",
    "make_hook",
]


class BudgetExhausted(ExampleDiscarded):
    """An example needs a new specialization but its subject has used its compile budget (a discard)."""

    def __init__(self, subject: str, budget: int, kernel: str):
        super().__init__(COMPILE_BUDGET, f"{subject}: compile budget of {budget} specializations used; {kernel} "
                         "needs another")
        self.subject = subject
        self.budget = budget
        self.kernel = kernel


# Compiles a class of each kernel family costs until one has been seen: the forward's kernel, or a
# backward's kernels with the forward's (most backwards have one or two kernels of their own).
FIRST_GUESS = {"forward": 1, "backward": 2}


class InProcess:
    """State kept in this process: reads need no refresh and writes no lock.  A subclass that keeps it in a
    file shared by several processes (:mod:`.shared_ledger`) overrides these two."""

    def _sync(self) -> None:
        """Bring the state up to date before a read."""

    def _writing(self, mutates: bool = True) -> contextlib.AbstractContextManager[None]:
        """Hold the state for a change (or, with ``mutates`` False, for a check and a change that may follow)."""
        return contextlib.nullcontext()


@dataclass
class CompileLedger(InProcess):
    """Distinct specializations compiled per subject, what each class cost, and which cells have started.

    In one process (:data:`LEDGER`) a subject's cells run in catalogue order, so the cells still to come
    after one are those after it in the catalogue.  A subject split between workers shares one ledger
    through a file (:mod:`.shared_ledger`): ``planned`` then lists its cells in this run, and the cells to
    come are those of them that have not started.
    """

    seen: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    class_costs: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (subject, kernels) -> compiles
    planned: dict[str, list[str]] = field(default_factory=dict)  # subject -> its cells in this run (when split)
    started: dict[str, set[str]] = field(default_factory=dict)  # subject -> cells that have started

    def used(self, subject: str) -> int:
        self._sync()
        return len(self.seen.get(subject, ()))

    def has(self, subject: str, kernel: str, key: Any) -> bool:
        self._sync()
        return (kernel, repr(key)) in self.seen.get(subject, ())

    def record(self, subject: str, kernel: str, key: Any) -> None:
        """Record a specialization about to be compiled for ``subject`` (its cell admitted it)."""
        with self._writing():
            self.seen.setdefault(subject, set()).add((kernel, repr(key)))

    def class_cost(self, subject: str, kernels: str) -> int:
        """What a new class of ``subject``'s ``kernels`` ("forward", "backward") costs: the mean of
        those seen, rounded up (a tuner compiles every config of a class), else a first guess."""
        self._sync()
        costs = [c for c in self.class_costs.get((subject, kernels), ()) if c]
        return -(-sum(costs) // len(costs)) if costs else FIRST_GUESS.get(kernels, 1)

    def open_class(self, subject: str, kernels: str) -> int:
        """A new class of ``subject``'s ``kernels`` starts: the index its compiles are charged to."""
        with self._writing():
            costs = self.class_costs.setdefault((subject, kernels), [])
            costs.append(0)
            return len(costs) - 1

    def charge_class(self, subject: str, kernels: str, index: int) -> None:
        with self._writing():
            self.class_costs[(subject, kernels)][index] += 1

    def start_cell(self, subject: str, cell: str) -> None:
        with self._writing():
            self.started.setdefault(subject, set()).add(cell)

    def to_come(self, subject: str, cell: str, catalogue: list[str]) -> list[str]:
        """The cells of ``subject`` still to run after ``cell`` starts (``catalogue``: its cells in order)."""
        self._sync()
        if subject not in self.planned:
            return catalogue[catalogue.index(cell) + 1:] if cell in catalogue else []
        started = self.started.get(subject, set())
        return [c for c in self.planned[subject] if c != cell and c not in started]

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Hold the ledger while a specialization is checked against the budget and recorded, so that two
        processes sharing it cannot both buy the last one."""
        return self._writing(mutates=False)


LEDGER = CompileLedger()


class CellCompiles:
    """What one cell compiled, and the fair share of the subject's budget it may still buy.

    The budget buys new classes first: an example that needs a kernel not yet
    compiled starts a new specialization class.  ``later`` lists, for each later
    cell of the subject that applies, its kernels ("forward", "backward") and
    whether it can steer into compiled classes; each later cell is expected to
    need one class, at what its kernels' classes have cost so far
    (:meth:`CompileLedger.class_cost`).

    - A first class may start while the budget holds more than the later cells
      that cannot steer (performance, large-index) will need.
    - A further class only while it holds more than every later cell will need,
      so the first cells cannot starve the last ones.
    - A cell that has no class yet and can run nothing inside the compiled ones
      (a cell that cannot steer; or :meth:`grant_first_class`, after a steering
      search found no compiled class for its draw) starts its first class even
      past the budget: a starved cell would check nothing.  A cell's first class,
      once started, is paid in full; a later one only up to the budget.
    """

    def __init__(self, subject: str = "", budget: int | None = None,
                 later: tuple[tuple[str, bool], ...] = (), *, kernels: str = "forward", steers: bool = True,
                 ledger: CompileLedger | None = None, book: Any = None) -> None:
        self.subject, self.budget, self.later, self.kernels, self.steers = subject, budget, later, kernels, steers
        self.ledger = ledger or LEDGER
        self.book = book  # the subject's ClassBook (None: specializations.BOOK, this process's)
        self.class_index: int | None = None  # the current example's class in the ledger's class costs
        self.count = 0  # new specializations this cell compiled
        self.classes = 0  # examples of this cell that started a new class
        self.example_paid = False  # the current example has started its class: its other kernels are paid
        self.paying_first = False  # the current example is the cell's first class: paid past the budget
        self.granted = False  # a steering search found no compiled class: the first class may pass the budget
        self.past_budget = 0  # compiles of this cell beyond the subject's budget
        self.counting = False  # Triton's compile hook counts for this share (counting_compiles)

    def _needed(self, *, fixed_only: bool) -> int:
        return sum(self.ledger.class_cost(self.subject, kernels) for kernels, steers in self.later
                   if not (fixed_only and steers))

    def start_example(self) -> None:
        """A new example begins: its first new kernel starts a class of its own."""
        self.example_paid = False
        self.paying_first = False

    def may_start_class(self) -> bool:
        """Whether an example that needs new kernels could start a class now, within the fair share."""
        if self.budget is None:
            return True
        left = self.budget - self.ledger.used(self.subject)
        return left > self._needed(fixed_only=self.classes == 0)

    def grant_first_class(self) -> None:
        """Let this cell's first class start past its share (and the budget): no compiled class holds its draw."""
        self.granted = True

    def admit(self, kernel: str) -> None:
        """Called before a specialization new to the subject is compiled: the one check of the compile
        budget.  Raises :class:`BudgetExhausted` if it may not be: a new class that the fair share cannot
        buy, or a further kernel of a class past the budget (a cell's first class is paid in full)."""
        if self.budget is None:
            return
        if self.example_paid:
            if not self.paying_first and self.ledger.used(self.subject) >= self.budget:
                raise BudgetExhausted(self.subject, self.budget, kernel)
            return
        first = self.classes == 0
        if not (first and (self.granted or not self.steers)) and not self.may_start_class():
            raise BudgetExhausted(self.subject, self.budget, kernel)
        self.classes += 1
        self.example_paid = True
        self.paying_first = first
        self.class_index = self.ledger.open_class(self.subject, self.kernels)

    def charged(self) -> None:
        """A new specialization was charged to the current example's class."""
        self.count += 1
        if self.example_paid and self.class_index is not None:
            self.ledger.charge_class(self.subject, self.kernels, self.class_index)
        if self.budget is not None and self.ledger.used(self.subject) > self.budget:
            self.past_budget += 1


def _kernel_name(fn: Any) -> str:
    module = getattr(fn, "module", None)
    name = getattr(fn, "name", None)
    return f"{module}.{name}" if name else repr(fn)


def make_hook(counter: CellCompiles, previous: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """The ``jit_cache_hook`` for one cell: each specialization new to its subject is admitted by the
    cell's share, then recorded (one compiled again, on another device or after a cache was cleared, is
    already paid for)."""
    ledger, subject = counter.ledger, counter.subject

    def hook(*args: Any, **kwargs: Any) -> Any:
        kernel, key = _kernel_name(kwargs.get("fn")), kwargs.get("key")
        with ledger.transaction():  # the check and the record at once: another process may share the ledger
            if not ledger.has(subject, kernel, key):
                counter.admit(kernel)
                ledger.record(subject, kernel, key)
                counter.charged()
        return previous(*args, **kwargs) if previous else False

    return hook


@contextlib.contextmanager
def counting_compiles(counter: CellCompiles | None) -> Iterator[CellCompiles | None]:
    """Count (and hold to its budget) the specializations ``counter``'s subject compiles while the block
    runs, through Triton's compile hook; yields ``counter``, with ``counting`` True once the hook is
    installed (a Triton older than 3.4 offers none).  None (nothing compiles here) installs nothing."""
    runtime = None
    if counter is not None:
        try:
            from triton import knobs  # triton 3.4 and later: older ones have no compile hook to count with
        except ImportError:
            knobs = None
        runtime = getattr(knobs, "runtime", None)
    if runtime is None or not hasattr(runtime, "jit_cache_hook"):
        yield counter
        return
    previous = runtime.jit_cache_hook
    runtime.jit_cache_hook = make_hook(counter, previous)
    counter.counting = True
    try:
        yield counter
    finally:
        runtime.jit_cache_hook = previous
