"""Long subjects cut into parts for the xdist workers of one run (``--dist loadgroup``).

A subject's cells run on one worker, in turn, so that its compile budget and
kernel cache serve them all (plugin/scheduling.py); a subject that costs more
than a worker's fair share of the run, C / W, is then the run's floor, and a
few units near C / W pack badly onto W workers.  So a subject estimated to cost
more than half a share is cut into ``ceil(cost / (C / 2W))`` parts (at most W)
of consecutive cells (catalogue order, so a subject's forward and gradient
cells mostly land in different parts), each near its cost over the number of
parts: with every unit under half a share, costliest first, the run ends near
C / W.  Nothing is cut when the whole subjects, costliest first, already end
within 5% of C / W (:func:`makespan`) (the H200 nightly at seed 47, 12 workers: 28.2 s by its durations,
against 32.1 s whole and 32.2 s with parts of a whole share).  The parts run on
different workers at once and share the subject's ledger and class book
through files (:mod:`triton_conformance.conformance.search.shared_ledger`), so
the budget still holds for the run.

A cell's cost is its duration in an earlier results file when there is one
(:func:`~.shards.cell_weights`: a cell it lacks costs the median), else one
unit a cell; by cell counts alone only a subject past a whole share is cut
(the nightly's 591 cells at 12 workers would otherwise cut 17 subjects by
counts, where its durations cut 11 others).  A subject with fewer than ``2 * MIN_PART_CELLS`` cells is never
cut: a part that small gains less than it costs in classes loaded twice.
"""

from __future__ import annotations

import heapq
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping

from triton_conformance.plugin.shards import cell_weights

__all__ = ["MIN_PART_CELLS", "PART_OF_SHARE", "BALANCED", "makespan", "split_subjects", "SharedLedgers", "WORKER_INPUT", "join_shared_ledgers"]

WORKER_INPUT = "conformance_ledger_dir"  # the workerinput key of the run's directory of shared ledgers

MIN_PART_CELLS = 8
PART_OF_SHARE = 0.5  # the most a part may cost, as a fraction of a worker's share C / W
BALANCED = 1.05  # whole subjects that end within this of C / W are left whole


def _cut(cells: list[str], weights: list[float], parts: int) -> list[list[str]]:
    """``cells`` in ``parts`` runs of consecutive cells, each near ``sum(weights) / parts``."""
    total, cut, done = sum(weights), [[]], 0.0
    for cell, weight in zip(cells, weights):
        # A new part once the cells so far, with half of this one, pass the parts so far's share.
        if len(cut) < parts and cut[-1] and done + weight / 2 > total * len(cut) / parts:
            cut.append([])
        cut[-1].append(cell)
        done += weight
    return cut


def makespan(units: Iterable[float], workers: int) -> float:
    """When the last of ``units`` (their costs) ends, handed out costliest first, each to the worker that frees
    first (as the scheduler hands out its work units)."""
    free = [0.0] * max(1, workers)
    for cost in sorted(units, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)


def split_subjects(cells: Iterable[tuple[str, str]], workers: int,
                   durations: Mapping[tuple[str, str], float] | None = None) -> dict[str, list[list[str]]]:
    """The subjects to cut, each as its parts' cells: ``cells`` are (subject, cell) pairs in catalogue order,
    ``workers`` the run's xdist workers.  Subjects left whole are absent."""
    cells = list(cells)
    weights = cell_weights(cells, durations)
    if workers < 2 or not cells:
        return {}
    share = sum(weights.values()) / workers
    by_subject: dict[str, list[str]] = {}
    for subject, cell in cells:
        by_subject.setdefault(subject, []).append(cell)
    whole = [sum(weights[(subject, cell)] for cell in own) for subject, own in by_subject.items()]
    if makespan(whole, workers) <= BALANCED * share:
        return {}
    part = PART_OF_SHARE * share
    # Cell counts say little of what a cell costs: by them only a subject past a whole share is long.
    long = part if durations else share
    plan = {}
    for subject, own in by_subject.items():
        cost = [weights[(subject, cell)] for cell in own]
        if sum(cost) <= long + 1e-9:
            continue
        parts = min(math.ceil(sum(cost) / part - 1e-9), len(own) // MIN_PART_CELLS, workers)
        if parts >= 2:
            plan[subject] = _cut(own, cost, parts)
    return plan


class SharedLedgers:
    """The controller's directory of the run's shared ledgers: made once a worker is configured (xdist's
    workers learn it through their workerinput, and hand it to their cell workers in the environment),
    a file a subject cut into parts, removed at the end of the run."""

    def __init__(self) -> None:
        self.directory: str | None = None
        self.cut: dict[str, list[int]] = {}  # each subject cut: its parts' cell counts
        self.balance = "cells"  # what the cut was estimated by, for the terminal

    def line(self) -> str | None:
        """``split between workers: rms_norm (10 + 8 + 19 cells), ... by durations in X``, or None."""
        if not self.cut:
            return None
        subjects = ", ".join(f"{s} ({' + '.join(map(str, n))} cells)" for s, n in sorted(self.cut.items()))
        return f"split between workers: {subjects}, by {self.balance}"

    def path(self) -> str:
        if self.directory is None:
            self.directory = tempfile.mkdtemp(prefix="conformance-ledgers-")
        return self.directory

    def share(self, subject: str, parts: list[list[str]]) -> None:
        from triton_conformance.conformance.search.shared_ledger import create  # the engine: after configure

        create(self.path(), subject, [cell for part in parts for cell in part])
        self.cut[subject] = [len(part) for part in parts]

    def close(self) -> None:
        if self.directory is not None and os.path.isdir(self.directory):
            shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None


def join_shared_ledgers(workerinput: Mapping | None) -> None:
    """Worker side: the cells this process and its cell workers run find the run's shared ledgers."""
    directory = (workerinput or {}).get(WORKER_INPUT)
    if directory:
        from triton_conformance.conformance.search.shared_ledger import SHARED_LEDGER_ENV

        os.environ[SHARED_LEDGER_ENV] = directory
