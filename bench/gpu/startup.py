"""Where a worker's start-up goes: each phase a nightly (or the CPU main job) pays before its first cell.

    python bench/gpu/startup.py --device cuda [--workers 12] [--repeats 3]

Each figure is the median wall time of ``--repeats`` fresh processes (and the
CPU time of the process tree, user + system), from this checkout's root:

- ``python``: the interpreter alone;
- ``import torch`` / ``import torch, triton``;
- ``battery``: torch, triton, the battery's engine and the kernel modules, as
  a cell worker imports them (with the compat layer on the interpreter);
- ``cuda context``: the battery, then a first tensor on the GPU (cuda only);
- ``collection``: one pytest process collecting the battery (its imports, the
  subjects and the environment check), as each xdist worker does;
- ``cell worker``: from a process that has the battery imported (as an xdist
  worker) to a new cell worker's answer;
- ``N at once``: ``--workers`` battery imports (with a CUDA context on cuda)
  started together, until the last is done: what N workers sharing the host's
  cores pay at once.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)


def import_battery(device: str, context: bool = False) -> None:
    """What a cell worker imports before its first cell (and, with ``context``, a first tensor on the GPU)."""
    import importlib

    os.environ["TRITON_INTERPRET"] = "1" if device == "interpreter" else "0"
    import torch
    import triton  # noqa: F401

    if device == "interpreter":
        from triton_conformance.conformance.interpreter_layer import install_compat

        install_compat(None)
    import conftest
    import triton_conformance.conformance.runner  # noqa: F401

    for module in conftest.KERNEL_MODULES:
        importlib.import_module(module)
    if context:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()


def _battery(device: str, context: bool = False) -> list[str]:
    return [__file__, "--import-battery", device] + (["--context"] if context else [])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argvs: list[list[str]], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) of starting every argv at once and waiting for all of them."""
    cpu, start = _children_cpu(), time.perf_counter()
    procs = [subprocess.Popen(a, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env) for a in argvs]
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"{' '.join(argvs[0])[:200]}: exit {p.returncode}\n{err.decode()[-2000:]}")
    return time.perf_counter() - start, _children_cpu() - cpu


def _median(repeats: int, argvs: list[list[str]], env: dict[str, str] | None = None) -> tuple[float, float]:
    runs = [_timed(argvs, env) for _ in range(repeats)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def _cell_worker(device: str, repeats: int) -> float:
    """Median wall from asking a new cell worker for its back end to its answer, in this process."""
    from triton_conformance.workers.isolation import WorkerPool

    walls = []
    for _ in range(repeats):
        pool = WorkerPool(device)
        start = time.perf_counter()
        status, value, _ = pool.call({"op": "backend"}, 300)
        walls.append(time.perf_counter() - start)
        pool.close()
        if status != "result":
            raise SystemExit(f"cell worker: {status} {value}")
    return statistics.median(walls)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("interpreter", "cuda"), default="interpreter")
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--import-battery", metavar="DEVICE", help=argparse.SUPPRESS)  # one phase, in a child
    parser.add_argument("--context", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.import_battery:
        import_battery(args.import_battery, args.context)
        return
    py, rows = sys.executable, []
    phases = [("python", ["-c", "pass"]), ("import torch", ["-c", "import torch"]),
              ("import torch, triton", ["-c", "import torch, triton"]), ("battery", _battery(args.device))]
    if args.device == "cuda":
        phases.append(("cuda context", _battery(args.device, context=True)))
    from triton_conformance.running import _plugin_installed

    plugin = [] if _plugin_installed() else ["-p", "triton_conformance.plugin"]  # run from a checkout
    phases.append(("collection", ["-m", "pytest", *plugin, "--conformance-only", f"--conformance-device={args.device}",
                                  "--collect-only", "-q", "-p", "no:xdist", "-p", "no:randomly", "--assert=plain"]))
    for name, tail in phases:
        wall, cpu = _median(args.repeats, [[py, *tail]])
        rows.append((name, wall, cpu))
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):  # what compiling every module from source costs each process
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="conformance-pycache-")
        _timed([[py, *_battery(args.device)]], cached)  # writes the bytecode once
        wall, cpu = _median(args.repeats, [[py, *_battery(args.device)]], cached)
        rows.append(("battery, bytecode cached (PYTHONPYCACHEPREFIX)", wall, cpu))
    many = [py, *_battery(args.device, context=args.device == "cuda")]
    wall, cpu = _median(1, [many] * args.workers)
    rows.append((f"{args.workers} battery imports at once" + (" with a context" if args.device == "cuda" else ""),
                 wall, cpu))
    import_battery(args.device)  # this process now stands for an xdist worker, the battery imported
    rows.append(("cell worker", _cell_worker(args.device, args.repeats), float("nan")))
    print(f"start-up phases on {args.device}, median of {args.repeats} (wall s, CPU s of the process tree):")
    for name, wall, cpu in rows:
        print(f"  {name:<45} {wall:7.2f} s wall  {cpu:7.2f} s CPU")


if __name__ == "__main__":
    main(sys.argv[1:])
