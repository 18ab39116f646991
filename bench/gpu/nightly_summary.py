"""Summarise nightly results files: what the scale issue asks the nightly on one GPU to show.

    python bench/gpu/nightly_summary.py A.json [B.json ...]

For each file: cells, summed cell time, examples per searched cell (minimum and
median, and passing cells under 30), starved cells (skipped for the compile
budget) with their reason, compiles per subject, and what the classes bought.
With two or more files, the cells whose outcome, finding or counterexample dims
differ from the first file's.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict

SEARCHED = ("layout:", "dtype:", "shape:", "values:", "mask:", "memory", "determinism", "grad:")
UNSEARCHED = ("shape:large-index", "grad:large-index")


def searched(cell: str) -> bool:
    return cell.startswith(SEARCHED) and cell not in UNSEARCHED


def summary(path: str) -> dict:
    doc = json.load(open(path))
    rows = doc["results"]
    ran = [r for r in rows if searched(r["cell"]) and r["outcome"] != "skipped"]
    examples = [r.get("examples") or 0 for r in ran]
    under = [f"{r['subject']}[{r['cell']}]" for r in ran if r["outcome"] in ("honoured", "rejected", "accepted")
             and (r.get("examples") or 0) < 30]
    starved = [(f"{r['subject']}[{r['cell']}]", r["message"]) for r in rows if r["outcome"] == "skipped"
               and any(w in r["message"] for w in ("compile budget", "compiled class", "compiled-class",
                                                   "over a budget"))]
    # A passing cell under 30 examples must say why: a budget's discards, or where Hypothesis stopped.
    unexplained = [name for name, r in ((f"{r['subject']}[{r['cell']}]", r) for r in ran)
                   if name in under and "discarded" not in r["message"] and "ended the search" not in r["message"]]
    compiles, seconds = defaultdict(int), defaultdict(float)
    for r in rows:
        compiles[r["subject"]] += r.get("compiles") or 0
        seconds[r["subject"]] += r.get("duration_s") or 0
    past = defaultdict(int)
    for r in rows:
        past[r["subject"]] += ((r.get("details") or {}).get("specializations") or {}).get("compiled_past_budget", 0)
    spec = defaultdict(int)
    for r in rows:
        for k, v in ((r.get("details") or {}).get("specializations") or {}).items():
            spec[k] += v
    return {"path": path, "cells": len(rows), "cell_seconds": round(sum(seconds.values()), 1),
            "searched_ran": len(ran), "examples_min": min(examples, default=0),
            "examples_median": statistics.median(examples) if examples else 0, "under_30": under, "unexplained": unexplained,
            "past_budget": {k: v for k, v in past.items() if v},
            "starved": starved, "compiles": dict(compiles), "subject_seconds": {k: round(v, 1) for k, v in
            sorted(seconds.items(), key=lambda kv: -kv[1])}, "specializations": dict(spec),
            "outcomes": {(r["subject"], r["cell"]): (r["outcome"], r.get("finding"), json.dumps(
                (r.get("counterexample") or {}).get("dims"))) for r in rows},
            "durations": {(r["subject"], r["cell"]): r.get("duration_s") or 0 for r in rows}}


def main(paths: list[str]) -> None:
    first = None
    for path in paths:
        s = summary(path)
        print(f"{path}: {s['cells']} cells, summed cell time {s['cell_seconds']} s")
        print(f"  searched cells that ran: {s['searched_ran']}; examples min {s['examples_min']}, median "
              f"{s['examples_median']}; passing cells under 30 examples: {len(s['under_30'])} {s['under_30'][:8]}, "
              f"of which without a reason: {s['unexplained']}")
        print(f"  starved cells: {len(s['starved'])}")
        for name, message in s["starved"]:
            print(f"    {name}: {message[:300]}")
        print(f"  compiles per subject: {s['compiles']}; of them past the budget: {s['past_budget']}")
        print(f"  cell seconds per subject: {s['subject_seconds']}")
        print(f"  specializations: {s['specializations']}")
        if first is None:
            first = s
            continue
        a, b = first["outcomes"], s["outcomes"]
        differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        print(f"  against {first['path']}: {len(set(a) & set(b))} common cells, {len(differ)} differ")
        for k in differ:
            print(f"    {k[0]}[{k[1]}]: {a.get(k)} -> {b.get(k)}")


if __name__ == "__main__":
    main(sys.argv[1:])
