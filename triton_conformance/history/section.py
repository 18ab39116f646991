"""The ``history`` section of a results document: what the store says about the run just recorded, embedded
in the results JSON so that the reports (which read only the document) can show it.

``{"store", "device", "runs": [{"id", "commit", "started", "green"}...] (oldest first),
  "strips": {cell: [outcome or null per run]}, "flaky": {cell: {"flips", "runs", "flagged"}},
  "new": {"baseline": {"id", "commit"} or null, "new_failures": [...], "new_passes": [...],
          "changed_findings": [...]}}``
"""

from __future__ import annotations

from typing import Any

from triton_conformance.history.flakes import FLAKE_RUNS, flaky
from triton_conformance.history.queries import new_since_green, trend
from triton_conformance.history.store import HistoryStore

__all__ = ["FLAKE_RUNS", "STRIP_RUNS", "history_section"]

STRIP_RUNS = 10  # the outcomes shown beside each cell


def _short(run: dict[str, Any] | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"id": run["id"], "commit": run["commit"], "started": run["started"], "green": run["failing"] == 0}


def history_section(store: HistoryStore, run_id: int, device: str) -> dict[str, Any]:
    """The section for run ``run_id`` on ``device``, just recorded in ``store``."""
    new = new_since_green(store, run_id=run_id)
    strips = trend(store, "", last=STRIP_RUNS, device=device, every_cell=True)
    flakes = flaky(store, device=device, last=FLAKE_RUNS)
    return {
        "store": store.where, "device": device,
        "runs": [_short(r) for r in strips["runs"]],
        "strips": {name: [c["outcome"] if c else None for c in strip] for name, strip in strips["cells"].items()},
        "flaky": {f["cell"]: {"flips": f["flips"], "runs": f["runs"], "flagged": f["flagged"]} for f in flakes},
        "new": {"baseline": _short(new["baseline"]),
                **{k: new[k] for k in ("new_failures", "new_passes", "changed_findings")}},
    }
