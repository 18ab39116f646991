"""Run cells in a child process, so one kernel's crash cannot take the run down.

Under the interpreter an out-of-bounds store is a real write into the host
heap; on CUDA an illegal access poisons the context for the whole process.
Each cell therefore runs in a long-lived worker process.  The worker reports
every example's spec before running it (a flight recorder), so when it dies or
hangs, the cell is recorded as ``crash`` or ``timeout`` with the spec that did
it, and a fresh worker takes over for the next cell.
"""

from __future__ import annotations

import errno
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from triton_conformance.conformance import memory_cgroup

__all__ = ["WorkerPool", "send", "receive"]

_HEADER = struct.Struct("!I")
# Importing torch and triton in a fresh process takes seconds, more on a loaded machine.
STARTUP_TIMEOUT = 300.0


def send(fd: int, message: Any) -> None:
    data = pickle.dumps(message)
    os.write(fd, _HEADER.pack(len(data)))
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, n - got)
        if not chunk:
            return None  # the other side is gone
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(fd: int, deadline: float | None = None) -> Any:
    """The next message, None at end of stream; TimeoutError past ``deadline``."""
    header = _read_exactly(fd, _HEADER.size, deadline)
    if header is None:
        return None
    body = _read_exactly(fd, _HEADER.unpack(header)[0], deadline)
    return None if body is None else pickle.loads(body)


_COMMAND = (sys.executable, "-m", "triton_conformance.workers.worker")


class _Worker:
    def __init__(self, device: str, modules: list[str], env: dict[str, str], prefix: tuple[str, ...] = (),
                 compat: tuple[str, ...] | None = None, memory: str | int | None = None, turns: Any = None):
        self._stderr = tempfile.TemporaryFile()
        self._fifo_dir: str | None = None
        self._start_error: str | None = None
        if prefix:
            self._spawn_through_fifos(prefix, env)
        else:
            to_child_r, self._to_child = os.pipe()
            self._from_child, from_child_w = os.pipe()
            self.proc = subprocess.Popen(
                [*_COMMAND, str(to_child_r), str(from_child_w)], pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr, env=env,
            )
            os.close(to_child_r)
            os.close(from_child_w)
        if self._start_error is None:
            send(self._to_child, {"sys_path": list(sys.path), "device": device, "modules": modules,
                                  "compat_shims": compat, "memory": memory, "gpu_turns": turns})
        self.ready = False
        self.memory_bound: dict | None = None  # the bound the worker applied, as it said once started

    def _spawn_through_fifos(self, prefix: tuple[str, ...], env: dict[str, str]) -> None:
        """Start ``prefix + worker`` talking over named pipes: a wrapper such as compute-sanitizer
        need not pass inherited file descriptors on to the program it runs."""
        self._fifo_dir = tempfile.mkdtemp(prefix="conformance-worker-")
        to_path, from_path = (os.path.join(self._fifo_dir, name) for name in ("in", "out"))
        os.mkfifo(to_path, 0o600)
        os.mkfifo(from_path, 0o600)
        # Our read end first; the worker opens its write end, then its read end (_worker.open_channels),
        # so once our write end opens, the worker can already answer.
        self._from_child = os.open(from_path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(self._from_child, True)
        # Its own process group: killing a hung worker must take the wrapper and the worker under it.
        self.proc = subprocess.Popen([*prefix, *_COMMAND, to_path, from_path], stdin=subprocess.DEVNULL,
                                     stdout=self._stderr, stderr=self._stderr, env=env, start_new_session=True)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                self._to_child = os.open(to_path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until it reads
                os.set_blocking(self._to_child, True)
                return
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._to_child = os.open(os.devnull, os.O_WRONLY)  # so close() needs no special case
                self._start_error = f"worker process never opened its channel {to_path}"
                return
            time.sleep(0.02)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> str | None:
        """None once the worker has started; else why it did not."""
        if self.ready:
            return None
        if self._start_error is not None:
            self.kill()
            return f"{self._start_error}; its last output:\n{self.stderr_tail()}"
        try:
            reply = receive(self._from_child, time.monotonic() + timeout)
        except TimeoutError:
            self.kill()
            return f"worker process did not start within {timeout:g} s:\n{self.stderr_tail()}"
        if reply is None:
            return self._death()
        if reply.get("type") != "ready":
            return f"worker process failed to start: {reply.get('error', reply)}"
        self.ready, self.memory_bound = True, reply.get("memory_bound")
        return None

    def stderr_tail(self, limit: int = 3000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-limit:]

    def request(self, message: dict, timeout: float | None) -> tuple[str, Any, dict | None]:
        """Run one request: ("result", value, last_spec), or ("died" / "timeout" / "error" / "poisoned",
        detail, last_spec).  "poisoned": the worker lost its CUDA context and exited; last_spec is the
        example that did it."""
        problem = self.wait_ready()
        if problem is not None:
            return "died", problem, None
        deadline = None if timeout is None else time.monotonic() + timeout
        last_spec = None
        try:
            send(self._to_child, message)
        except (BrokenPipeError, OSError):
            return "died", self._death(), None
        while True:
            try:
                reply = receive(self._from_child, deadline)
            except TimeoutError:
                self.kill()
                return "timeout", f"no result within {timeout:g} s", last_spec
            if reply is None:
                return "died", self._death(), last_spec
            if reply.get("type") == "example":
                last_spec = reply["spec"]
            elif reply.get("type") == "poisoned":
                self.proc.wait()
                return "poisoned", reply["error"], reply.get("spec")
            elif reply.get("type") == "error":
                return "error", reply["error"], last_spec
            else:
                return "result", reply["value"], last_spec

    def _death(self) -> str:
        code = self.proc.wait()
        why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        child = (self.memory_bound or {}).get("cgroup")
        if memory_cgroup.oom_kills(child):  # the out-of-memory killer, inside the worker's own cgroup
            why += f", {memory_cgroup.OOM_KILLED} in its cgroup {child} (memory.events)"
        return f"worker process died ({why}); its last output:\n{self.stderr_tail()}"

    def finish(self, grace: float = 60.0) -> None:
        """Ask the worker to exit and wait for it (a wrapper such as compute-sanitizer writes its
        summary then); kill it after ``grace`` seconds."""
        try:
            os.close(self._to_child)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        self.close()

    def kill(self) -> None:
        if self._fifo_dir is not None:  # a wrapped worker leads its own process group
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self.kill()
        self._stderr.close()
        memory_cgroup.remove((self.memory_bound or {}).get("cgroup"))
        if self._fifo_dir is not None:
            shutil.rmtree(self._fifo_dir, ignore_errors=True)


class WorkerPool:
    """One worker at a time, replaced after it dies, hangs, loses its CUDA context or ran an unsafe kernel.

    - ``env``: the worker's environment (default: this process's, so a GPU pinned
      through ``CUDA_VISIBLE_DEVICES`` is the worker's GPU too);
    - ``prefix``: a callable giving the command that wraps each new worker
      (``compute-sanitizer ...``), or None;
    - ``compat``: the interpreter compatibility layer's shims each worker installs (None: all);
    - ``memory``: each worker's memory bound (:attr:`RunConfig.worker_memory`; None: no bound).
      ``memory_bound`` is the last worker's, as it applied it (a dict), or None.
    """

    def __init__(self, device: str, *, env: dict[str, str] | None = None,
                 prefix: Callable[[], tuple[str, ...]] | None = None, compat: tuple[str, ...] | None = None,
                 memory: str | int | None = None, turns: Any = None):
        self.device = device
        self.turns = turns
        self.compat = compat
        self.memory = memory
        self.memory_bound: dict | None = None
        self.env = dict(os.environ if env is None else env)
        self.modules: list[str] = []
        self._prefix = prefix
        self._worker: _Worker | None = None
        self.restarts = 0

    def _get(self) -> _Worker:
        if self._worker is None or self._worker.proc.poll() is not None:
            if self._worker is not None:
                self._worker.close()
                self.restarts += 1
            prefix = self._prefix() if self._prefix is not None else ()
            self._worker = _Worker(self.device, list(self.modules), self.env, prefix, self.compat, self.memory,
                                   self.turns)
        return self._worker

    def prestart(self) -> None:
        """Start a worker process if none is running, without waiting for it to be ready."""
        self._get()

    def call(self, message: dict, timeout: float | None) -> tuple[str, Any, dict | None]:
        worker = self._get()
        status, value, last_spec = worker.request(message, timeout)
        self.memory_bound = worker.memory_bound
        if status in ("died", "timeout", "poisoned"):
            worker.close()
            self._worker = None
        return status, value, last_spec

    def finish(self, grace: float = 60.0) -> None:
        """Let the worker exit on its own (see :meth:`_Worker.finish`); the next call starts a new one."""
        if self._worker is not None:
            self._worker.finish(grace)
            self._worker = None

    def retire(self) -> None:
        """Replace the worker before the next call (its heap may be corrupt)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def close(self) -> None:
        self.retire()
