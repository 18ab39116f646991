"""A pytest-xdist worker that dies mid-cell: the cell runs once more, then is a crash cell.

A worker can die for reasons that are not the kernel's (the OOM killer, a
``kill -9``, a lost node); cells run in a worker process of their own
(``--isolation=process``), so a kernel's crash rarely takes the pytest worker
with it.  So the first death while a cell runs is not a verdict: xdist's
``pytest_handlecrashitem`` lets the controller queue the cell again (the
subject-group scheduler already puts the dead worker's unfinished cells back
in its queue; the plain ``load`` scheduler is asked to) and report the death
as a ``rerun``.  A second death on the same cell is recorded as its crash
cell (``worker-died``), and the cell is not queued a third time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["WorkerDeaths", "RERUN"]

RERUN = "rerun"  # the report outcome of a first death (pytest-rerunfailures' word, shown as R)


def _requeued(sched: Any, nodeid: str) -> list[dict]:
    """The work units of a scope scheduler's queue that hold ``nodeid`` unfinished (xdist's loadscope family
    puts a dead worker's units back whole, the cell it died in included)."""
    queue = getattr(sched, "workqueue", None) or {}
    return [unit for unit in queue.values() if isinstance(unit, dict) and unit.get(nodeid) is False]


class WorkerDeaths:
    """Deaths of pytest workers per cell (node id), on the controller."""

    def __init__(self) -> None:
        self.deaths: Counter = Counter()
        self.messages: dict[str, str] = {}

    def handle(self, nodeid: str, report: Any, sched: Any) -> bool:
        """A worker died running ``nodeid``: queue it again and make ``report`` a rerun the first time
        (True); the second time leave ``report`` failed and keep the cell out of the queue (False)."""
        self.deaths[nodeid] += 1
        self.messages[nodeid] = str(getattr(report, "longrepr", "") or "")
        units = _requeued(sched, nodeid)
        if self.deaths[nodeid] > 1:
            for unit in units:
                unit[nodeid] = True  # done: its crash cell is the verdict
            return False
        if not units:
            try:
                sched.mark_test_pending(nodeid)
            except (AttributeError, NotImplementedError, ValueError, AssertionError):
                return False  # this scheduler cannot run it again: the death is the cell's crash
        report.outcome = RERUN
        return True

    def note(self, nodeid: str) -> dict[str, Any] | None:
        """What a cell's result records of the deaths before it ran to the end, or None."""
        if not self.deaths.get(nodeid):
            return None
        return {"deaths": self.deaths[nodeid], "message": self.messages.get(nodeid, "")[-500:]}
