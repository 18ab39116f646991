"""Merging a run's results into the results file already there, so that nothing computed is lost.

A partial run (``-k``, ``--maxfail``, ``--conformance-cell``, a subset of the
subjects) replaces only the cells it ran.  Each cell records the run that
produced it (``"run"``: that run's id), and the document lists the runs
(``"runs"``: id, created, argv, profile, seed, commit, cells), oldest first,
keeping only those that still own a cell.  A fresh document is written only
when asked (``--conformance-fresh``).

A file of another schema, version or device is never merged into:
:func:`check_mergeable` refuses it before any cell runs.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.model.outcomes import OUTCOMES

__all__ = ["check_mergeable", "merge_documents", "run_entry"]

FRESH_HINT = "pass --conformance-fresh (ini conformance_fresh = true) to replace it"


def check_mergeable(path: str, *, device: str, where: str = "--conformance-results") -> dict | None:
    """The document at ``path`` if this run may merge into it; None if there is none.

    Raises ConformanceUsageError naming ``where`` if the file is unreadable,
    of another schema or version, or from another device.
    """
    if not os.path.exists(path):
        return None
    from triton_conformance.reports.results_json import check_cells, read_results

    try:
        doc = check_cells(read_results(path), path)
    except (OSError, ValueError) as exc:
        raise ConformanceUsageError(f"{where}={path!r} cannot be merged into: {exc}; {FRESH_HINT}, "
                                    "or choose another path") from None
    theirs = (doc.get("environment") or {}).get("device")
    if theirs != device:
        raise ConformanceUsageError(f"{where}={path!r} holds results from device {theirs!r} and this run is on "
                                    f"{device!r}; expected the same device to merge them: {FRESH_HINT}, or "
                                    "choose another path")
    return doc


def run_entry(doc: dict, run_id: str | None = None) -> dict:
    """The ``runs`` entry describing the run that wrote ``doc``."""
    env = doc.get("environment") or {}
    return {"id": run_id or doc.get("created"), "created": doc.get("created"), "argv": env.get("argv"),
            "profile": env.get("profile"), "seed": env.get("seed"), "commit": env.get("commit"),
            "cells": len(doc.get("results") or ())}


def _runs_of(doc: dict) -> list[dict]:
    runs = doc.get("runs")
    if isinstance(runs, list) and runs:
        return [dict(r) for r in runs if isinstance(r, dict) and r.get("id")]
    return [run_entry(doc)]  # written before runs were recorded: the whole file is one run


def _unique(run_id: str, taken: set[str]) -> str:
    candidate, n = run_id, 1
    while candidate in taken:
        n += 1
        candidate = f"{run_id}#{n}"
    return candidate


def merge_documents(new: dict, old: dict | None) -> dict:
    """``new`` (a results document of this run) with the cells of ``old`` it did not run.

    Cells are keyed by (subject, cell); the new run's cell wins.  The result
    keeps ``new``'s environment and catalogue, recomputes the summary, and
    records for every cell the run that produced it.
    """
    old_runs = _runs_of(old) if old else []
    run_id = _unique(str(new.get("created")), {r["id"] for r in old_runs})
    fresh = [dict(r, run=run_id) for r in new.get("results") or ()]
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    if old:
        default = old_runs[-1]["id"]
        for r in old.get("results") or ():
            merged[(r["subject"], r["cell"])] = dict(r, run=r.get("run") or default)
    for r in fresh:
        merged[(r["subject"], r["cell"])] = r
    results = sorted(merged.values(), key=lambda r: (r.get("family") or "", r["subject"], r["cell"]))
    owners = Counter(r["run"] for r in results)
    runs = [dict(r, cells=owners[r["id"]]) for r in old_runs if owners[r["id"]]]
    runs.append(dict(run_entry(new, run_id), cells=owners[run_id]))
    counts = Counter(r["outcome"] for r in results)
    doc = {k: v for k, v in new.items() if k not in ("summary", "results", "runs")}
    doc["summary"] = {k: counts.get(k, 0) for k in OUTCOMES}
    doc["runs"] = runs
    doc["results"] = results
    return doc
