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


class _Counter:
    """What one cell compiled: new specializations, and examples discarded for the budget."""

    def __init__(self) -> None:
        self.count = 0
        self.discarded = 0


def _kernel_name(fn: Any) -> str:
    module = getattr(fn, "module", None)
    name = getattr(fn, "name", None)
    return f"{module}.{name}" if name else repr(fn)


def make_hook(ledger: CompileLedger, subject: str, budget: int | None, counter: _Counter, previous=None):
    """The ``jit_cache_hook`` for one cell: charge each new specialization to ``subject``."""

    def hook(*args: Any, **kwargs: Any) -> Any:
        if ledger.charge(subject, _kernel_name(kwargs.get("fn")), kwargs.get("key"), budget):
            counter.count += 1
        return previous(*args, **kwargs) if previous else False

    return hook


@contextlib.contextmanager
def counting_compiles(enabled: bool = True, *, subject: str = "", budget: int | None = None,
                      ledger: CompileLedger | None = None) -> Iterator[_Counter | None]:
    """Yield a counter of the specializations ``subject`` compiles, or None where Triton offers no hook.

    - ``budget``: most distinct specializations the subject may compile in this
      process (None: no limit); past it the hook raises :class:`BudgetExhausted`.
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
    counter = _Counter()
    previous = runtime.jit_cache_hook
    runtime.jit_cache_hook = make_hook(ledger or LEDGER, subject, budget, counter, previous)
    try:
        yield counter
    finally:
        runtime.jit_cache_hook = previous
