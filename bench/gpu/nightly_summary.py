"""Summarise nightly results files: what the scale issue asks the nightly on one GPU to show.

    python bench/gpu/nightly_summary.py [--workers W] [--log PYTEST.log] A.json [B.json ...]

For each file: cells, summed cell time, examples per searched cell (minimum and
median, and passing cells under 30), starved cells (skipped for the compile
budget) with their reason, compiles per subject, and what the classes bought.
Then the cost model of docs/performance.md: C, C / W, L (the longest subject),
the parts the split would cut (plugin/splitting.py, from this file's own
durations), the makespan of the cells with and without those parts (units
costliest first, each to the worker that frees first), a cell's time split
into examples and compiles (least squares of duration on examples and
compiles over the cells that ran), and with ``--log`` (the run's pytest
output) the start-up and tail S = pytest time - makespan.
With two or more files, the cells whose outcome, finding or counterexample dims
differ from the first file's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # the checkout's package

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


def _solve3(a: list[list[float]], b: list[float]) -> list[float]:
    """Three linear equations by Cramer's rule."""
    def det(m):  # noqa: ANN001, ANN202
        return (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))
    d = det(a)
    return [det([[b[i] if j == k else a[i][j] for j in range(3)] for i in range(3)]) / d for k in range(3)]


def cost_model(path: str, workers: int, log: str | None) -> list[str]:
    """The lines of the cost model for one results file (see the module's docstring)."""
    from triton_conformance.plugin.splitting import makespan, split_subjects

    rows = json.load(open(path))["results"]
    durations = {(r["subject"], r["cell"]): r.get("duration_s") or 0.0 for r in rows}
    by_subject = defaultdict(float)
    for (subject, _), d in durations.items():
        by_subject[subject] += d
    total = sum(durations.values())
    longest = max(by_subject, key=by_subject.get)
    parts = split_subjects(list(durations), workers, durations)
    units = [v for k, v in by_subject.items() if k not in parts]
    units += [sum(durations[(k, c)] for c in part) for k, cut in parts.items() for part in cut]
    whole, split = makespan(list(by_subject.values()), workers), makespan(units, workers)
    lines = [f"  cost model at W={workers}: C {total:.1f} s, C/W {total / workers:.1f} s, L {by_subject[longest]:.1f} s "
             f"({longest}); makespan {whole:.1f} s whole, {split:.1f} s with the parts",
             "  parts: " + ("; ".join(f"{k}: " + " + ".join(f"{len(p)} cells {sum(durations[(k, c)] for c in p):.1f} s"
                                                           for p in cut) for k, cut in parts.items()) or "none")]
    ran = [r for r in rows if r["outcome"] != "skipped" and r.get("duration_s")]
    x = [(float(r.get("examples") or 0), float(r.get("compiles") or 0), 1.0) for r in ran]
    y = [r["duration_s"] for r in ran]
    if len(ran) >= 3:
        ata = [[sum(a[i] * a[j] for a in x) for j in range(3)] for i in range(3)]
        aty = [sum(a[i] * v for a, v in zip(x, y)) for i in range(3)]
        per_example, per_compile, per_cell = _solve3(ata, aty)
        examples, compiles = sum(a[0] for a in x), sum(a[1] for a in x)
        lines.append(f"  a cell's time by least squares over {len(ran)} cells that ran: {per_example * 1e3:.1f} ms an "
                     f"example ({examples:.0f}: {per_example * examples:.0f} s), {per_compile * 1e3:.0f} ms a compile "
                     f"({compiles:.0f}: {per_compile * compiles:.0f} s), {per_cell * 1e3:.0f} ms a cell")
    if log:
        found = re.findall(r"(?:passed|failed)\b[^\n]* in ([0-9.]+)s", open(log, errors="replace").read())
        if found:
            pytest_s = float(found[0])  # pytest's own summary line
            lines.append(f"  pytest {pytest_s:.1f} s: start-up and tail S = {pytest_s - split:.1f} s beyond the makespan "
                         f"with the parts ({pytest_s - whole:.1f} s beyond the whole subjects' makespan)")
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=12, help="xdist workers the run had [12]")
    parser.add_argument("--log", default=None, help="the run's pytest output, for its time (the first file's)")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    first = None
    for n, path in enumerate(args.paths):
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
        for line in cost_model(path, args.workers, args.log if n == 0 else None):
            print(line)
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
