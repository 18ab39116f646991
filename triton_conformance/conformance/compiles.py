"""Count Triton specializations per subject, and hold each subject to a compile budget.

A new specialization costs 75-250 ms on an H200 (about 850 ms for a
flash-attention kernel) against about 35 us for a cached launch, so the
nightly battery on CUDA is dominated by compiles unless examples reuse them.

Triton calls ``knobs.runtime.jit_cache_hook`` before it compiles (or loads
from the disk cache) a specialization that its in-memory cache lacks, as
``hook(key=..., repr=..., fn=JitFunctionInfo(module, name, jitfn),
compile={...}, is_manual_warmup=..., already_compiled=...)``.  The
:class:`CompileLedger` records the distinct ``(kernel, key)`` pairs charged to
each subject in this process; once a subject has used its budget, an example
that needs yet another one is discarded (:class:`BudgetExhausted`), not
failed.  The interpreter compiles nothing, so the count is None there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LEDGER",
    "BudgetExhausted",
    "CellCompiles",
    "CompileLedger",
    "counting_compiles",
    "make_hook",
]


class BudgetExhausted(BaseException):
    """An example needs a new specialization but its subject has used its compile budget.

    A BaseException, so the launcher's and the battery's ``except Exception``
    cannot mistake it for the kernel's own error: it reaches the runner, which
    discards the example.  Other budgets (the autotune cells' pruned configs,
    the interpreter's cost) subclass it and name their own ``discard`` count.
    """

    discard = "discarded"  # the search's count of examples discarded for this budget

    def __init__(self, subject: str, budget: int, kernel: str):
        super().__init__(f"{subject}: compile budget of {budget} specializations used; {kernel} needs another")
        self.subject = subject
        self.budget = budget
        self.kernel = kernel


@dataclass
class CompileLedger:
    """Distinct specializations compiled per subject in this process."""

    seen: dict[str, set[tuple[str, str]]] = field(default_factory=dict)

    def used(self, subject: str) -> int:
        return len(self.seen.get(subject, ()))

    def has(self, subject: str, kernel: str, key: Any) -> bool:
        return (kernel, repr(key)) in self.seen.get(subject, ())

    def charge(self, subject: str, kernel: str, key: Any, budget: int | None) -> bool:
        """Record a specialization about to be compiled for ``subject``.

        Returns True if it is new to the subject; raises :class:`BudgetExhausted`
        if it is new and the subject has already used ``budget`` of them.
        """
        keys = self.seen.setdefault(subject, set())
        entry = (kernel, repr(key))
        if entry in keys:
            return False  # compiled again (another device, or a cache cleared): already paid for
        if budget is not None and len(keys) >= budget:
            raise BudgetExhausted(subject, budget, kernel)
        keys.add(entry)
        return True


LEDGER = CompileLedger()


class CellCompiles:
    """What one cell compiled, and the fair share of the subject's budget it may still buy.

    The budget buys new classes first: an example that needs a kernel not yet
    compiled starts a new specialization class.  A cell may start its first
    class while the budget holds more than one compile for each later cell
    that cannot search (``keep``: a performance or large-index cell needs its
    own size); a further one only from budget that is not reserved, one
    compile for each later cell of the subject (``reserve``), so the first
    cells cannot starve the last ones.  The compiles of a class once started
    are paid up to the budget itself.
    """

    def __init__(self, subject: str = "", budget: int | None = None, reserve: int = 0, keep: int = 0,
                 ledger: CompileLedger | None = None) -> None:
        self.subject, self.budget, self.reserve, self.keep = subject, budget, reserve, keep
        self.ledger = ledger or LEDGER
        self.count = 0  # new specializations this cell compiled
        self.discarded = 0
        self.classes = 0  # examples of this cell that started a new class
        self.example_paid = False  # the current example has started its class: its other kernels are paid

    def start_example(self) -> None:
        """A new example begins: its first new kernel starts a class of its own."""
        self.example_paid = False

    def may_start_class(self) -> bool:
        """Whether an example that needs new kernels could start a class now."""
        if self.budget is None:
            return True
        left = self.budget - self.ledger.used(self.subject)
        return left > (self.keep if self.classes == 0 else max(self.reserve, self.keep))

    def admit(self, kernel: str) -> None:
        """Called before a new specialization is charged; raises :class:`BudgetExhausted` if it may not be."""
        if self.budget is None or self.example_paid:
            return
        if not self.may_start_class():
            raise BudgetExhausted(self.subject, self.budget, kernel)
        self.classes += 1
        self.example_paid = True


def _kernel_name(fn: Any) -> str:
    module = getattr(fn, "module", None)
    name = getattr(fn, "name", None)
    return f"{module}.{name}" if name else repr(fn)


def make_hook(ledger: CompileLedger, subject: str, budget: int | None, counter: CellCompiles, previous=None):
    """The ``jit_cache_hook`` for one cell: charge each new specialization to ``subject``."""

    def hook(*args: Any, **kwargs: Any) -> Any:
        kernel, key = _kernel_name(kwargs.get("fn")), kwargs.get("key")
        if not ledger.has(subject, kernel, key):
            counter.admit(kernel)
        if ledger.charge(subject, kernel, key, budget):
            counter.count += 1
        return previous(*args, **kwargs) if previous else False

    return hook


@contextlib.contextmanager
def counting_compiles(enabled: bool = True, *, subject: str = "", budget: int | None = None,
                      ledger: CompileLedger | None = None, counter: CellCompiles | None = None
                      ) -> Iterator[CellCompiles | None]:
    """Yield a counter of the specializations ``subject`` compiles, or None where Triton offers no hook.

    - ``budget``: most distinct specializations the subject may compile in this
      process (None: no limit); past it the hook raises :class:`BudgetExhausted`.
    - ``counter``: the cell's :class:`CellCompiles` (its fair share), made here if not given.
    """
    if not enabled:
        yield None
        return
    try:
        from triton import knobs
    except ImportError:
        yield None
        return
    runtime = getattr(knobs, "runtime", None)
    if runtime is None or not hasattr(runtime, "jit_cache_hook"):
        yield None
        return
    ledger = ledger or LEDGER
    counter = counter or CellCompiles(subject, budget, ledger=ledger)
    previous = runtime.jit_cache_hook
    runtime.jit_cache_hook = make_hook(ledger, subject, budget, counter, previous)
    try:
        yield counter
    finally:
        runtime.jit_cache_hook = previous
