"""Fleet runs on Ray: the battery's shards fanned out over a cluster, merged into one cross-device report.

``triton-conformance fleet --devices interpreter,H200 --shards 4`` (see docs/fleet.md):

- :mod:`triton_conformance.fleet.tasks`: the Ray task, which runs one shard in a
  subprocess (``triton-conformance run --shard K/N --results <tmp>``) and
  returns its results document, and the ledger actor that records on which
  node each attempt started;
- :mod:`triton_conformance.fleet.driver`: the plan (devices x shards, the Ray
  resources each needs), the fan-out, the collection as tasks finish (each
  shard's document is written to the work directory at once, so nothing
  collected is lost), crash cells for a shard lost twice, and the merge.

Ray is imported only when a fleet runs: ``pip install 'triton-conformance[fleet]'``.
"""

from __future__ import annotations

from triton_conformance.fleet.driver import FleetResult, ShardTask, plan_tasks, run_fleet

__all__ = ["FleetResult", "ShardTask", "plan_tasks", "run_fleet"]
