"""Run the battery repeatedly with fresh seeds and count false alarms.

    python bench/false_alarms.py --runs 20 [--workers 2] [--profile dev] [--device interpreter]
    python bench/false_alarms.py --runs 20 --workers 1 --modules tests.zoo.zoo_gradients,tests.zoo.zoo_autotune \
        -k "(grad: or autotune:) and not (zoo_rms_norm_ or unmasked or no_reset or omits_n)"

A false alarm is a failing cell (not honoured, rejected, accepted or skipped) of a
subject not marked as a known bug.  ``--modules`` adds subject modules to the
repository's own (the zoo's correct twins live beside its bugs).  Each
run draws a new seed (printed, so any alarm can be replayed with
``--conformance-seed``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSING = ("honoured", "rejected", "accepted", "skipped")  # accepted: computed right beyond the claim


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", default="2")
    parser.add_argument("--profile", default="dev", help="a non-derandomized profile, so seeds matter")
    parser.add_argument("--device", default="interpreter")
    parser.add_argument("--plugin", action="store_true", help="load the plugin with -p (package not installed)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression: only these cells "
                        "(e.g. 'add and layout' for a quick run)")
    parser.add_argument("--modules", default="", help="comma-separated subject modules to add to conftest.py's "
                        "(e.g. tests.zoo.zoo_autotune)")
    args = parser.parse_args()
    alarms, cells, known = [], 0, 0
    rng = random.SystemRandom()
    for i in range(args.runs):
        seed = rng.randrange(2**32)
        out = os.path.join(tempfile.mkdtemp(), "results.json")
        cmd = [sys.executable, "-m", "pytest", "--conformance-only", f"--conformance-device={args.device}",
               f"--conformance-profile={args.profile}", f"--conformance-seed={seed}",
               f"--conformance-results={out}", "-q", "-p", "no:cacheprovider"]
        if args.plugin:
            cmd += ["-p", "triton_conformance.plugin"]
        if args.workers not in ("0", "1"):
            cmd += ["-n", args.workers]
        if args.keyword:
            cmd += ["-k", args.keyword]
        if args.modules:  # the ini option's lines are added to the conftest hook's modules
            cmd += ["-o", "conformance_modules=" + "\n".join(args.modules.split(","))]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if not os.path.exists(out):
            raise SystemExit(f"run {i + 1}: pytest wrote no results (exit {proc.returncode}):\n"
                             f"{(proc.stdout + proc.stderr)[-3000:]}")
        with open(out) as f:
            doc = json.load(f)
        bad = [r for r in doc["results"] if r["outcome"] not in PASSING]
        real = [r for r in bad if not r["expected_failure"]]
        cells += len(doc["results"])
        known += len(bad) - len(real)
        alarms += [(seed, r) for r in real]
        print(f"run {i + 1:2d} seed {seed:10d}: {len(doc['results'])} cells, {len(real)} false alarms, "
              f"{len(bad) - len(real)} known-bug failures, {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"\n{args.runs} runs, {cells} cells: {len(alarms)} false alarms on correct kernels "
          f"({known} failures of known-buggy subjects, as expected)")
    for seed, r in alarms:
        print(f"  seed {seed}: {r['subject']}[{r['cell']}] {r['outcome']} ({r['finding']}): {r['message'][:200]}")
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
