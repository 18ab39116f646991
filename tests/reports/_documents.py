"""Synthetic results documents, shaped like those a run writes."""

from __future__ import annotations

import copy
import functools
from typing import Any

ENV = {"device": "interpreter", "device_name": "cpu (Triton interpreter)", "triton": "3.9.0", "torch": "2.13.0",
       "python": "3.11.7", "hypothesis": "6.170.0", "profile": "ci", "seed": 1234, "platform": "Linux",
       "host": "ci-host", "commit": "abc1234", "triton_conformance": "0.1.0", "argv": []}

FAILING_DETAILS = {"kind": "mismatch", "message": "output: 1 of 1025 elements outside tolerance",
                   "max_abs_err": 0.000629, "max_rel_err": 1.0, "first_index": [0, 1024], "mismatched": 1,
                   "total": 1025, "tolerance": "|err| <= 6.12e-05 + 0.00392 * |ref| (dtype)"}
COUNTEREXAMPLE = {"dims": {"N": 1025, "M": 1}, "dtypes": {"x": "float16"},
                  "layouts": {"x": {"kind": "offset", "perm": None, "steps": None, "pad": 0, "offset": 1,
                                    "broadcast": [], "odd_stride": 0}},
                  "scalars": {}, "values": "ordinary", "mask": None, "seed": 7}
REPRODUCER = ("# k[shape:beyond-block]: wrong (mismatch)\nimport torch\n"
              "from triton_conformance.conformance.replay import replay\n"
              "inputs, outputs = replay('mod', 'k', {'dims': {'N': 1025}}, device='cpu')\n")


def result(subject: str, cell: str, outcome: str, *, family: str = "fam", **extra: Any) -> dict[str, Any]:
    r = {"subject": subject, "family": family, "cell": cell, "outcome": outcome, "finding": None,
         "message": f"{outcome} message", "details": {}, "counterexample": None, "reproducer": None,
         "examples": 10, "rejected_examples": 0, "duration_s": 0.5, "compiles": 1, "expected_failure": None}
    if outcome in ("wrong", "unsafe", "crash", "compile-error", "timeout"):
        r.update(finding="mismatch", details=copy.deepcopy(FAILING_DETAILS),
                 counterexample=copy.deepcopy(COUNTEREXAMPLE), reproducer=REPRODUCER)
    r.update(extra)
    return r


@functools.lru_cache(maxsize=1)
def live_catalogue() -> list:
    """The catalogue a run writes into its document: the engine's cell kinds' (reports read only this one)."""
    from triton_conformance.conformance.kinds import catalogue

    return catalogue().to_dict()


def document(results: list[dict[str, Any]], **env: Any) -> dict[str, Any]:
    summary: dict[str, int] = {}
    for r in results:
        summary[r["outcome"]] = summary.get(r["outcome"], 0) + 1
    return {"schema": "triton-conformance/results", "version": 1, "created": "2026-11-30T12:00:00+00:00",
            "environment": {**ENV, **env}, "summary": summary, "cells": copy.deepcopy(live_catalogue()),
            "results": results}
