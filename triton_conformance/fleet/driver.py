"""The fleet driver: devices x shards as Ray tasks, collected as they finish, merged into one matrix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from triton_conformance.fleet.tasks import Ledger, run_shard, with_options
from triton_conformance.model.cells import split_cell_id
from triton_conformance.model.config import CUDA, INTERPRETER, on_cuda
from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.combine import MergeConflict, merge_results
from triton_conformance.reports.results_json import environment, results_document

__all__ = ["ShardTask", "FleetResult", "plan_tasks", "resources_for", "collect_cells", "crash_document",
           "run_fleet", "RETRIES"]

RETRIES = 1  # a task that dies, or whose node is lost, runs once more, then its cells are crash cells


@dataclass(frozen=True)
class ShardTask:
    """One shard of the battery on one device, with the Ray options that place it."""

    label: str  # the device as the matrix names it: interpreter, H200, ...
    shard: str  # K/N
    device: str  # the battery's --device: interpreter or cuda
    options: dict[str, Any] = field(default_factory=dict)  # ray.remote .options(...)

    @property
    def key(self) -> str:
        return f"{self.label} {self.shard}"

    @property
    def filename(self) -> str:
        return f"{self.label}-{self.shard.replace('/', 'of')}.json"


@dataclass
class FleetResult:
    document: dict[str, Any] | None  # the merged matrix (None if the files could not be merged)
    files: list[str]  # each shard's document, in the work directory
    attempts: dict[str, list[dict[str, str]]]  # shard key -> the nodes its attempts started on
    lost: list[str]  # shard keys recorded as crash cells
    error: str | None = None  # why the merge failed


def resources_for(label: str, *, simulate: bool, mode: str = "accelerator") -> tuple[str, dict[str, Any]]:
    """(the battery's --device, the Ray options) for a device label.

    - ``interpreter``: a CPU (and the custom resource ``device:interpreter`` in
      ``custom`` mode or when simulating);
    - a GPU label: ``num_gpus=1`` and ``accelerator_type=label`` (``accelerator``
      mode, Ray's node labels for GPU models), or the custom resource
      ``device:<label>`` (``custom`` mode: a cluster started with
      ``--resources '{"device:H200": 8}'``).
    - ``simulate``: every label runs on the interpreter, placed by its custom
      resource: a cluster without GPUs pretending to have them (tests).
    """
    if simulate or mode == "custom":
        device = INTERPRETER if simulate or label == INTERPRETER else CUDA
        options: dict[str, Any] = {"num_cpus": 1, "resources": {f"device:{label}": 1}}
        if on_cuda(device):
            options["num_gpus"] = 1
        return device, options
    if label == INTERPRETER:  # a label names a GPU model, or the interpreter
        return INTERPRETER, {"num_cpus": 1}
    return CUDA, {"num_cpus": 1, "num_gpus": 1, "accelerator_type": label}


def plan_tasks(devices: list[str], shards: int, *, simulate: bool = False,
               mode: str = "accelerator") -> list[ShardTask]:
    """Every (device, shard) of a fleet run, device by device."""
    tasks = []
    for label in devices:
        device, options = resources_for(label, simulate=simulate, mode=mode)
        tasks += [ShardTask(label, f"{k}/{shards}", device, options) for k in range(1, shards + 1)]
    return tasks


def collect_cells(argv: list[str], cwd: str | None) -> list[tuple[str, str]]:
    """Every cell of the battery, as the shards see it (one collection, no cell run): for crash cells."""
    command = [sys.executable, "-m", "pytest", "--conformance-only", "--collect-only", "-q", "-p", "no:cacheprovider",
               *argv]
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    cells = []
    for line in out.stdout.splitlines():
        named = split_cell_id(line[2:]) if line.startswith("::") else None
        if named:
            cells.append(named)
    return cells


def crash_document(task: ShardTask, cells: list[tuple[str, str]], like: dict[str, Any] | None,
                   attempts: list[dict[str, str]], error: str) -> dict[str, Any]:
    """A results document of crash cells for a shard lost on every attempt, naming the nodes it ran on."""
    if like is not None:
        env = {k: v for k, v in (like.get("environment") or {}).items()}
    else:
        env = environment(device=task.device, profile="ci", seed=None)
    env.update(device=task.device, device_label=task.label, shard=task.shard)
    nodes = [a.get("node_id") for a in attempts]
    hosts = [a.get("host") for a in attempts]
    where = ", ".join(f"{h} (node {n[:12]})" for h, n in zip(hosts, nodes)) or "no node (it never started)"
    results = [CellResult.of(subject, cell, "crash", f"shard {task.shard} on {task.label} was lost on each of "
                             f"{len(attempts)} attempt(s), on {where}: {error[-1500:]}", finding="fleet-task-lost",
                             details={"nodes": nodes, "hosts": hosts, "attempts": len(attempts), "shard": task.shard})
               for subject, cell in cells]
    return results_document(results, env)


def _shard_cells(task: ShardTask, cells: list[tuple[str, str]], durations: dict | None) -> list[tuple[str, str]]:
    # Here, not at the top: the plugin package loads pytest, and the CLI imports this package for every command.
    from triton_conformance.plugin.shards import parse_shard, plan_shards

    shard = parse_shard(task.shard)
    plan = plan_shards(cells, shard.count, durations)
    return [c for c in cells if plan.get(c[0]) == shard.index]


def run_fleet(tasks: list[ShardTask], *, argv: list[str], workdir: str, cwd: str | None = None,
              address: str | None = None, init: dict[str, Any] | None = None, retries: int = RETRIES,
              faults: str | None = None, collect_argv: list[str] | None = None, durations: dict | None = None,
              ship: bool = False, log=print) -> FleetResult:  # noqa: ANN001
    """Run ``tasks`` on a Ray cluster (``address``; None: start a local one with ``init``) and merge them.

    ``argv``: the ``triton-conformance run`` options every shard gets.  Each
    finished shard's document is written to ``workdir`` at once.  A shard whose
    task fails ``retries + 1`` times is recorded as crash cells of its subjects
    (found by collecting with ``collect_argv``, split with ``durations`` as the
    shards split them), carrying the nodes of its attempts.
    """
    import ray  # an optional dependency (the fleet extra): imported only when a fleet runs

    os.makedirs(workdir, exist_ok=True)
    cwd = os.path.abspath(cwd or os.getcwd())
    started_here = not ray.is_initialized()
    if started_here:
        kwargs = dict(init or {})
        kwargs.setdefault("include_dashboard", False)
        kwargs.setdefault("log_to_driver", False)
        if ship:
            kwargs["runtime_env"] = {"working_dir": cwd}
        ray.init(address=address, **kwargs)
    try:
        ledger = ray.remote(num_cpus=0)(Ledger).remote()
        remote = ray.remote(run_shard)
        pending: dict[Any, ShardTask] = {}
        for task in tasks:
            ref = remote.options(max_retries=retries, retry_exceptions=True, **task.options).remote(
                with_options(argv, "--device", task.device, "--device-label", task.label), label=task.label,
                shard=task.shard, cwd=None if ship else cwd, ledger=ledger, faults=faults)
            pending[ref] = task
        docs: dict[str, dict[str, Any]] = {}
        failed: dict[str, tuple[ShardTask, str]] = {}
        files: list[str] = []
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            task = pending.pop(ready[0])
            try:
                out = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                failed[task.key] = (task, f"{type(exc).__name__}: {exc}")
                log(f"fleet: {task.key}: lost ({type(exc).__name__}) after {retries + 1} attempt(s)")
                continue
            docs[task.key] = out["document"]
            path = os.path.join(workdir, task.filename)
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(out["document"], fh, indent=1, default=str)
            files.append(path)
            log(f"fleet: {task.key}: {len(out['document'].get('results') or ())} cells on {out['node']['host']} "
                f"in {out['seconds']:.1f} s (exit {out['returncode']})")
        attempts = ray.get(ledger.get.remote())
    finally:
        if started_here:
            ray.shutdown()
    if failed:
        cells = collect_cells(collect_argv or [], cwd)
        for key, (task, error) in failed.items():
            like = next((d for k, d in docs.items() if k.startswith(f"{task.label} ")), None) \
                or next(iter(docs.values()), None)
            doc = crash_document(task, _shard_cells(task, cells, durations), like, attempts.get(key, []), error)
            path = os.path.join(workdir, task.filename)
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1, default=str)
            files.append(path)
    order = {t.key: i for i, t in enumerate(tasks)}
    files.sort(key=lambda p: order.get(_key_of(p, tasks), 0))
    named = []
    for path in files:
        with open(path, encoding="utf-8") as fh:
            named.append((path, json.load(fh)))
    try:
        merged = merge_results(named)
        error = None
    except MergeConflict as exc:
        merged, error = None, str(exc)
    return FleetResult(merged, files, attempts, sorted(failed), error)


def _key_of(path: str, tasks: list[ShardTask]) -> str:
    name = os.path.basename(path)
    return next((t.key for t in tasks if t.filename == name), "")
