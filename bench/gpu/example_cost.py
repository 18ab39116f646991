"""Where a nightly cell's time goes on CUDA: per example, per stage of an example, discarded examples, Hypothesis.

Usage (from the repository root, on a machine with a GPU)::

    python bench/gpu/example_cost.py [--subjects add,softmax] [--budget 16] [--jobs 4] [--out DIR]
    python bench/gpu/example_cost.py --device interpreter --profile ci --subjects add   # a smoke test on a CPU

Each subject runs every cell of the nightly profile (``--profile``) in its
own child process (``--jobs`` of them at once, all on the first visible GPU).
Nothing in the engine is patched:

- an :class:`~triton_conformance.conformance.observe.Observer` times every
  example the search runs (``example_finished``'s seconds), by verdict, with
  the examples the compile budget discards apart;
- a cProfile of each ``run_cell``, read back for a few named functions only
  (:data:`STAGES`): ``run_example`` and its stages (building inputs, the
  launcher call with its compile, the oracle comparison, the memory checks).
  The profile counts every call, the shrinker's and the error plot's
  included, so its ``run_example`` time is at least the observer's; the
  observer sees the search's examples only.  A discarded example is split into
  stages together with the others (the profile cannot tell them apart).

What is left of a cell's time besides its examples is Hypothesis (drawing,
shrinking) and the runner.  Writes ``example_cost.txt``, ``example_cost.json``
and, per subject, a cProfile dump and its top 60 functions under ``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import inspect
import json
import os
import pstats
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))

# label -> (module, qualified name) of the functions whose profile is reported
STAGES = {
    "run_example": ("triton_conformance.conformance.battery.forward", "run_example"),
    "build_inputs": ("triton_conformance.strategies._internal.tensors", "build_inputs"),
    "launcher call": ("triton_conformance.conformance.battery.forward", "_call"),
    "oracle comparison": ("triton_conformance.conformance.judge", "Judge.compare"),
    "memory checks": ("triton_conformance.conformance.battery.forward", "_memory_findings"),
}


def stage_keys() -> tuple[dict[str, tuple], list[str]]:
    """Each stage's pstats key (file, first line, name), and the stages not found (renamed in the engine)."""
    keys, missing = {}, []
    for label, (module, qualname) in STAGES.items():
        try:
            obj = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
            code = inspect.unwrap(obj).__code__
        except (ImportError, AttributeError):
            missing.append(f"{label} ({module}.{qualname})")
            continue
        keys[label] = (code.co_filename, code.co_firstlineno, code.co_name)
    return keys, missing


def stage_times(stats: pstats.Stats, keys: dict[str, tuple]) -> dict[str, list]:
    """[cumulative seconds, calls] of each named function in a profile (absent: never called)."""
    out = {}
    for label, key in keys.items():
        _cc, calls, _tt, cumulative, _callers = stats.stats.get(key, (0, 0, 0.0, 0.0, {}))
        out[label] = [round(cumulative, 3), calls]
    return out


def child(name: str, budget: str, out: str, device: str = "cuda", profile_name: str = "nightly") -> dict:
    sys.path.insert(0, ROOT)
    from compiles import _import_kernels

    _import_kernels()
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.kinds import cells_for
    from triton_conformance.conformance.observe import Observer
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config
    from triton_conformance.model.subject import get_subject

    class ExampleTimes(Observer):
        """Seconds and counts of the examples of the current cell, by verdict."""

        def __init__(self) -> None:
            self.seconds: dict[str, float] = defaultdict(float)
            self.count: Counter = Counter()

        def example_finished(self, subject, cell, spec, verdict, seconds) -> None:
            label = verdict if isinstance(verdict, str) else "failed"  # a Finding
            self.seconds[label] += seconds
            self.count[label] += 1

    keys, missing = stage_keys()
    backend = current_backend(device)
    config = run_config(device=device, profile=profile_name, compile_budget=budget)
    subject = get_subject(name)
    rows = []
    combined: pstats.Stats | None = None
    examples: dict[str, float] = defaultdict(float)
    counts: Counter = Counter()
    start = time.perf_counter()
    for cell in cells_for(subject):
        times = ExampleTimes()
        profile = cProfile.Profile()
        t = time.perf_counter()
        profile.enable()
        r = run_cell(subject, cell, backend=backend, config=config, observer=times)
        profile.disable()
        seconds = time.perf_counter() - t
        stats = pstats.Stats(profile)
        if combined is None:
            combined = stats
        else:
            combined.add(stats)
        in_examples = sum(times.seconds.values())
        for label, sec in times.seconds.items():
            examples[label] += sec
        counts.update(times.count)
        rows.append({"cell": cell, "outcome": r.outcome, "seconds": round(seconds, 3), "examples": r.examples,
                     "discarded": (r.details or {}).get("compile_budget_discarded", 0), "compiles": r.compiles,
                     "observed": {k: [round(v, 3), times.count[k]] for k, v in times.seconds.items()},
                     "in_examples_s": round(in_examples, 3),
                     "in_discards_s": round(times.seconds.get("discarded", 0.0), 3),
                     "elsewhere_s": round(seconds - in_examples, 3),
                     "stages": stage_times(stats, keys)})
    total = time.perf_counter() - start
    prof_path = os.path.join(out, f"{name}.prof")
    stages = {}
    if combined is not None:
        combined.dump_stats(prof_path)
        with open(os.path.join(out, f"{name}.pstats.txt"), "w") as f:
            pstats.Stats(prof_path, stream=f).sort_stats("cumulative").print_stats(60)
        stages = stage_times(combined, keys)
    budget = config.compile_budget if backend.compiles else None  # the interpreter compiles nothing
    return {"subject": name, "seconds": round(total, 3), "profile": profile_name, "budget": budget,
            "cells": rows, "examples": {k: [round(v, 3), counts[k]] for k, v in examples.items()},
            "stages": stages, "stages_missing": missing}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default="attention_naive,softmax,add,gemv")
    parser.add_argument("--budget", default="16", help="compilations per subject (0: no limit)")
    parser.add_argument("--profile", default=os.environ.get("COST_PROFILE") or "nightly",
                        choices=("dev", "ci", "nightly"), help="conformance profile [$COST_PROFILE, else nightly]")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--out", default=os.environ.get("OUT") or "example-cost")
    parser.add_argument("--device", default="cuda", choices=("cuda", "interpreter"))
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0
    os.makedirs(args.out, exist_ok=True)

    def one(name: str) -> dict:
        env = dict(os.environ, TRITON_INTERPRET="1") if args.device == "interpreter" else None
        command = [sys.executable, os.path.abspath(__file__), "--child", name, args.budget, args.out, args.device,
                   args.profile]
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        return {"subject": name, "error": proc.stderr[-3000:]}

    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, args.subjects.split(",")))
    lines = []
    for r in results:
        if "error" in r:
            lines.append(f"{r['subject']}: ERROR {r['error']}")
            continue
        lines.append(f"{r['subject']}: {r['seconds']} s over {len(r['cells'])} cells "
                     f"(profile {r['profile']}, compile budget {r['budget']})")
        lines.append("  examples of the search (observer), by verdict:")
        for verdict, (sec, n) in sorted(r["examples"].items()):
            lines.append(f"    {verdict:<32} {sec:8.2f} s  {n:6d} examples  {1000 * sec / max(n, 1):8.1f} ms each")
        lines.append("  stages, every call (cProfile, cumulative):")
        for stage, (sec, n) in r["stages"].items():
            lines.append(f"    {stage:<32} {sec:8.2f} s  {n:6d} calls  {1000 * sec / max(n, 1):8.1f} ms each")
        for stage in r["stages_missing"]:
            lines.append(f"    {stage}: not found in the engine, not timed")
        for c in r["cells"]:
            lines.append(f"    {c['cell']:<26} {c['outcome']:<9} {c['seconds']:6.2f} s  ex {c['examples']:>3}  "
                         f"disc {c['discarded']:>3}  comp {c['compiles']}  examples {c['in_examples_s']:.2f} s  "
                         f"of which discards {c['in_discards_s']:.2f} s  elsewhere {c['elsewhere_s']:.2f} s")
    lines.append(f"wall {time.perf_counter() - started:.1f} s, {args.jobs} at once on one GPU")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "example_cost.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "example_cost.json"), "w") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
