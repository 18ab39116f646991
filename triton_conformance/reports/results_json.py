"""The results JSON: a versioned document that every other report is rendered from.

Schema ``triton-conformance/results`` version 1::

    {
      "schema": "triton-conformance/results", "version": 1,
      "created": "2026-11-30T12:00:00+00:00",
      "environment": {"device": "interpreter", "device_name": "cpu", "triton": "3.9.0",
                      "torch": "2.13.0", "python": "3.11.7", "hypothesis": "...",
                      "profile": "ci", "seed": null, "platform": "...", "host": "...",
                      "commit": "abc123", "triton_conformance": "0.1.0"},
      "summary": {"honoured": 120, "rejected": 9, "wrong": 3, ...},
      "cells": [{"name": "layout", "summary": "input layout",
                 "classes": [["contiguous", "row-major ..."], ...]}, ...],
      "results": [<CellResult>, ...]
    }

``cells`` is the run's catalogue of cells (``Catalogue.to_dict()``, the live
one the engine's cell kinds declare): the matrix order and a one-line
explanation of each cell.  The reports read only this one (:func:`catalogue_of`).
A document without it (written before the catalogue travelled in the results,
or by hand) is shown with its cells in name order and no explanations: no
second copy of the catalogue is kept here to go stale.

A CellResult holds subject, family, cell, outcome, finding, message, details,
counterexample (a Spec as a dict, plus ``"tensors"``: each input's real shape, strides,
storage offset and dtype), reproducer, examples, rejected_examples,
duration_s, compiles and expected_failure.  A measured ``performance`` cell
(CUDA only) carries its figures in details: achieved, unit (GB/s or TFLOP/s),
peak, fraction, kernel_ms, baseline_ms, speedup, bound, bytes, flops, dims,
dtypes, reps, timer and peaks (see triton_conformance.conformance.kinds.performance.cell).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import subprocess
import sys
from collections import Counter
from importlib import metadata
from typing import Iterable

from triton_conformance.version import __version__
from triton_conformance.model.cells import Catalogue
from triton_conformance.model.config import on_cuda
from triton_conformance.model.outcomes import OUTCOMES, CellResult

__all__ = ["SCHEMA", "VERSION", "environment", "results_document", "write_results", "read_results",
           "check_cells", "catalogue_of"]

SCHEMA = "triton-conformance/results"
VERSION = 1


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment(*, device: str, profile: str, seed: int | None, device_name: str | None = None,
                compat: Iterable[str] = (), device_label: str | None = None) -> dict:
    """What the run ran on: versions, host, commit; ``compat``: the interpreter shims the kernels ran with;
    ``device_label``: the device's name in a cross-device matrix."""
    return {
        "device": device,
        "device_name": device_name or (device if on_cuda(device) else "cpu (Triton interpreter)"),
        "triton": _version("triton"),
        "torch": _version("torch"),
        "python": platform.python_version(),
        "hypothesis": _version("hypothesis"),
        "profile": profile,
        "seed": seed,
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "commit": _commit(),
        "triton_conformance": __version__,
        "argv": sys.argv[1:],
        "compat": list(compat),
        "device_label": device_label,
    }


def results_document(results: Iterable[CellResult], env: dict, catalogue: Catalogue | None = None) -> dict:
    """The results document; with ``catalogue``, it also carries the cells' order and explanations."""
    results = sorted(results, key=lambda r: (r.family, r.subject, r.cell))
    summary = Counter(r.outcome for r in results)
    doc = {
        "schema": SCHEMA,
        "version": VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": env,
        "summary": {k: summary.get(k, 0) for k in OUTCOMES},
    }
    if catalogue is not None:
        doc["cells"] = catalogue.to_dict()
    doc["results"] = [r.to_dict() for r in results]
    return doc


def write_results(path: str, document: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=1, default=str)
    os.replace(tmp, path)


def read_results(path: str) -> dict:
    """Load a results file, with clear errors for missing, malformed or foreign files."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise FileNotFoundError(f"results file {path!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"results file {path!r} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"results file {path!r}: schema={doc.get('schema') if isinstance(doc, dict) else None!r}, "
                         f"expected {SCHEMA!r}")
    if doc.get("version") != VERSION:
        raise ValueError(f"results file {path!r}: version={doc.get('version')!r}, expected {VERSION}")
    return doc


def catalogue_of(document: dict) -> Catalogue:
    """The catalogue ``document`` was written with; an empty one if it carries none (or a malformed one)."""
    try:
        return Catalogue.from_dict(document.get("cells"))
    except (KeyError, TypeError, ValueError):
        return Catalogue()


def check_cells(doc: dict, path: str) -> dict:
    """Raise ValueError naming the first cell that lacks a subject, cell or known outcome; else return ``doc``."""
    results = doc.get("results")
    if not isinstance(results, list):
        raise ValueError(f"results file {path!r}: results={type(results).__name__}, expected a list of cells")
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("subject", "cell", "outcome")):
            raise ValueError(f"results file {path!r}: results[{i}] lacks a subject, cell or outcome string")
        if r["outcome"] not in OUTCOMES:
            raise ValueError(f"results file {path!r}: results[{i}].outcome={r['outcome']!r}, "
                             f"expected one of {OUTCOMES}")
    return doc
