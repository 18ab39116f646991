"""Merging results files: the shards of one run into the whole run, and devices into a cross-device matrix.

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

from triton_conformance.model.cells import cell_id
from triton_conformance.model.config import CUDA
from triton_conformance.model.outcomes import FAILING, OUTCOMES

__all__ = ["MergeConflict", "RUN_FIELDS", "device_of", "devices_of", "cell_device", "is_cross_device",
           "merge_results", "divergences", "divergence_line"]

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
    cells: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
    devices: dict[str, dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    taken: set[str] = set()
    catalogue = None
    for path, doc in named:
        if catalogue is None and doc.get("cells"):
            catalogue = doc["cells"]
        for label, env in _device_envs(doc):
            entry = devices.setdefault(label, {"device": label, "environment": {k: v for k, v in env.items()
                                                                              if k != "shard"},
                                               "files": [], "shards": []})
            if path not in entry["files"]:
                entry["files"].append(path)
            if env.get("shard") and env["shard"] not in entry["shards"]:
                entry["shards"].append(str(env["shard"]))
        renames = {}
        for run in doc.get("runs") or [{"id": doc.get("created"), "created": doc.get("created")}]:
            rid = str(run.get("id"))
            unique, n = rid, 1
            while unique in taken:
                n += 1
                unique = f"{rid}#{n}"
            taken.add(unique)
            renames[rid] = unique
            runs.append(dict(run, id=unique, file=path))
        default_run = next(iter(renames.values()))
        for r in doc.get("results") or ():
            label = cell_device(r, doc)
            key = (r["subject"], r["cell"], label)
            r = dict(r, device=label, run=renames.get(str(r.get("run")), default_run))
            if key in cells and cells[key][1]["outcome"] != r["outcome"]:
                other, was = cells[key]
                line = (f"{cell_id(r['subject'], r['cell'])} on {label} is {was['outcome']} in {other} and "
                        f"{r['outcome']} in {path}")
                if not allow_mixed:
                    raise MergeConflict(f"conflicting results: {line}; expected each cell once per device "
                                        "(pass --allow-mixed to let the later file win)")
                notes.append(line + f"; kept {path}'s")
            cells[key] = (path, r)
    order = {label: i for i, label in enumerate(devices)}
    results = sorted((r for _, r in cells.values()),
                     key=lambda r: (r.get("family") or "", r["subject"], r["cell"], order[r["device"]]))
    counts = Counter(r["outcome"] for r in results)
    for entry in devices.values():
        entry["cells"] = sum(1 for r in results if r["device"] == entry["device"])
    missing = [line for line in (_shards_line(d, e["shards"]) for d, e in devices.items()) if line]
    first = named[0][1]
    doc: dict[str, Any] = {"schema": first.get("schema"), "version": first.get("version"),
                           "created": created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    owners = Counter(r["run"] for r in results)
    runs = [dict(r, cells=owners[r["id"]]) for r in runs if owners[r["id"]]]
    if len(devices) == 1:  # one run: an ordinary document, as if it had run whole
        (entry,) = devices.values()
        doc["environment"] = dict(entry["environment"])
        for r in results:
            del r["device"]
    else:
        envs = [e["environment"] for e in devices.values()]
        shared = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
        shared["device"] = "+".join(devices)
        shared["device_name"] = ", ".join(devices)
        doc["environment"] = shared
        doc["devices"] = list(devices.values())
    doc["summary"] = {k: counts.get(k, 0) for k in OUTCOMES}
    if catalogue is not None:
        doc["cells"] = catalogue
    doc["runs"] = runs
    doc["merged"] = {"files": [p for p, _ in named], "mixed": notes, "missing_shards": missing}
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
