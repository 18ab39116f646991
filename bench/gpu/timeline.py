"""A pytest plugin that writes when each phase of a run happened, one JSON line an event.

Load it with ``-p bench.gpu.timeline`` (the repo root on PYTHONPATH) and set
``CONFORMANCE_TIMELINE_DIR``: every pytest process (the controller and each xdist
worker) appends to its own file there.  Events carry wall-clock seconds
(``time.time()``), so processes line up:

- ``process``: when the OS started this process (from /proc), and when this
  module was imported;
- ``configured``, ``collected``, ``finished``: pytest's configure,
  collection end and session end;
- ``start`` / ``end`` of each test item (its node id);
- ``spawn`` / ``ready`` of each cell worker (the isolation pool's child), by
  wrapping ``_Worker`` for the run; this changes nothing it does;
- ``sessionstart`` / ``sessionstarted`` around every plugin's
  ``pytest_sessionstart``, and ``environment-wait`` / ``environment-done``
  around the controller's wait for the CUDA environment check.

``python bench/gpu/timeline_summary.py DIR [RESULTS.json]`` turns the files
into the start-up's phases and the tail.
"""

from __future__ import annotations

import json
import os
import time

import pytest

_DIR = os.environ.get("CONFORMANCE_TIMELINE_DIR")
_WHO = os.environ.get("PYTEST_XDIST_WORKER", "controller")


def _emit(event: str, **fields: object) -> None:
    if not _DIR:
        return
    os.makedirs(_DIR, exist_ok=True)
    with open(os.path.join(_DIR, f"{_WHO}-{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps({"who": _WHO, "pid": os.getpid(), "event": event, "t": time.time(), **fields}) + "\n")


def _process_start() -> float | None:
    try:
        with open("/proc/stat") as stat:
            boot = next(float(line.split()[1]) for line in stat if line.startswith("btime"))
        with open(f"/proc/{os.getpid()}/stat") as own:
            ticks = float(own.read().rsplit(")", 1)[1].split()[19])
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError, IndexError):
        return None


_emit("process", started=_process_start())


def _wrap_cell_workers() -> None:
    from triton_conformance.workers import isolation

    worker = isolation._Worker
    if getattr(worker, "_timeline", False):
        return
    init, wait_ready = worker.__init__, worker.wait_ready

    def timed_init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        _emit("spawn")
        init(self, *args, **kwargs)

    def timed_wait_ready(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        why = wait_ready(self, *args, **kwargs)
        _emit("ready", error=why)
        return why

    worker.__init__, worker.wait_ready, worker._timeline = timed_init, timed_wait_ready, True


def _wrap_environment_check() -> None:
    from triton_conformance.conformance import canary

    check = canary.EnvironmentCheck
    if getattr(check, "_timeline", False):
        return
    report = check.report

    def timed_report(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        _emit("environment-wait")
        try:
            return report(self, *args, **kwargs)
        finally:
            _emit("environment-done")

    check.report, check._timeline = timed_report, True


_wrap_cell_workers()  # at import: pytest_configure may start a cell worker before ours runs
_wrap_environment_check()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionstart(session):  # noqa: ANN001, ANN201
    _emit("sessionstart")
    try:
        return (yield)
    finally:
        _emit("sessionstarted")  # every plugin's pytest_sessionstart has run (xdist's start of its workers too)


def pytest_configure(config) -> None:  # noqa: ANN001
    _emit("configured")


def pytest_collection_finish(session) -> None:  # noqa: ANN001
    _emit("collected", items=len(session.items))


def pytest_runtest_logstart(nodeid, location) -> None:  # noqa: ANN001
    if _WHO != "controller":
        _emit("start", item=nodeid)


def pytest_runtest_logfinish(nodeid, location) -> None:  # noqa: ANN001
    if _WHO != "controller":
        _emit("end", item=nodeid)


def pytest_sessionfinish(session, exitstatus) -> None:  # noqa: ANN001
    _emit("finished", status=int(exitstatus))
