"""Run the ``performance`` cell of every subject that declares a performance contract, on CUDA.

Usage (from the repository root, on a machine with a GPU)::

    python bench/gpu/performance.py [--out DIR] [--subjects add,matmul] [--rep-ms 100]

For each subject it checks the kernel once at the measured size, times it and
its torch baseline (CUDA events, 256 MiB L2 flush before each call, median),
and prints one row: subject, size, achieved, peak, fraction, kernel ms, torch
ms, speedup.  The peaks are measured once, first: copy bandwidth (1 GiB
``copy_``, read + write) and ``torch.matmul`` at 8192^3 per dtype.

Writes, under ``--out`` (default ``$OUT``, else ``performance-results``):

- ``performance.json``: a results document (``triton-conformance show/report/diff`` read it);
- ``performance.html``: the HTML report of it;
- ``performance.txt``: the table, as printed;
- ``peaks.json``: the measured peaks and the timer.

Exit status 1 if any cell failed (wrong, unsafe or crash at the measured size).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL_MODULES = ["kernels_under_test.vector_add", "kernels_under_test.gemv", "kernels_under_test.matmul",
                  "kernels_under_test.flash_attention", "kernels_under_test.softmax",
                  "kernels_under_test.layer_norm", "kernels_under_test.attention"]
COLUMNS = ("subject", "size", "achieved", "peak", "fraction", "kernel ms", "torch ms", "speedup")


def _size(dims: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in dims.items())


def table_rows(results) -> list[list[str]]:
    """One row per performance cell; failed or skipped cells show their outcome instead of figures."""
    rows = []
    for r in results:
        d = r.details or {}
        if d.get("fraction") is None:
            dims = (r.counterexample or {}).get("dims") or {}
            rows.append([r.subject, _size(dims), r.outcome.upper(), (r.finding or ""), "", "", "", ""])
            continue
        unit = d["unit"]
        rows.append([r.subject, _size(d["dims"]), f"{d['achieved']:.1f} {unit}", f"{d['peak']:.1f} {unit}",
                     f"{100 * d['fraction']:.1f}%", f"{d['kernel_ms']:.4f}",
                     "" if d.get("baseline_ms") is None else f"{d['baseline_ms']:.4f}",
                     "" if d.get("speedup") is None else f"{d['speedup']:.2f}x"])
    return rows


def format_table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "performance-results",
                        help="directory for performance.json/.html/.txt and peaks.json (default: $OUT)")
    parser.add_argument("--subjects", default="", help="comma-separated subject names (default: all declared)")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="timed milliseconds per measurement")
    args = parser.parse_args(argv)

    sys.path.insert(0, ROOT)  # a checkout on the GPU machine: nothing is installed
    from triton_conformance.conformance.backend import current_backend, select_device

    select_device("cuda", where="bench/gpu/performance.py")  # refuses TRITON_INTERPRET=1
    import importlib

    import torch

    from triton_conformance.conformance.kinds import catalogue, judge_for
    from triton_conformance.conformance.kinds.performance.peaks import CudaEventTimer, MeasuredPeaks
    from triton_conformance.conformance.kinds.performance.cell import run_performance_cell
    from triton_conformance.model.subject import registry
    from triton_conformance.reports.html import write_html
    from triton_conformance.reports.results_json import (
        environment,
        results_document,
        write_results,
    )

    for name in KERNEL_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - one broken module should not hide the others' figures
            print(f"performance.py: cannot import {name}: {exc!r}", file=sys.stderr)
    wanted = {s for s in args.subjects.split(",") if s}
    subjects = [s for s in registry if s.contract.performance is not None and (not wanted or s.name in wanted)]
    missing = wanted - {s.name for s in subjects}
    if missing:
        print(f"performance.py: --subjects names {sorted(missing)}, which declare no performance contract",
              file=sys.stderr)
        return 2
    backend = current_backend("cuda")
    timer = CudaEventTimer(rep_ms=args.rep_ms)
    peaks = MeasuredPeaks(timer)
    device_name = torch.cuda.get_device_name()
    print(f"device: {device_name}; torch {torch.__version__}; timer: {timer.description}", flush=True)
    started = time.perf_counter()
    bandwidth = peaks.bandwidth_gbs()
    dtypes = sorted({s.contract.performance.main_dtype for s in subjects if s.contract.performance.flops})
    rates = {d: peaks.tflops(d) for d in dtypes}
    matmul = "".join(f"; torch matmul {d} {r:.1f} TFLOP/s" for d, r in rates.items())
    peak_line = f"peaks: copy {bandwidth:.1f} GB/s{matmul}"
    print(f"{peak_line} (measured in {time.perf_counter() - started:.1f} s)", flush=True)

    results = []
    for s in subjects:
        t0 = time.perf_counter()
        # run_cell(s, "performance") takes no timer or peaks, so the cell is run directly, judged as run_cell would
        r = run_performance_cell(s, backend=backend, judge=judge_for(s, backend), timer=timer, peaks=peaks)
        r = replace(r, duration_s=time.perf_counter() - t0)
        results.append(r)
        print(f"  {s.name}: {r.outcome} in {time.perf_counter() - t0:.1f} s: {r.message}", flush=True)
    lines = [f"device: {device_name}", peak_line, ""] + format_table(table_rows(results))
    print("\n".join(lines))

    os.makedirs(args.out, exist_ok=True)
    env = environment(device="cuda", profile="performance", seed=None, device_name=device_name)
    doc = results_document(results, env, catalogue())
    write_results(os.path.join(args.out, "performance.json"), doc)
    write_html(os.path.join(args.out, "performance.html"), doc)
    with open(os.path.join(args.out, "performance.txt"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "peaks.json"), "w", encoding="utf-8") as fh:
        json.dump(peaks.describe(), fh, indent=1)
    print(f"wrote {args.out}/performance.json, performance.html, performance.txt, peaks.json")
    return 1 if any(not r.passed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
