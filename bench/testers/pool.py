"""Run tasks in forked children, a few at a time, so that a kernel that corrupts memory or
hangs takes down only its own task (recorded as a crash or a timeout), never the benchmark.

Forking keeps the parent's imports (torch, triton, the subjects), so a task
starts in milliseconds.  On CUDA the parent must not have touched the GPU
before forking; each child initializes CUDA itself.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterable
from multiprocessing.connection import wait
from typing import Any

__all__ = ["run_tasks"]


def _child(fn: Callable[[Any], dict], task: Any, conn, quiet: bool) -> None:
    if quiet:  # kernels and gpucheck print; the parent's log keeps one line per result
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    try:
        import torch

        torch.set_num_threads(1)  # the workers share few cores
        result = fn(task)
    except BaseException as exc:  # noqa: BLE001 (reported to the parent, not raised)
        result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    conn.send(result)
    conn.close()
    os._exit(0)


def run_tasks(tasks: Iterable[Any], fn: Callable[[Any], dict], *, workers: int, timeout: float,
              on_result: Callable[[Any, dict, float], None], quiet: bool = True,
              budget: float | None = None) -> list[Any]:
    """Call ``fn(task)`` in a forked child for each task, at most ``workers`` at once.

    With ``budget`` (seconds), no task starts after that much time; the tasks
    never started are returned (running ones finish).

    ``on_result(task, result, seconds)`` gets ``fn``'s dict, or ``{"died": exit code}``
    when the child died without answering, or ``{"timeout": seconds}`` when it was
    killed after ``timeout`` seconds.
    """
    if workers < 1:
        raise ValueError(f"workers={workers!r}, expected at least 1")
    if timeout <= 0:
        raise ValueError(f"timeout={timeout!r}, expected a positive number of seconds")
    ctx = mp.get_context("fork")
    pending = list(tasks)
    stop_at = None if budget is None else time.monotonic() + budget
    left: list[Any] = []
    running: dict[Any, tuple[Any, Any, float]] = {}
    while pending or running:
        if stop_at is not None and time.monotonic() > stop_at and pending:
            left, pending = pending, []
            if not running:
                break
        while pending and len(running) < workers:
            task = pending.pop(0)
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(fn, task, sender, quiet), daemon=True)
            proc.start()
            sender.close()
            running[receiver] = (proc, task, time.monotonic())
        for conn in wait(list(running), timeout=1.0):
            proc, task, t0 = running.pop(conn)
            try:
                result = conn.recv()
            except EOFError:
                proc.join()
                result = {"died": proc.exitcode}
            conn.close()
            proc.join(timeout=10)
            on_result(task, result, time.monotonic() - t0)
        now = time.monotonic()
        for conn, (proc, task, t0) in list(running.items()):
            if now - t0 > timeout:
                proc.kill()
                proc.join()
                running.pop(conn)
                conn.close()
                on_result(task, {"timeout": now - t0}, now - t0)
    return left
