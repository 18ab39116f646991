"""The context one cell runs in: what every kind, the search and the battery read of the cell.

Built by the runner (and by a reproducer's :func:`~triton_conformance.conformance.replay.replay_context`),
below the kinds, so the search takes it typed.
"""

from __future__ import annotations

from dataclasses import dataclass

from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.observe import NO_OBSERVER, Observer
from triton_conformance.conformance.search.allowance import Allowance
from triton_conformance.conformance.search.policy import SearchPolicy
from triton_conformance.model.config import RunConfig
from triton_conformance.model.subject import Subject

__all__ = ["CellContext"]


@dataclass(frozen=True)
class CellContext:
    """Everything one cell's run needs: the subject, where it runs, how hard, what it may spend, who listens."""

    subject: Subject
    cell: str
    backend: Backend
    config: RunConfig
    judge: Judge
    policy: SearchPolicy
    allowance: Allowance
    observer: Observer = NO_OBSERVER
