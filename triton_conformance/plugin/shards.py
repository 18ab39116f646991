"""Shards: a stable split of a run's cells over N machines (``--conformance-shard=K/N``).

The unit is the subject: a subject's cells stay on one shard, as they stay on
one xdist worker (plugin/scheduling.py), so its compile budget and Triton's
kernel cache serve all of them.  The split depends only on the subjects, their
cells and (when given) the durations file, never on the machine, the time or a
random seed, so every shard of a run computes the same plan and the shards
together hold every cell exactly once.

Subjects are weighed by their cells' durations in an earlier results file
(``--conformance-shard-durations``; a cell it lacks weighs the median of those
it has), else by their number of cells, and placed heaviest first on the
lightest shard (ties: the subject's name, the shard's number).
"""

from __future__ import annotations

import os
import statistics
from typing import Iterable, Mapping

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.reports.results_json import check_cells, read_results

__all__ = ["Shard", "parse_shard", "read_durations", "plan_shards", "cell_weights"]


class Shard(tuple):
    """``(index, count)``, 1-based: shard 2 of 4 is ``Shard(2, 4)``; ``str()`` gives ``2/4``."""

    def __new__(cls, index: int, count: int) -> "Shard":
        return super().__new__(cls, (index, count))

    @property
    def index(self) -> int:
        return self[0]

    @property
    def count(self) -> int:
        return self[1]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str | None, where: str = "--conformance-shard") -> Shard | None:
    """``"K/N"`` -> ``Shard(K, N)``; None for no sharding; ConformanceUsageError (one line) otherwise."""
    if text is None or str(text).strip() == "":
        return None
    index, sep, count = str(text).strip().partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit():
        raise ConformanceUsageError(f"{where}={text!r}, expected K/N: shard K of N, e.g. 1/4")
    k, n = int(index), int(count)
    if n < 1 or not 1 <= k <= n:
        raise ConformanceUsageError(f"{where}={text!r}, expected K/N with 1 <= K <= N (shards count from 1), "
                                    "e.g. 1/4")
    return Shard(k, n)


def read_durations(path: str, where: str = "--conformance-shard-durations") -> dict[tuple[str, str], float]:
    """``(subject, cell) -> duration_s`` from a results file (any device: the split only needs proportions)."""
    if not os.path.exists(path):
        raise ConformanceUsageError(f"{where}={path!r} does not exist; expected an earlier results JSON")
    try:
        doc = check_cells(read_results(path), path)
    except (OSError, ValueError) as exc:
        raise ConformanceUsageError(f"{where}={path!r} cannot be read: {exc}") from None
    durations: dict[tuple[str, str], float] = {}
    for r in doc["results"]:
        value = r.get("duration_s")
        if isinstance(value, (int, float)) and value >= 0:
            key = (r["subject"], r["cell"])
            durations[key] = max(durations.get(key, 0.0), float(value))  # a cross-device file: the slowest
    return durations


def cell_weights(cells: Iterable[tuple[str, str]],
                 durations: Mapping[tuple[str, str], float] | None) -> dict[tuple[str, str], float]:
    """What each (subject, cell) is expected to cost: its duration (a cell the durations lack: their
    median), or 1 a cell without durations."""
    cells = list(cells)
    known = [durations[c] for c in cells if durations and c in durations]
    fallback = statistics.median(known) if known else 1.0
    if not durations:
        return {c: 1.0 for c in cells}
    return {c: max(durations.get(c, fallback), 1e-3) for c in cells}  # a cell that took no time still costs


def _weights(cells: Iterable[tuple[str, str]],
             durations: Mapping[tuple[str, str], float] | None) -> dict[str, float]:
    weights: dict[str, float] = {}
    for (subject, _), w in cell_weights(cells, durations).items():
        weights[subject] = weights.get(subject, 0.0) + w
    return weights


def plan_shards(cells: Iterable[tuple[str, str]], count: int,
                durations: Mapping[tuple[str, str], float] | None = None) -> dict[str, int]:
    """Each subject's shard (1-based) for a split of ``cells`` ((subject, cell) pairs) into ``count`` shards."""
    if count < 1:
        raise ValueError(f"plan_shards: count={count!r}, expected at least 1")
    weights = _weights(cells, durations)
    loads = [0.0] * count
    plan: dict[str, int] = {}
    # Heaviest first (longest processing time first); rounded so that float noise cannot reorder equal weights.
    for subject in sorted(weights, key=lambda s: (-round(weights[s], 6), s)):
        shard = min(range(count), key=lambda i: (round(loads[i], 6), i))
        plan[subject] = shard + 1
        loads[shard] += weights[subject]
    return plan


def shard_loads(cells: Iterable[tuple[str, str]], plan: Mapping[str, int], count: int,
                durations: Mapping[tuple[str, str], float] | None = None) -> list[float]:
    """The estimated weight of each shard under ``plan`` (seconds with durations, else cells)."""
    weights = _weights(cells, durations)
    loads = [0.0] * count
    for subject, w in weights.items():
        loads[plan[subject] - 1] += w
    return loads
