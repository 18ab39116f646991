"""GPU check of the nightly mode: crash isolation, GPU pinning and the sanitizer, on real kernels.

Run from the checkout root on the GPU machine (nothing to install)::

    PYTHONPATH=. python3 bench/gpu/nightly_hazards.py --step isolation   # without, with, compare
    PYTHONPATH=. python3 bench/gpu/nightly_hazards.py --step sanitizer   # each fits a 10-minute call

Steps, each a ``triton-conformance nightly`` run on CUDA with one xdist worker per GPU:

- ``without``: the kernel battery (the cells matching ``--cells``);
- ``with``: the same cells plus the hazards' cells (``-p tests.hazards.plugin``): a
  kernel storing 2^44 elements past its output, one spinning on a flag that
  never changes, one whose 512x512 tile does not fit in shared memory;
- ``sanitizer``: one worker, ``--sanitizer``, over hazard_crash and the zoo's
  unmasked store (``zoo_add_missing_store_mask``, memory cell);
- ``compare`` (after with/without): hazards recorded as crash / timeout /
  compile-error, every other cell with the same outcome and finding in both
  runs, and both GPUs used (``nvidia-smi`` sampled during the runs).

Writes ``$OUT/nightly_hazards/<step>/`` (results.json, results.html, the
command's output) and ``summary.txt`` / ``summary.json``; exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAZARDS = {"hazard_crash": "crash", "hazard_hang": "timeout", "hazard_compile": "compile-error"}
DEFAULT_CELLS = "layout:contiguous or memory or shape:non-pow2"
SANITIZER_CELLS = "(hazard_crash and layout:contiguous) or (zoo_add_missing_store_mask and memory)"


class GpuSampler:
    """Polls nvidia-smi for compute processes, to see which GPUs the workers really used."""

    def __init__(self, every: float = 2.0):
        self.every, self.seen, self._stop = every, set(), threading.Event()
        self.smi = shutil.which("nvidia-smi")
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run([self.smi, "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader"],
                                     capture_output=True, text=True, timeout=20).stdout
                self.seen |= {tuple(p.strip() for p in line.split(",")) for line in out.splitlines() if "," in line}
            except (OSError, subprocess.SubprocessError):
                pass
            self._stop.wait(self.every)

    def __enter__(self) -> "GpuSampler":
        if self.smi:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self.smi:
            self._thread.join()


def nightly(step: str, out: str, args: argparse.Namespace, extra: list[str], *, cli: list[str] = ()) -> dict:
    """Run one ``triton-conformance nightly``; its log and results go under ``out/step``."""
    folder = os.path.join(out, step)
    os.makedirs(folder, exist_ok=True)
    results = os.path.join(folder, "results.json")
    command = [sys.executable, "-m", "triton_conformance.cli", "nightly", "--profile", args.profile,
               "--timeout", str(args.timeout), "--results", results, "--device", args.device, *cli]
    if args.gpus:
        command += ["--gpus", args.gpus]
    if args.workers:
        command += ["-n", str(args.workers)]
    command += ["--", "-p", "no:cacheprovider", *extra]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    started = time.time()
    with GpuSampler() as sampler, open(os.path.join(folder, "output.log"), "w") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        code = subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    gpus = sorted({uuid for _, uuid in sampler.seen})
    print(f"[{step}] exit {code} in {time.time() - started:.0f} s; GPUs with our processes: {gpus}", flush=True)
    doc = json.load(open(results)) if os.path.exists(results) else {"results": []}
    return {"step": step, "exit": code, "seconds": round(time.time() - started, 1), "gpus_used": gpus,
            "cells": {f"{r['subject']}[{r['cell']}]": {k: r.get(k) for k in ("outcome", "finding", "message")}
                      for r in doc["results"]}}


def compare(with_run: dict, without_run: dict, n_gpus: int) -> list[str]:
    """The failed checks (empty if all passed), with the evidence in each line."""
    failed = []
    cells = with_run["cells"]
    for name, outcome in HAZARDS.items():
        mine = {c: r for c, r in cells.items() if c.startswith(name + "[")}
        if not mine:
            failed.append(f"{name}: no cells recorded")
        for cell, r in mine.items():
            if r["outcome"] != outcome:
                failed.append(f"{cell}: {r['outcome']} ({r['finding']}), expected {outcome}: {r['message'][:300]}")
    others = {c: r for c, r in cells.items() if not c.startswith("hazard_")}
    baseline = without_run["cells"]
    if set(others) != set(baseline):
        failed.append(f"cells differ: only with hazards {sorted(set(others) - set(baseline))}, "
                      f"only without {sorted(set(baseline) - set(others))}")
    for cell in sorted(set(others) & set(baseline)):
        a, b = others[cell], baseline[cell]
        if (a["outcome"], a["finding"]) != (b["outcome"], b["finding"]):
            failed.append(f"{cell}: {b['outcome']} ({b['finding']}) without hazards, "
                          f"{a['outcome']} ({a['finding']}) with them")
    for run in (with_run, without_run):
        if run["gpus_used"] and len(run["gpus_used"]) < n_gpus:
            failed.append(f"[{run['step']}] processes seen on {run['gpus_used']} only, expected {n_gpus} GPUs")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", choices=("all", "isolation", "sanitizer"), default="all")
    parser.add_argument("--cells", default=DEFAULT_CELLS, help=f"pytest -k for the battery [{DEFAULT_CELLS}]")
    parser.add_argument("--profile", default="ci", help="conformance profile [ci: derandomized, comparable runs]")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per cell (the hang costs this) [60]")
    parser.add_argument("-n", "--workers", default=None, help="xdist workers [one per visible GPU]")
    parser.add_argument("--out", default=os.environ.get("OUT", "nightly-hazards-out"))
    # For a dry run of this script on a CPU machine: --device interpreter --gpus g0,g1.
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--gpus", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = os.path.join(args.out, "nightly_hazards")
    os.makedirs(out, exist_ok=True)
    sys.path.insert(0, ROOT)
    from triton_conformance.workers.gpus import visible_gpus

    gpus = visible_gpus(args.gpus)
    print(f"GPUs: {gpus}", flush=True)
    runs: dict[str, dict] = {}
    saved = os.path.join(out, "runs.json")
    if args.step in ("all", "isolation"):
        runs["without"] = nightly("without", out, args, ["-k", args.cells])
        runs["with"] = nightly("with", out, args, ["-k", args.cells, "-p", "tests.hazards.plugin"])
    if args.step in ("all", "sanitizer"):
        # memcheck slows start-up and kernels many times over; one worker, one cell per worker process.
        sanitizer_args = argparse.Namespace(**{**vars(args), "workers": "1", "timeout": max(args.timeout, 400)})
        runs["sanitizer"] = nightly("sanitizer", out, sanitizer_args,
                                    ["-k", SANITIZER_CELLS, "-p", "tests.hazards.plugin",
                                     "-o", "conformance_modules=tests.zoo.zoo_vector_add"], cli=["--sanitizer"])
    json.dump(runs, open(saved, "w"), indent=1)
    lines, failed = [], []
    if "with" in runs and "without" in runs:
        failed = compare(runs["with"], runs["without"], len(gpus))
        lines.append(f"isolation: {len(runs['with']['cells'])} cells with hazards, {len(runs['without']['cells'])} "
                     f"without; {len(failed)} failed checks")
        lines += [f"  {name}: " + ", ".join(f"{c.split('[')[1][:-1]}={r['outcome']} ({r['finding']})"
                                            for c, r in runs["with"]["cells"].items() if c.startswith(name + "["))
                  for name in HAZARDS]
    if "sanitizer" in runs:
        for cell, r in runs["sanitizer"]["cells"].items():
            lines.append(f"sanitizer: {cell}: {r['outcome']} ({r['finding']}) {r['message'][:200]!r}")
        crash = runs["sanitizer"]["cells"].get("hazard_crash[layout:contiguous]")
        if crash is None or not str(crash["finding"]).startswith("sanitizer-"):
            failed.append(f"sanitizer: hazard_crash[layout:contiguous] is {crash}, expected unsafe (sanitizer-oob)")
    lines += [f"FAILED: {f}" for f in failed] or ["all checks passed"]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    json.dump({"gpus": gpus, "failed": failed, "runs": runs}, open(os.path.join(out, "summary.json"), "w"), indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
