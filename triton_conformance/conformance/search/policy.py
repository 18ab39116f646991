"""The profile, read once: how many examples, how reproducibly, and each search's seed and settings.

Every search of every cell kind takes its seed, its Hypothesis settings and
its example database from one :class:`SearchPolicy`, made from the run's
:class:`~triton_conformance.model.config.RunConfig`:

- a **derandomized** profile (``ci``) seeds each search with the cell's name,
  so its draws move neither with the machine nor with the engine's code;
- otherwise the run's seed, mixed with the cell's name, so two cells of a
  fresh-seed run draw apart and the same seed replays the same run; no seed
  at all lets Hypothesis choose.

Hypothesis's public API has no per-search database key for a ``@given`` test
made in a loop (its key is a digest of the test function's source, the same
for every cell), so each search gets the profile's database behind
:class:`CellDatabase`, which files its entries under the cell's own key.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from triton_conformance.model.cells import cell_id
from triton_conformance.model.config import RunConfig

__all__ = ["SearchPolicy", "CellDatabase", "MEMORY_FRACTION", "memory_cap"]


class CellDatabase(ExampleDatabase):
    """A view of an example database whose keys all start with one cell's (and search's) own prefix."""

    def __init__(self, inner: ExampleDatabase, prefix: str):
        super().__init__()
        self.inner, self.prefix = inner, prefix.encode() + b"/"

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self.prefix + src, self.prefix + dest, value)

    def __repr__(self) -> str:
        return f"CellDatabase({self.inner!r}, {self.prefix.decode()[:-1]!r})"


# The default cap: this fraction of the machine's physical memory, per example.
MEMORY_FRACTION = 0.25


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 16 << 30


def memory_cap(fraction_or_bytes: float | None) -> float:
    """The per-example byte cap: a fraction of the machine's memory if at most 1, bytes if more, no cap for None."""
    if fraction_or_bytes is None:
        return math.inf
    return fraction_or_bytes * _physical_memory() if fraction_or_bytes <= 1 else float(fraction_or_bytes)


@dataclass(frozen=True)
class SearchPolicy:
    """How every search of a run draws, shrinks and stops.

    - ``examples``: examples per search; ``shrink_calls``: kernel runs after a cell's first failure;
    - ``derandomize``, ``run_seed``: where each search's seed comes from (:meth:`seed_for`);
    - ``database``: the example database's directory, or None;
    - ``max_elements`` / ``max_outer``: caps on each input's elements and on every dim but the widest;
    - ``memory_cap``: bytes an example may need; ``compile_budget``: specializations a subject may
      compile on CUDA (None: no limit); ``interpreter_cost`` / ``interpreter_example_cost``: a cell's
      and an example's counted interpreted work (None: not bounded);
    - ``batch``: examples one Hypothesis test case draws, each judged on its own (1: a case an example).
    """

    examples: int
    shrink_calls: int
    derandomize: bool
    run_seed: int | None
    database: str | None
    max_elements: int
    max_outer: int
    memory_cap: float
    compile_budget: int | None
    interpreter_cost: int | None
    interpreter_example_cost: int | None
    batch: int = 1

    @classmethod
    def of(cls, config: RunConfig) -> "SearchPolicy":
        """The policy of ``config``: its profile, and its seed (``config.seed``)."""
        p = config.profile
        return cls(examples=config.examples, shrink_calls=p.shrink_calls, derandomize=p.derandomize,
                   run_seed=config.seed, database=p.database,
                   max_elements=p.max_elements, max_outer=p.max_outer, memory_cap=memory_cap(config.memory_cap),
                   compile_budget=config.compile_budget, interpreter_cost=p.interpreter_cost,
                   interpreter_example_cost=p.interpreter_example_cost, batch=config.batch)

    def seed_for(self, subject: str, cell: str, salt: str = "") -> int | None:
        """The seed of one search of ``subject``'s ``cell`` (``salt`` tells a cell's searches apart)."""
        name = f"{subject}::{cell}" + (f"::{salt}" if salt else "")
        if self.derandomize:
            return zlib.crc32(name.encode())
        if self.run_seed is not None:
            return zlib.crc32(f"{self.run_seed}:{name}".encode())
        return None

    def settings(self, subject: str, cell: str, salt: str = "", *, max_examples: int | None = None) -> settings:
        """Hypothesis settings for one search: the profile's examples (or ``max_examples``), no deadline
        (kernels run at the interpreter's pace), one bug, quiet, and the cell's own database entries."""
        database: Any = None
        if self.database:
            database = CellDatabase(DirectoryBasedExampleDatabase(self.database), cell_id(subject, cell) + salt)
        return settings(
            max_examples=max_examples or self.examples,
            derandomize=False,  # a derandomized profile pins the seed instead (seed_for)
            database=database,
            deadline=None,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
            verbosity=Verbosity.quiet,
            print_blob=False,
        )
