"""Start a cell worker by forking this process, after torch, triton and the battery are imported.

A worker started as ``python -m triton_conformance.workers.worker`` imports
torch, triton, the battery and the subject modules again: about 1.9 s of CPU
on a quiet 2-core machine, for each worker and each replacement.  On the
interpreter a pytest-xdist worker of a conformance run has imported them all
already and has run nothing (its cells run in the worker), so a fork of it
starts ready.  Never on CUDA (a CUDA context does not survive a fork) and
never under a wrapper such as compute-sanitizer (it must start the program).

The child is made to look like a spawned worker: standard streams on the
worker's output file, no other inherited descriptor (the xdist channel, the
pool's own ends of the pipes), the pool's environment, default signal
handlers and no faulthandler; then :func:`~.worker.main`, and ``os._exit``.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import signal
import subprocess
import sys
import time
import traceback
from typing import IO

__all__ = ["ForkedWorker", "fork_worker"]


class ForkedWorker:
    """The child of :func:`fork_worker`, with the part of ``subprocess.Popen`` the pool uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:
                self.returncode = -signal.SIGKILL  # already reaped elsewhere: it is gone
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            return self._reap(0)
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
            time.sleep(0.02)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _only_descriptors(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def fork_worker(inbox: int, outbox: int, output: IO[bytes], env: dict[str, str]) -> ForkedWorker:
    """A worker forked from this process, reading requests from ``inbox`` and answering on ``outbox``, its
    standard output and error in ``output``, its environment ``env``."""
    import triton_conformance.conformance.runner  # noqa: F401 - what the worker imports, imported once here
    import triton_conformance.workers.worker  # noqa: F401

    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return ForkedWorker(pid)
    gc.freeze()  # the child's collector leaves the objects it shares with this process alone (no copies)
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        _only_descriptors({0, 1, 2, inbox, outbox})
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, for its life
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(env)
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGALRM):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        if sys.platform != "win32":
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as CPython starts a process
        faulthandler.disable()
        from triton_conformance.workers.worker import main

        code = main([str(inbox), str(outbox)])
    except BaseException:  # noqa: BLE001 - the child must end here whatever happened
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
