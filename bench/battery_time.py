"""Time the whole conformance battery over kernels_under_test, as the main job runs it.

    python bench/battery_time.py [--runs 1] [--device interpreter] [--profile ci] [--workers 2]

Prints the wall time of each run, the median, the slowest cells, and the time
and Triton compilations per subject from the results JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--device", default="interpreter")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--workers", default="2")
    parser.add_argument("--results", default=os.path.join(ROOT, "conformance-results", "battery.json"))
    parser.add_argument("--plugin", action="store_true", help="load the plugin with -p (package not installed)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression: only these cells "
                        "(e.g. 'add and layout' for a quick run)")
    args = parser.parse_args()
    walls = []
    for i in range(args.runs):
        cmd = [sys.executable, "-m", "pytest", "--conformance-only", f"--conformance-device={args.device}",
               f"--conformance-profile={args.profile}", f"--conformance-results={args.results}", "-q",
               "-p", "no:cacheprovider"]
        if args.plugin:
            cmd += ["-p", "triton_conformance.plugin"]
        if args.workers not in ("0", "1"):
            cmd += ["-n", args.workers]
        if args.keyword:
            cmd += ["-k", args.keyword]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t0)
        last = (proc.stdout.strip().splitlines() or [proc.stderr.strip()[-500:]])[-1]
        print(f"run {i + 1}: {walls[-1]:.1f} s wall, exit {proc.returncode}: {last}")
    print(f"median wall time over {len(walls)} run(s): {statistics.median(walls):.1f} s")
    if not os.path.exists(args.results):
        raise SystemExit(f"pytest wrote no results at {args.results}: {(proc.stdout + proc.stderr)[-3000:]}")
    with open(args.results) as f:
        doc = json.load(f)
    per_subject = collections.defaultdict(lambda: [0.0, 0, 0])
    for r in doc["results"]:
        row = per_subject[r["subject"]]
        row[0] += r["duration_s"]
        row[1] += r["compiles"] or 0
        row[2] += 1
    print(f"\n{'subject':26s} {'cells':>5s} {'cell-seconds':>12s} {'compiles':>8s}")
    for name, (secs, compiles, cells) in sorted(per_subject.items()):
        print(f"{name:26s} {cells:5d} {secs:12.1f} {compiles:8d}")
    slow = sorted(doc["results"], key=lambda r: -r["duration_s"])[:8]
    print("\nslowest cells:")
    for r in slow:
        print(f"  {r['subject']}[{r['cell']}]: {r['duration_s']:.1f} s, {r['outcome']}")
    print("\nsummary:", doc["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
