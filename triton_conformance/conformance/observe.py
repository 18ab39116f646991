"""Observers of a cell's run: events for each example and for the cell's end.

The engine calls these at fixed points; a worker's flight recorder and the
benchmarks listen through them instead of patching the engine.  Every method
is a no-op here: override the ones you need.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Observer", "NO_OBSERVER"]


class Observer:
    """Receives a cell's events, in order: ``example_started`` / ``example_finished`` pairs, then
    ``cell_finished`` once."""

    def example_started(self, subject: Any, cell: str, spec: Any) -> None:
        """Before an example's kernel runs (``spec``: a :class:`~triton_conformance.model.spec.Spec`)."""

    def example_finished(self, subject: Any, cell: str, spec: Any, verdict: Any, seconds: float) -> None:
        """After it: ``verdict`` is ``"honoured"``, ``"rejected"``, ``"discarded"`` or a Finding."""

    def cell_finished(self, result: Any) -> None:
        """With the cell's :class:`~triton_conformance.model.outcomes.CellResult`."""


NO_OBSERVER = Observer()
