"""What one cell may spend: one :class:`Allowance` per cell, its meters, and the memory an example needs.

The allowance owns every limit a cell's examples run under, and counts what
it refused:

- the **compile share** on CUDA (:class:`~.compiles.CellCompiles`: the cell's
  fair share of the subject's compile budget, and the one check of that
  budget), counted by Triton's compile hook;
- the **interpreter's cost** (:class:`~.interpreter_cost.CostMeter`: counted
  interpreted work, on the interpreter), counted by the interpreter's hooks,
  with numpy's BLAS on one thread (:mod:`.blas_threads`: so a unit costs what
  it was fitted to);
- the **memory cap**: an example whose estimated bytes (:func:`example_bytes`)
  pass it is discarded before anything is built (:meth:`Allowance.admit`);
- the **shrink calls**: kernel runs the shrinker may spend after the first failure;
- the **discards**, by reason (:mod:`triton_conformance.conformance.discards`), and the
  examples run: a search ends once the budgets keep refusing what it draws
  (:meth:`Allowance.spent`).

:meth:`Allowance.metered` is the one constructor of a cell's allowance: from
the search policy, the subject, the back end and what the cell's kind needs,
it builds both meters and installs their hooks for as long as the cell runs.
A bare ``Allowance()`` meters nothing (a replayed example, a probe).
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.discards import OVER_MEMORY, REASONS, ExampleDiscarded
from triton_conformance.conformance.search.blas_threads import one_blas_thread
from triton_conformance.conformance.search.compiles import CellCompiles, CompileLedger, counting_compiles
from triton_conformance.conformance.search.interpreter_cost import CostMeter, metering_cost
from triton_conformance.conformance.search.policy import SearchPolicy
from triton_conformance.model.contract import Contract
from triton_conformance.model.spec import GUARD_ELEMENTS, Spec, strides_for
from triton_conformance.model.subject import Subject

__all__ = ["Allowance", "CellNeeds", "MAX_DISCARDS", "example_bytes", "gib"]

# Once a cell has discarded this many examples (plus three per example it ran) for budgets
# that keep refusing what it draws, its search ends: each such discard builds inputs and
# starts a launch (about 2 ms on an H200), and a cell whose kernels the budget never paid
# for would otherwise spend Hypothesis's whole allowance of invalid examples.
MAX_DISCARDS = 100

# Bytes per element, beyond the input storages: the second call's copy, the snapshot
# and the drawn values (about 3 more storages, counted below), and per element of
# the largest input, outputs in two calls with their guard copies and the float64
# oracle's inputs and output.
_OUTPUT_BYTES_PER_ELEMENT = 40

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "bool": 1,
             "int16": 2, "int32": 4, "int64": 8}


def example_bytes(contract: Contract, spec: Spec) -> int:
    """Roughly the most bytes running ``spec`` holds at once.

    Each input's storage as laid out (its span, with the guard band) counts
    four times (two sentinel builds, a snapshot, the drawn values), and each
    element of the largest input ``_OUTPUT_BYTES_PER_ELEMENT`` more: the
    outputs of both calls and the oracle's float64 copies.
    """
    storage, largest = 0, 0
    for name, decl in contract.inputs.items():
        shape = tuple(spec.dims.get(s, 0) for s in decl.shape)
        _, _, span = strides_for(shape, spec.layout(name))
        storage += (span + GUARD_ELEMENTS) * _ITEMSIZE.get(spec.dtypes.get(name, "float32"), 8)
        largest = max(largest, math.prod(shape))
    return 4 * storage + _OUTPUT_BYTES_PER_ELEMENT * largest


def gib(n: float) -> str:
    """``n`` bytes, in GiB with one decimal."""
    return f"{n / (1 << 30):.1f} GiB"


class CellNeeds(Protocol):
    """What a cell's kind asks of its allowance (a :class:`~triton_conformance.conformance.kinds.base.CellKind` has each)."""

    kernels: str  # what its classes compile: "forward" or "backward"
    steers: bool  # whether its search moves draws into compiled classes
    interpreter_cost: bool  # whether the interpreter's cost allowance bounds its examples


@dataclass
class Allowance:
    """Everything one cell may spend, and what it refused.

    - ``memory_cap``: bytes an example may need (:func:`example_bytes`);
    - ``shrink_calls``: kernel runs the shrinker may spend after the cell's first failure;
    - ``compiles``: the cell's share of the compile budget on CUDA (None where nothing compiles);
    - ``meter``: the interpreter's cost meter (None where the cell is not metered);
    - ``discards``: examples discarded, by reason; ``ran``: examples run to a verdict.
    """

    memory_cap: float = math.inf
    shrink_calls: int = 40
    compiles: CellCompiles | None = None
    meter: CostMeter | None = None
    discards: Counter = field(default_factory=Counter)
    ran: int = 0

    @classmethod
    @contextlib.contextmanager
    def metered(cls, policy: SearchPolicy, subject: Subject, backend: Backend, needs: CellNeeds, *,
                budget_factor: Callable[[], int] = lambda: 1,
                later: Callable[[], tuple[tuple[str, bool], ...]] = tuple,
                ledger: CompileLedger | None = None, book: Any = None) -> Iterator[Allowance]:
        """The allowance of one cell of ``subject``, its meters installed while the block runs.

        - ``policy``: the memory cap, the shrink calls, the compile budget, the interpreter's cost;
        - ``backend``: a compiling one gets the compile share, the interpreter one BLAS thread and the cost
          meter (if ``needs.interpreter_cost``);
        - ``budget_factor``: what every kind needs of the subject's budget (an autotuner's configs), and
          ``later``: the later cells of the subject that apply, each as (kernels, steers); both asked
          for only where there is a budget to share (:class:`~.compiles.CellCompiles`);
        - ``ledger``, ``book``: the subject's when other processes share them (None: this process's).
        """
        budget = None
        if backend.compiles and policy.compile_budget is not None:
            budget = policy.compile_budget * budget_factor()
        share = CellCompiles(subject.name, budget, later() if budget else (), kernels=needs.kernels,
                             steers=needs.steers, ledger=ledger, book=book) if backend.compiles else None
        with counting_compiles(share), one_blas_thread(enabled=not backend.compiles), \
                metering_cost(policy.interpreter_cost, policy.interpreter_example_cost, policy.examples,
                              subject=subject.name, enabled=not backend.compiles and needs.interpreter_cost
                              ) as meter:
            yield cls(memory_cap=policy.memory_cap, shrink_calls=policy.shrink_calls, compiles=share,
                      meter=meter)

    @property
    def steering(self) -> bool:
        """Whether the search moves draws into compiled classes (CUDA, with a compile budget)."""
        return self.compiles is not None and self.compiles.budget is not None

    @property
    def compile_budget(self) -> int | None:
        return None if self.compiles is None else self.compiles.budget

    @property
    def compiled(self) -> int | None:
        """New specializations the cell compiled, or None where none are counted (the interpreter, no hook)."""
        return self.compiles.count if self.compiles is not None and self.compiles.counting else None

    def fits(self, contract: Contract, spec: Spec) -> bool:
        """Whether ``spec`` fits the memory cap (if not, it is discarded unrun)."""
        return example_bytes(contract, spec) <= self.memory_cap

    def admit(self, contract: Contract, spec: Spec) -> None:
        """The one admission check of an example, before anything is built: if ``spec`` does not fit the
        memory cap, count the discard and raise :class:`ExampleDiscarded` (over-memory)."""
        if not self.fits(contract, spec):
            self.discard(OVER_MEMORY)
            raise ExampleDiscarded(OVER_MEMORY, "over the per-example memory cap")

    def discard(self, reason: str) -> None:
        """One example discarded for ``reason``: the one count of every discard."""
        self.discards[reason] += 1

    def discarded(self, exc: ExampleDiscarded) -> None:
        self.discard(exc.reason)

    def spent(self) -> bool:
        """Whether the budgets that keep refusing this cell's draws have refused enough to end its search."""
        refused = sum(n for r, n in self.discards.items() if REASONS[r].limits)
        return refused >= MAX_DISCARDS + 3 * self.ran

    # -- the interpreter's cost, told by the battery --------------------------------------------------------
    def example_started(self, calls: int = 1, *, before_inputs: bool = False) -> None:
        """A new example that will call the launcher ``calls`` times: its share of the interpreted work
        (:class:`~.interpreter_cost.OverCost` at once, ``before_inputs``, when the cell's pool is spent)."""
        if self.meter is not None:
            self.meter.start_example(calls, before_inputs=before_inputs)

    def call_started(self) -> None:
        """One of the example's launcher calls starts: its part of the example's share."""
        if self.meter is not None:
            self.meter.start_call()

    def details(self) -> dict[str, int]:
        """The discard counts as a result's details keys (``compile_budget_discarded``, ...)."""
        return {REASONS[r].detail: n for r, n in self.discards.items() if n}

