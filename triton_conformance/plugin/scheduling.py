"""pytest-xdist scheduling that keeps each subject's cells on one worker, or a long subject's parts on a few.

Under ``--dist loadgroup`` xdist groups tests by their ``xdist_group`` mark,
which it records by appending ``@group`` to the node id; pytest 9 computes
node ids afresh, so the suffix is lost and every cell is its own unit.  This
scheduler groups conformance cells (node ids ``::subject[cell]``) by subject
itself: the subject's compile budget and Triton's kernel cache then serve all
of its cells, in order, as with one worker.

Once every worker has collected, a subject that would cost more than a worker's
share of the run is cut into parts (:mod:`.splitting`), each a work unit of
its own, and ``share(subject, parts)`` is told first, so that the parts share
one ledger; the units are then handed out costliest first (as xdist's own
reordering does by cell count, which is what the cost is without durations).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from xdist.scheduler import LoadGroupScheduling

from triton_conformance.model.cells import split_cell_id
from triton_conformance.plugin.shards import cell_weights
from triton_conformance.plugin.splitting import split_subjects

__all__ = ["SubjectGroupScheduling", "subject_of"]


def subject_of(nodeid: str) -> str | None:
    """The subject of a conformance cell's node id ``::name[cell]`` (with any ``@group``), else None."""
    named = _cell_of(nodeid)
    return named[0] if named else None


def _cell_of(nodeid: str) -> tuple[str, str] | None:
    return split_cell_id(nodeid[2:].partition("@")[0]) if nodeid.startswith("::") else None


class SubjectGroupScheduling(LoadGroupScheduling):
    """``--dist loadgroup``, with each conformance subject a group of its own, or a long one a few.

    - ``durations``: (subject, cell) -> seconds from an earlier run, or None (one unit a cell);
    - ``share``: called with a subject and its parts' cells before any of them runs, for each subject cut.
    """

    def __init__(self, config, log=None, *,  # noqa: ANN001 - xdist's types
                 durations: Mapping[tuple[str, str], float] | None = None,
                 share: Callable[[str, list[list[str]]], None] | None = None) -> None:
        super().__init__(config, log)
        self.durations, self.share = durations, share
        self.parts: dict[str, list[list[str]]] = {}  # each subject cut: its parts' cells
        self._part_of: dict[tuple[str, str], int] = {}
        self._ordered = False

    def schedule(self) -> None:
        if self.collection is None and self.collection_is_completed and self.registered_collections:
            self._split(next(iter(self.registered_collections.values())))
        super().schedule()

    def _split(self, collection: list[str]) -> None:
        cells = [c for c in map(_cell_of, collection) if c is not None]
        self.parts = split_subjects(cells, self.numnodes, self.durations)
        for subject, parts in self.parts.items():
            if self.share is not None:
                self.share(subject, parts)
            for index, part in enumerate(parts, 1):
                self._part_of.update({(subject, cell): index for cell in part})

    def _split_scope(self, nodeid: str) -> str:
        named = _cell_of(nodeid)
        if named is None:
            return super()._split_scope(nodeid)
        part = self._part_of.get(named)
        return f"conformance:{named[0]}" if part is None else f"conformance:{named[0]}#{part}"

    def _assign_work_unit(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
        if not self._ordered and self.config.option.loadscopereorder:  # the first unit: costliest first
            self._ordered = True
            units = list(self.workqueue.items())
            weights = cell_weights([c for c in map(_cell_of, self.collection or ()) if c], self.durations)
            cost = {scope: sum(weights.get(_cell_of(nodeid), 1.0) for nodeid in unit) for scope, unit in units}
            self.workqueue.clear()
            self.workqueue.update(sorted(units, key=lambda item: -cost[item[0]]))  # stable: xdist's order on ties
        super()._assign_work_unit(node)
