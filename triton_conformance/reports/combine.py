"""Merging results documents, the one place it is done: a partial run over its results file
(:func:`update_results`, the plugin's), the shards of one run into the whole run, and devices into a
cross-device matrix (:func:`merge_results`, ``triton-conformance merge`` and the fleet's).

Plain data: it reads results documents and writes one, nothing else.

- Files from **one device** (the shards of a run, or partial runs) merge into
  an ordinary single-device document: the same schema and version, no
  ``devices`` list and no per-cell ``device`` field, so every reader reads it
  as a run of the whole battery.
- Files from **several devices** (the interpreter, an H200, ...) merge into a
  cross-device matrix, subject x cell x device.  It is still schema
  ``triton-conformance/results`` version 1; it adds

  - ``"devices"``: ``[{"device": "H200", "environment": {...}, "files": [...],
    "shards": ["1/2", "2/2"], "cells": 120}, ...]``, in the order first seen;
  - a ``"device"`` field on every cell;
  - ``"divergences"``: the cells whose verdicts differ between devices (see
    :func:`divergences`).

  Its ``environment`` keeps the fields every device shares; ``device`` is the
  labels joined with ``+`` (so no run merges into it by accident) and
  ``device_name`` lists them.

A device is named by its label: the environment's ``device_label`` (written by
a run: ``interpreter``, or the GPU's name), else ``device_name`` on CUDA, else
``device``.

Conflicts are errors (:class:`MergeConflict`, naming the files) unless
``allow_mixed``: different commits, profiles, seeds or triton-conformance
versions; different schemas or versions; and the same (subject, cell) on the
same device with different outcomes.  With ``allow_mixed`` the later file wins.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from typing import Any, Iterable

from triton_conformance.model.cells import Catalogue, cell_id
from triton_conformance.model.config import CUDA
from triton_conformance.model.outcomes import FAILING, OUTCOMES

__all__ = ["MergeConflict", "RUN_FIELDS", "device_of", "devices_of", "cell_device", "is_cross_device",
           "merge_results", "update_results", "run_entry", "divergences", "divergence_line"]

# Environment fields every file of one run shares; a difference means they are not one run.
RUN_FIELDS = ("commit", "profile", "seed", "triton_conformance")


class MergeConflict(ValueError):
    """Files that are not parts of one run (or one matrix): the message names them and what differs."""


def device_of(doc: dict[str, Any]) -> str:
    """The device label of a single-device document."""
    env = doc.get("environment") or {}
    if env.get("device_label"):
        return str(env["device_label"])
    name = env.get("device_name")
    if env.get("device") == CUDA and name and name != CUDA:
        return str(name).removeprefix("NVIDIA ").strip()
    return str(env.get("device") or "unknown")


def is_cross_device(doc: dict[str, Any]) -> bool:
    return isinstance(doc.get("devices"), list) and bool(doc["devices"])


def devices_of(doc: dict[str, Any]) -> list[str]:
    """The labels of the devices a document holds, in its order."""
    if is_cross_device(doc):
        return [str(d.get("device")) for d in doc["devices"]]
    return [device_of(doc)]


def cell_device(r: dict[str, Any], doc: dict[str, Any]) -> str:
    """The device a cell of ``doc`` ran on."""
    return str(r.get("device") or device_of(doc))


def _device_envs(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if is_cross_device(doc):
        return [(str(d.get("device")), dict(d.get("environment") or {})) for d in doc["devices"]]
    return [(device_of(doc), dict(doc.get("environment") or {}))]


def _check_run_fields(named: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """A line for each RUN_FIELDS field (and schema/version) on which the files differ."""
    problems = []
    for field in ("schema", "version"):
        seen: dict[Any, list[str]] = {}
        for path, doc in named:
            seen.setdefault(doc.get(field), []).append(path)
        if len(seen) > 1:
            problems.append(f"{field} differs: " + "; ".join(f"{v!r} in {', '.join(p)}" for v, p in seen.items()))
    for field in RUN_FIELDS:
        seen = {}
        for path, doc in named:
            for _, env in _device_envs(doc):
                seen.setdefault(env.get(field), [])
                if path not in seen[env.get(field)]:
                    seen[env.get(field)].append(path)
        if len(seen) > 1:
            problems.append(f"{field} differs: " + "; ".join(f"{v!r} in {', '.join(p)}" for v, p in seen.items()))
    return problems


def _shards_line(device: str, shards: list[str]) -> str | None:
    """A warning when the shards of a device do not make a whole run (None if they do, or were not sharded)."""
    if not shards:
        return None
    counts = {s.partition("/")[2] for s in shards}
    if len(counts) > 1:
        return f"{device}: shards of different splits ({', '.join(sorted(shards))})"
    n = int(counts.pop())
    missing = [f"{k}/{n}" for k in range(1, n + 1) if f"{k}/{n}" not in shards]
    return f"{device}: shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing" if missing else None


def run_entry(doc: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    """The ``runs`` entry describing the run that wrote ``doc``."""
    env = doc.get("environment") or {}
    return {"id": run_id or doc.get("created"), "created": doc.get("created"), "argv": env.get("argv"),
            "profile": env.get("profile"), "seed": env.get("seed"), "commit": env.get("commit"),
            "cells": len(doc.get("results") or ())}


def _runs_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
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


class _Cells:
    """The cells of several documents, keyed by (subject, cell, device), a later file's over an earlier's;
    the runs that produced them, each id made unique; the devices, in the order first seen."""

    def __init__(self, named: list[tuple[str | None, dict[str, Any]]], *, conflicts: str,
                 device: str | None = None):
        """``conflicts``: what a cell with another outcome in a later file does: ``"raise"`` a MergeConflict,
        ``"note"`` it (the later file wins) or ``"replace"`` silently (a partial run over its file).
        ``device``: every cell's device label (files of one device), else each file's own."""
        self.cells: dict[tuple[str, str, str], tuple[str | None, dict[str, Any]]] = {}
        self.devices: dict[str, dict[str, Any]] = {}
        self.runs: list[dict[str, Any]] = []
        self.notes: list[str] = []
        taken: set[str] = set()
        for path, doc in named:
            for label, env in ([(device, doc.get("environment") or {})] if device else _device_envs(doc)):
                entry = self.devices.setdefault(label, {"device": label, "environment": {
                    k: v for k, v in env.items() if k != "shard"}, "files": [], "shards": []})
                if path is not None and path not in entry["files"]:
                    entry["files"].append(path)
                if env.get("shard") and env["shard"] not in entry["shards"]:
                    entry["shards"].append(str(env["shard"]))
            renames = {}
            for run in _runs_of(doc):
                renames[str(run["id"])] = unique = _unique(str(run["id"]), taken)
                taken.add(unique)
                self.runs.append(dict(run, id=unique) if path is None else dict(run, id=unique, file=path))
            default_run = next(iter(renames.values()))
            for r in doc.get("results") or ():
                label = device or cell_device(r, doc)
                key = (r["subject"], r["cell"], label)
                r = dict(r, device=label, run=renames.get(str(r.get("run")), default_run))
                if key in self.cells and self.cells[key][1]["outcome"] != r["outcome"] and conflicts != "replace":
                    other, was = self.cells[key]
                    line = (f"{cell_id(r['subject'], r['cell'])} on {label} is {was['outcome']} in {other} and "
                            f"{r['outcome']} in {path}")
                    if conflicts == "raise":
                        raise MergeConflict(f"conflicting results: {line}; expected each cell once per device "
                                            "(pass --allow-mixed to let the later file win)")
                    self.notes.append(line + f"; kept {path}'s")
                self.cells[key] = (path, r)

    def results(self) -> list[dict[str, Any]]:
        """The cells in report order; without their ``device`` field when there is one device."""
        order = {label: i for i, label in enumerate(self.devices)}
        results = sorted((r for _, r in self.cells.values()),
                         key=lambda r: (r.get("family") or "", r["subject"], r["cell"], order[r["device"]]))
        if len(self.devices) == 1:
            for r in results:
                del r["device"]
        return results

    def owning_runs(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The runs that still own a cell of ``results``, oldest first, each with its count of cells."""
        owners = Counter(r["run"] for r in results)
        return [dict(r, cells=owners[r["id"]]) for r in self.runs if owners[r["id"]]]


def _summary(results: list[dict[str, Any]]) -> dict[str, int]:
    counts = Counter(r["outcome"] for r in results)
    return {k: counts.get(k, 0) for k in OUTCOMES}


def update_results(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """The results file ``old`` with the cells of this run's document ``new`` over it.

    A partial run (``-k``, ``--maxfail``, ``--conformance-cell``, a subset of the subjects)
    replaces only the cells it ran: cells are keyed by (subject, cell), and the new run's
    wins.  The result keeps ``new``'s environment, catalogue and every other key, recomputes
    the summary, and records for every cell the run that produced it (``"run"``) and the runs
    that still own a cell (``"runs"``: id, created, argv, profile, seed, commit, cells).
    ``old`` must be of this run's device (the plugin's ``check_mergeable`` refuses others).
    """
    named = ([(None, old)] if old else []) + [(None, new)]
    merged = _Cells(named, conflicts="replace", device=device_of(new))
    results = merged.results()
    doc = {k: v for k, v in new.items() if k not in ("summary", "results", "runs")}
    doc["summary"] = _summary(results)
    doc["runs"] = merged.owning_runs(results)
    doc["results"] = results
    return doc


def merge_results(named: Iterable[tuple[str, dict[str, Any]]], *, allow_mixed: bool = False,
                  created: str | None = None) -> dict[str, Any]:
    """One document from ``(path, document)`` pairs: one run's shards, or a cross-device matrix.

    Raises :class:`MergeConflict` naming the files unless ``allow_mixed``.
    The result's ``merged`` entry lists the files, what ``allow_mixed``
    let through, and any shards missing.
    """
    named = list(named)
    if not named:
        raise MergeConflict("no results files to merge")
    notes = _check_run_fields(named)
    if notes and not allow_mixed:
        raise MergeConflict("the files are not parts of one run: " + "; ".join(notes)
                            + " (pass --allow-mixed to merge them anyway)")
    merged = _Cells(named, conflicts="note" if allow_mixed else "raise")
    devices = merged.devices
    results = merged.results()
    for entry in devices.values():
        entry["cells"] = sum(1 for r in results if r.get("device", entry["device"]) == entry["device"])
    missing = [line for line in (_shards_line(d, e["shards"]) for d, e in devices.items()) if line]
    first = named[0][1]
    doc: dict[str, Any] = {"schema": first.get("schema"), "version": first.get("version"),
                           "created": created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if len(devices) == 1:  # one run: an ordinary document, as if it had run whole
        (entry,) = devices.values()
        doc["environment"] = dict(entry["environment"])
    else:
        envs = [e["environment"] for e in devices.values()]
        shared = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
        shared["device"] = "+".join(devices)
        shared["device_name"] = ", ".join(devices)
        doc["environment"] = shared
        doc["devices"] = list(devices.values())
    doc["summary"] = _summary(results)
    catalogues = [Catalogue.from_dict(d.get("cells")) for _, d in named if d.get("cells")]
    if catalogues:  # every file's cells explained: their catalogues joined, in the order first seen
        doc["cells"] = Catalogue.of(dim for c in catalogues for dim in c.dimensions).to_dict()
    doc["runs"] = merged.owning_runs(results)
    doc["merged"] = {"files": [p for p, _ in named], "mixed": notes + merged.notes, "missing_shards": missing}
    doc["results"] = results
    if len(devices) > 1:
        doc["divergences"] = divergences(doc)
    return doc


def divergences(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells whose verdicts differ between devices, a finding of their own.

    Each is ``{"subject", "family", "cell", "kind", "outcomes": {device: outcome},
    "findings": {device: finding}, "dims"}``, where ``kind`` is ``"verdict"``
    when the cell passes on some device and fails on another, ``"outcome"``
    when the verdicts differ otherwise (refused on one and computed on another;
    wrong on one and a crash on another).  Skipped cells, and cells on one
    device only, are never divergent.  ``dims``: a failing device's
    counterexample dims, the spec to try on the others.
    """
    if not is_cross_device(doc):
        return []
    by_cell: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in doc.get("results") or ():
        if r["outcome"] != "skipped":
            by_cell.setdefault((r["subject"], r["cell"]), {})[cell_device(r, doc)] = r
    order = {label: i for i, label in enumerate(devices_of(doc))}
    out = []
    for (subject, cell), per in sorted(by_cell.items()):
        outcomes = {d: per[d]["outcome"] for d in sorted(per, key=lambda d: order.get(d, len(order)))}
        if len(per) < 2 or len(set(outcomes.values())) < 2:
            continue
        failing = [d for d, o in outcomes.items() if o in FAILING]
        kind = "verdict" if failing and len(failing) < len(outcomes) else "outcome"
        cx = next((per[d].get("counterexample") for d in failing if isinstance(per[d].get("counterexample"), dict)),
                  None)
        out.append({"subject": subject, "family": next(iter(per.values())).get("family") or subject, "cell": cell,
                    "kind": kind, "outcomes": outcomes,
                    "findings": {d: per[d].get("finding") for d in outcomes if per[d].get("finding")},
                    "dims": (cx or {}).get("dims")})
    return out


def divergence_line(d: dict[str, Any]) -> str:
    """``add[layout:transposed]: honoured on interpreter, wrong (mismatch) on H200 at dims={'N': 6}``."""
    parts = [f"{o}{' (' + d['findings'][dev] + ')' if d.get('findings', {}).get(dev) else ''} on {dev}"
             for dev, o in d["outcomes"].items()]
    dims = f" at dims={d['dims']}" if d.get("dims") else ""
    what = "verdicts differ" if d["kind"] == "verdict" else "outcomes differ"
    return f"{cell_id(d['subject'], d['cell'])}: {', '.join(parts)}{dims} ({what})"
