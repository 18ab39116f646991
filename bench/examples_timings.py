"""An example library's run, before against after: its time, its slowest cells, and every verdict change.

Usage (results JSON of ``triton-conformance run --results``, one pair per library)::

    python bench/examples_timings.py before.json after.json [--over 30] [--slowest 5]

Prints, for each side, the cells, their summed time, the cells over ``--over`` seconds and the
slowest; then each cell whose outcome, finding or example count differs (with the cut or over-cost
discards the interpreter's meter recorded, and the units it spent), and the cells whose
interpreted work passed their pool.  Wall time is the run's own: pass it with the log, not here.
"""

from __future__ import annotations

import argparse
import json
import sys


_SLACK = 1024  # units: a cut lands one operation past the pool


def _cells(path: str) -> dict[tuple[str, str], dict]:
    with open(path) as f:
        return {(r["subject"], r["cell"]): r for r in json.load(f)["results"]}


def _cost(r: dict) -> dict:
    return (r.get("details") or {}).get("interpreter_cost") or {}


def _side(name: str, cells: dict[tuple[str, str], dict], over: float, slowest: int) -> None:
    timed = sorted(cells.values(), key=lambda r: -(r.get("duration_s") or 0))
    total = sum(r.get("duration_s") or 0 for r in timed)
    long = [r for r in timed if (r.get("duration_s") or 0) > over]
    past_pool = [r for r in timed if _cost(r).get("spent", 0) > _cost(r).get("pool", 1 << 62) + _SLACK]
    print(f"{name}: {len(cells)} cells, {total:.1f} s summed cell time, {len(long)} over {over:g} s, "
          f"{len(past_pool)} past their interpreter pool")
    for r in timed[:max(slowest, len(long))]:
        print(f"  {r['duration_s']:7.1f} s  {r['subject']}[{r['cell']}]  {r['outcome']}, {r.get('examples')} examples"
              f"{', spent ' + format(_cost(r)['spent'], ',') if _cost(r) else ''}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--over", type=float, default=30.0, help="seconds: cells over it are listed")
    parser.add_argument("--slowest", type=int, default=5)
    args = parser.parse_args(argv)
    before, after = _cells(args.before), _cells(args.after)
    _side("before", before, args.over, args.slowest)
    _side("after", after, args.over, args.slowest)
    changed = 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            print(f"  only {'after' if a is None else 'before'}: {key[0]}[{key[1]}]")
            changed += 1
            continue
        if (a["outcome"], a.get("finding"), a.get("examples")) == (b["outcome"], b.get("finding"), b.get("examples")):
            continue
        changed += 1
        cut = (b.get("details") or {}).get("cut_discarded", 0)
        print(f"  {key[0]}[{key[1]}]: {a['outcome']}/{a.get('finding')} {a.get('examples')} examples -> "
              f"{b['outcome']}/{b.get('finding')} {b.get('examples')} examples; {cut} cut; spent "
              f"{_cost(a).get('spent', 0):,} -> {_cost(b).get('spent', 0):,}")
    print(f"{changed} of {len(set(before) | set(after))} cells differ in outcome, finding or examples")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
