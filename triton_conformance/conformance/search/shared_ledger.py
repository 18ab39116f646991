"""One compile ledger and class book for a subject whose cells run on several workers at once.

Under ``--dist loadgroup`` a long subject's cells may be cut into parts that
run on different pytest workers (:mod:`triton_conformance.plugin.splitting`),
so in different processes.  Its compile budget must still hold for the whole
run, and each part should run inside the classes the others compiled (Triton's
on-disk cache already shares their binaries).  So the subject's
:class:`~.compiles.CompileLedger` and :class:`~.specializations.ClassBook`
live in two files in the run's directory (``$TRITON_CONFORMANCE_SHARED_LEDGER``,
set on each worker by the controller):

- a read stats the file and reloads it only when another process replaced it;
- a change takes an exclusive ``flock`` on the subject's lock file, reloads,
  changes, and replaces the file atomically (write then rename), so a reader
  never sees half a file and two writers never lose each other's change;
- Triton's compile hook holds the lock across its check of the budget and its
  record (:meth:`~.compiles.CompileLedger.transaction`), so two workers cannot
  both buy the subject's last specialization.

A subject is shared only if the controller created its ledger file (with the
cells planned for it: :func:`create`); every other subject keeps this
process's :data:`~.compiles.LEDGER` and :data:`~.specializations.BOOK`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pickle
import re
from collections.abc import Iterator
from typing import Any

from triton_conformance.conformance.search.compiles import CompileLedger
from triton_conformance.conformance.search.specializations import ClassBook

__all__ = ["SHARED_LEDGER_ENV", "SharedLedger", "SharedBook", "create", "ledgers_for", "forget"]

SHARED_LEDGER_ENV = "TRITON_CONFORMANCE_SHARED_LEDGER"


class FileBacked:
    """The state of an :class:`~.compiles.InProcess` dataclass (its fields) kept in the file ``path``."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path, self.lock_path = path, path + ".lock"
        self._stamp: tuple | None = None  # (inode, mtime_ns, size) of the file last read
        self._depth = 0  # nested changes take the lock once
        self._changed = False

    def _stat(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _sync(self) -> None:
        if self._depth:
            return  # inside a change: this process holds the lock and the latest state
        stamp = self._stat()
        if stamp == self._stamp:
            return
        state: dict[str, Any] = {}
        if stamp is not None:
            with open(self.path, "rb") as f:
                state = pickle.load(f)
        for f in dataclasses.fields(self):
            setattr(self, f.name, state[f.name] if f.name in state else f.default_factory())
        self._stamp = stamp

    @contextlib.contextmanager
    def _writing(self, mutates: bool = True) -> Iterator[None]:
        if self._depth:
            self._changed |= mutates
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with open(self.lock_path, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._sync()
                self._depth, self._changed = 1, mutates
                try:
                    yield
                except BaseException:
                    self._stamp = None  # this process's copy may be half changed: read the file again
                    raise
                finally:
                    self._depth = 0
                if self._changed:
                    self._save()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _save(self) -> None:
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as f:
            pickle.dump({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, f,
                        protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, self.path)
        self._stamp = self._stat()


class SharedLedger(FileBacked, CompileLedger):
    """A :class:`~.compiles.CompileLedger` in a file that several processes share."""


class SharedBook(FileBacked, ClassBook):
    """A :class:`~.specializations.ClassBook` in a file that several processes share."""


def _paths(directory: str, subject: str) -> tuple[str, str]:
    stem = os.path.join(directory, re.sub(r"[^A-Za-z0-9_.-]", "_", subject))
    return stem + ".ledger", stem + ".book"


def create(directory: str, subject: str, cells: list[str]) -> None:
    """Share ``subject``'s ledger and class book between the processes of this run (the controller, before
    any of its cells is sent out): ``cells`` are its cells in this run, in catalogue order."""
    ledger = SharedLedger(_paths(directory, subject)[0])
    with ledger._writing():
        ledger.planned[subject] = list(cells)


_OPEN: dict[str, tuple[SharedLedger, SharedBook]] = {}  # this process's handles, by ledger path


def ledgers_for(subject: str) -> tuple[CompileLedger | None, ClassBook | None]:
    """The shared ledger and class book of ``subject`` when this run split it between workers, else
    (None, None): this process's own."""
    directory = os.environ.get(SHARED_LEDGER_ENV)
    if not directory:
        return None, None
    ledger_path, book_path = _paths(directory, subject)
    if ledger_path not in _OPEN:
        if not os.path.exists(ledger_path):
            return None, None
        _OPEN[ledger_path] = SharedLedger(ledger_path), SharedBook(book_path)
    return _OPEN[ledger_path]


def forget() -> None:
    """Drop this process's handles (a test that starts another run's directory)."""
    _OPEN.clear()
