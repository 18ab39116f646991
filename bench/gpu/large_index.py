"""Run the ``shape:large-index`` cell on CUDA for the correct and the int32-offset vector addition.

Usage (from the repository root, on a machine with a GPU)::

    python bench/gpu/large_index.py [--out DIR] [--devices cuda,cpu]

Each subject runs in its own child process, in case a wrapped offset still
ends in an illegal address (which leaves a CUDA context unusable).  Each
child runs the cell with real tensors (2^31 + 4099 fp16 elements, 4 GiB per
tensor, carved with 4 GiB gaps from one 28 GiB buffer) and prints one line:
subject, backend, outcome, finding, seconds, peak CUDA memory, and the
message.  ``--devices cuda,cpu`` runs the CPU emulation of the same cell too
(the interpreter, last programs of the grid only).

Expected: ``add`` honoured; ``zoo_add_int32_offsets`` unsafe/oob-write (its
wrapped stores land in the gap before the output), as on the CPU.  Writes ``large_index.txt`` and ``large_index.json`` under
``--out`` (default ``$OUT``, else ``large-index-results``).  Exit status 1 if
the correct kernel fails or the buggy one passes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUBJECTS = (("kernels_under_test.vector_add", "add", True), ("tests.zoo.zoo_large_index", "zoo_add_int32_offsets",
                                                                False))


def child(module: str, name: str, device: str) -> dict:
    """Run the cell here (in a child process) and return what happened."""
    sys.path.insert(0, ROOT)
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    import importlib

    import torch

    from triton_conformance.conformance.backend import Backend
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config
    from triton_conformance.model.subject import get_subject

    importlib.import_module("kernels_under_test.vector_add")
    importlib.import_module(module)
    backend = Backend(name="cuda", device="cuda") if device == "cuda" else Backend()
    start = time.perf_counter()
    result = run_cell(get_subject(name), "shape:large-index", backend=backend, config=run_config(device=backend.name))
    seconds = time.perf_counter() - start
    try:
        peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    except Exception:  # noqa: BLE001 - an illegal address leaves the context unusable
        peak = None
    return {"subject": name, "backend": device, "outcome": result.outcome, "finding": result.finding,
            "seconds": round(seconds, 3), "peak_cuda_gib": None if peak is None else round(peak / 2**30, 2),
            "compiles": result.compiles, "message": result.message, "reproducer": result.reproducer}


def run_child(module: str, name: str, device: str, timeout: float) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    command = [sys.executable, os.path.abspath(__file__), "--child", module, name, device]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"subject": name, "backend": device, "outcome": "timeout", "finding": None,
                "seconds": round(time.perf_counter() - start, 3), "message": f"no answer in {timeout} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"subject": name, "backend": device, "outcome": "crash", "finding": "process-died",
            "seconds": round(time.perf_counter() - start, 3),
            "message": f"exit status {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "large-index-results")
    parser.add_argument("--devices", default="cuda", help="comma-separated: cuda (real tensors), cpu (emulated)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per child")
    parser.add_argument("--child", nargs=3, metavar=("MODULE", "SUBJECT", "DEVICE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    bad = [d for d in devices if d not in ("cuda", "cpu")]
    if bad:
        parser.error(f"--devices={args.devices!r}, expected a comma-separated list of cuda and cpu")
    os.makedirs(args.out, exist_ok=True)
    rows, lines = [], []
    for device in devices:
        for module, name, _ in SUBJECTS:
            row = run_child(module, name, device, args.timeout)
            rows.append(row)
            line = (f"{row['subject']:<24} {row['backend']:<5} {row['outcome']:<9} {row.get('finding') or '':<15} "
                    f"{row['seconds']:>8.2f} s  peak {row.get('peak_cuda_gib')} GiB  | {row['message'][:300]}")
            print(line, flush=True)
            lines.append(line)
    with open(os.path.join(args.out, "large_index.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "large_index.json"), "w") as f:
        json.dump(rows, f, indent=2)
    passing = ("honoured", "rejected")
    ok = all((r["outcome"] in passing) == correct for r, (_, _, correct) in zip(rows, SUBJECTS * len(devices)))
    print("OK: the correct kernel passes and the int32 one is caught" if ok else "UNEXPECTED outcome, see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
