"""Where a run's wall time went, from the files ``bench/gpu/timeline.py`` wrote.

    python bench/gpu/timeline_summary.py TIMELINE_DIR [RESULTS.json]

Times are seconds after the controller process started.  For the workers:
when each started, was configured, had collected, spawned and got its first
cell worker, started its first cell and ended its last; the idle time between
its cells; and, with the results file, each item's wall time less the cell's
own ``duration_s`` (what a cell costs outside the measured cell: the round
trip, pytest's reports).
"""

from __future__ import annotations

import collections
import glob
import json
import os
import statistics
import sys


def _load(folder: str) -> dict[str, list[dict]]:
    by_process: dict[str, list[dict]] = collections.defaultdict(list)
    for path in glob.glob(os.path.join(folder, "*.jsonl")):
        with open(path) as lines:
            for line in lines:
                event = json.loads(line)
                by_process[f"{event['who']}-{event['pid']}"].append(event)
    return by_process


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):6.2f}  min {min(values):6.2f}  max {max(values):6.2f}"


def main(folder: str, results: str | None = None) -> None:
    processes = _load(folder)
    controller = next((events for name, events in processes.items() if name.startswith("controller")), None)
    if controller is None:
        raise SystemExit(f"{folder}: no controller events")
    t0 = next(e["started"] for e in controller if e["event"] == "process") or controller[0]["t"]
    first = {e["event"]: e for e in reversed(controller)}
    print(f"controller: imported the timeline plugin at {first['process']['t'] - t0:.2f} s, configured at "
          f"{first['configured']['t'] - t0:.2f} s, finished at {first['finished']['t'] - t0:.2f} s")
    marks = [(label, first[key]["t"] - t0) for key, label in (
        ("sessionstart", "session start"), ("environment-wait", "waits for the environment check"),
        ("environment-done", "has the environment check"), ("sessionstarted", "session started")) if key in first]
    if marks:
        print("controller: " + ", ".join(f"{label} at {at:.2f} s" for label, at in marks))
    phases: dict[str, list[float]] = collections.defaultdict(list)
    idle, walls, ends = [], {}, []
    for name, events in sorted(processes.items()):
        if name.startswith("controller"):
            continue
        events.sort(key=lambda e: e["t"])
        at = {}
        for e in events:
            at.setdefault(e["event"], e["t"] - t0)
        started = next((e["started"] for e in events if e["event"] == "process" and e.get("started")), None)
        if started:
            phases["1 process started"].append(started - t0)
        for key, label in (("configured", "2 configured"), ("collected", "3 collected"),
                           ("spawn", "4 first cell worker spawned"), ("ready", "5 first cell worker ready"),
                           ("start", "6 first cell started")):
            if key in at:
                phases[label].append(at[key])
        items = [e for e in events if e["event"] in ("start", "end")]
        opened, gap_from = {}, None
        for e in items:
            if e["event"] == "start":
                opened[e["item"]] = e["t"]
                if gap_from is not None:
                    idle.append(e["t"] - gap_from)
            else:
                walls[e["item"]] = e["t"] - opened.pop(e["item"], e["t"])
                gap_from = e["t"]
        if gap_from is not None:
            phases["7 last cell ended"].append(gap_from - t0)
            ends.append(gap_from - t0)
        spawns = sum(1 for e in events if e["event"] == "spawn")
        phases["8 cell workers spawned (count)"].append(float(spawns))
    for label in sorted(phases):
        print(f"  workers' {label:34s} {_spread(phases[label])}")
    print(f"  gaps between a worker's cells: {len(idle)}, {sum(idle):.2f} s in all, {_spread(idle)}")
    if ends:
        print(f"  the controller finished {first['finished']['t'] - t0 - max(ends):.2f} s after the last cell ended")
    if results:
        with open(results) as handle:
            cells = json.load(handle)["results"]
        durations = {f"{c['subject']}[{c['cell']}]": c["duration_s"] or 0.0 for c in cells}
        outside = []
        for item, wall in walls.items():
            key = next((k for k in durations if item.endswith(k)), None)
            if key is not None:
                outside.append(wall - durations[key])
        print(f"  items' wall time {sum(walls.values()):.1f} s; outside the cells' duration_s: "
              f"{sum(outside):.1f} s over {len(outside)} items, {_spread(outside)}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
