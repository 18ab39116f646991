"""Turns on a GPU that several processes share: examples run side by side, and what times the GPU runs alone.

Two flocks per GPU make a readers-writer lock (:class:`GpuTurns`): ``use`` is
held shared by every process running GPU work and exclusive by one that
times it; ``gate`` is passed through on the way in, shared by shared
holders and held exclusive by a timing holder from before it waits until it
leaves, so a waiting exclusive turn stops new shared ones at the gate
instead of waiting behind them forever.  The kernel drops both when a holder
dies, however it dies.

A process that runs cells takes its turns example by example
(:func:`share`, then the engine's :func:`at_example`, :func:`release` and
:func:`exclusive`): it holds a shared turn from a cell's start to its end and
passes back through the gate at every example's start, so a timing section
elsewhere waits for the examples running now, not for the rest of their
cells (a cell takes seconds; an example milliseconds), and the other
processes stop at their next example while it times.  Inside
:func:`exclusive` this process gives its shared turn up first (flock locks
of two descriptors of one process would wait on each other) and takes it
again after.

Standard library only: the plugin imports this before torch.
"""

from __future__ import annotations

import fcntl
import os
import re
from contextlib import contextmanager
from typing import Iterator

__all__ = ["GpuTurns", "ExampleTurns", "share", "current", "cell", "at_example", "release", "exclusive"]


class GpuTurns:
    """The turns on one GPU (``gpu``, an id) among the processes of a run, through two lock files in
    ``directory``: :meth:`shared` for work that may run beside other work, :meth:`exclusive` for work that must
    have the GPU alone.  Plain data (two paths), so it pickles to a cell worker."""

    def __init__(self, directory: str, gpu: str):
        safe = re.sub(r"[^\w.-]", "_", gpu)
        self.gate = os.path.join(directory, f"gpu-{safe}.gate")
        self.use = os.path.join(directory, f"gpu-{safe}.use")

    @contextmanager
    def shared(self) -> Iterator[None]:
        with _lock_file(self.gate) as gate, _lock_file(self.use) as use:
            _enter_shared(gate, use)
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with _lock_file(self.gate) as gate, _lock_file(self.use) as use:
            _enter_exclusive(gate, use)
            yield

    def __repr__(self) -> str:
        return f"GpuTurns(gate={self.gate!r}, use={self.use!r})"


def _enter_shared(gate: int, use: int) -> None:
    fcntl.flock(gate, fcntl.LOCK_SH)  # waits while an exclusive turn runs or waits
    try:
        fcntl.flock(use, fcntl.LOCK_SH)
    finally:
        fcntl.flock(gate, fcntl.LOCK_UN)


def _enter_exclusive(gate: int, use: int) -> None:
    fcntl.flock(gate, fcntl.LOCK_EX)  # no new shared turn gets past the gate from here on
    fcntl.flock(use, fcntl.LOCK_EX)  # the shared turns taken already end


def _open(path: str) -> int:
    """A descriptor of its own on ``path`` (flock locks belong to the open file).  O_CLOEXEC: processes
    started meanwhile do not inherit it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


@contextmanager
def _lock_file(path: str) -> Iterator[int]:
    """:func:`_open`, unlocked and closed after; the explicit unlock releases the lock even if a forked
    child still holds the descriptor."""
    fd = _open(path)
    try:
        yield fd
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class ExampleTurns:
    """One process's turns on ``turns``, taken example by example (see the module's docstring)."""

    def __init__(self, turns: GpuTurns):
        self.turns = turns
        self.holding = False  # a shared turn
        self.alone = 0  # depth of exclusive() bodies: an inner one keeps the outer's turn
        self._gate: int | None = None
        self._use: int | None = None

    def _fds(self) -> tuple[int, int]:
        if self._gate is None or self._use is None:
            self._gate, self._use = _open(self.turns.gate), _open(self.turns.use)
        return self._gate, self._use

    def at_example(self) -> None:
        """An example (or a cell) starts: back through the gate, where a timing turn asked for waits; nothing
        while this process has the GPU alone."""
        if self.alone:
            return
        gate, use = self._fds()
        if self.holding:
            fcntl.flock(use, fcntl.LOCK_UN)
            self.holding = False
        _enter_shared(gate, use)
        self.holding = True

    def release(self) -> None:
        """The cell ended: no turn until the next one."""
        if self.holding and self._use is not None:
            fcntl.flock(self._use, fcntl.LOCK_UN)
        self.holding = False

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The GPU alone for the body; the shared turn this process held before is given up first and taken
        again after.  Inside another exclusive body it keeps that turn (one wait for the GPU, not one each)."""
        if self.alone:
            self.alone += 1
            try:
                yield
            finally:
                self.alone -= 1
            return
        gate, use = self._fds()
        held = self.holding
        self.release()
        _enter_exclusive(gate, use)
        self.alone = 1
        try:
            yield
        finally:
            self.alone = 0
            fcntl.flock(use, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
            if held:
                self.at_example()


_installed: ExampleTurns | None = None


def share(turns: GpuTurns | None) -> None:
    """This process's turns from now on (None: it shares its GPU with no one, or runs on the CPU)."""
    global _installed
    if _installed is not None:
        _installed.release()
    _installed = ExampleTurns(turns) if turns is not None else None


def current() -> ExampleTurns | None:
    return _installed


def at_example() -> None:
    """An example or a cell starts in this process (nothing without installed turns)."""
    if _installed is not None:
        _installed.at_example()


def release() -> None:
    """A cell ended in this process."""
    if _installed is not None:
        _installed.release()


@contextmanager
def cell() -> Iterator[None]:
    """A cell's GPU work in this process: in its shared turn from the start to the end, however it ends."""
    at_example()
    try:
        yield
    finally:
        release()


@contextmanager
def exclusive() -> Iterator[None]:
    """This process times the GPU in the body: the GPU alone, once the examples running elsewhere end."""
    if _installed is None:
        yield
        return
    with _installed.exclusive():
        yield
