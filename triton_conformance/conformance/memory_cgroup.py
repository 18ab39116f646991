"""cgroup v2 and the worker's memory bound: the limit a cgroup sets, and a child cgroup of the worker's own.

A worker inside a cgroup v2 whose ``memory.max`` (its own, or an ancestor's) is
below the host's memory can only use that much, however much the host has free:
:func:`probe` reads the tightest ``memory.max`` on the way to the hierarchy's
root and what is left under it (``memory.max - memory.current``), and
:mod:`.memory_bound` sizes ``auto`` from the smaller of that and the host's.

Where the worker's cgroup delegates the memory controller to children it may
create, :func:`place_in_child` moves the worker into a child cgroup of its own
whose ``memory.max`` is the bound: the kernel's out-of-memory killer then picks
its victim inside that child, never another process of the host, and the
child's ``memory.events`` (``oom_kill``, :func:`oom_kills`) tells an
out-of-memory death from a crash once the worker is gone.

Neither is always there: no cgroup v2 (cgroup v1, or not Linux), no memory
controller in the v2 hierarchy (a hybrid host keeps it on v1), a read-only
hierarchy, a parent that does not delegate ``memory``.  Each case is a
:class:`CgroupMemory` whose ``note`` says so, and the bound falls back to the
resource limits alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["CgroupMemory", "probe", "place_in_child", "oom_kills", "remove", "CHILD_PREFIX", "OOM_KILLED"]

CHILD_PREFIX = "conformance-worker-"
# What a dead worker's message says when its child cgroup's memory.events counted an oom_kill.
OOM_KILLED = "killed by the out-of-memory killer"
_UNLIMITED = "max"


@dataclass(frozen=True)
class CgroupMemory:
    """What this process's cgroup v2 allows: ``path``, its directory (None: no cgroup v2 found); ``limit``, the
    tightest ``memory.max`` from it to the root (None: none set); ``headroom``, the least ``memory.max -
    memory.current`` on that way (None: none set); ``note``: what was found, for the run's header;
    ``controller``: whether the memory controller is on at ``path`` or above it."""

    path: str | None
    limit: int | None
    headroom: int | None
    note: str
    controller: bool = False


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _v2_mount(mounts: str) -> str | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or ``.../unified`` on a hybrid host)."""
    text = _read(mounts) or ""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return fields[1]
    return None


def _own_path(proc_cgroup: str) -> str | None:
    """This process's path in the v2 hierarchy: the ``0::PATH`` line of ``/proc/self/cgroup``."""
    for line in (_read(proc_cgroup) or "").splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    return None


def probe(root: str | None = None, *, proc_cgroup: str = "/proc/self/cgroup",
          mounts: str = "/proc/self/mounts") -> CgroupMemory:
    """This process's cgroup v2 memory limit.  ``root``: the hierarchy's mount (default: read off ``mounts``);
    ``proc_cgroup``: the file naming this process's cgroup (a fake tree's, in tests)."""
    root = root or _v2_mount(mounts)
    own = _own_path(proc_cgroup)
    if root is None or own is None:
        return CgroupMemory(None, None, None, "no cgroup v2 hierarchy (cgroup v1 or none)")
    path = os.path.normpath(os.path.join(root, own.lstrip("/")))
    if not os.path.isdir(path):
        return CgroupMemory(None, None, None, f"cgroup v2 directory {path} not found")
    limit = headroom = None
    where, seen_controller = None, False
    directory = path
    while True:
        text = _read(os.path.join(directory, "memory.max"))
        if text is not None:
            seen_controller = True
            if text != _UNLIMITED:
                value = int(text)
                used = int(_read(os.path.join(directory, "memory.current")) or 0)
                if limit is None or value < limit:
                    limit, where = value, directory
                left = max(0, value - used)
                headroom = left if headroom is None else min(headroom, left)
        if os.path.normpath(directory) == os.path.normpath(root):
            break
        directory = os.path.dirname(directory)
    if not seen_controller:
        note = f"cgroup v2 {path} has no memory controller (memory.max absent up to {root})"
    elif limit is None:
        note = f"cgroup v2 {path}: memory.max is max up to {root}"
    else:
        note = (f"cgroup v2 {where}: memory.max {limit / (1 << 30):.1f} GiB, "
                f"{headroom / (1 << 30):.1f} GiB of it free")
    return CgroupMemory(path, limit, headroom, note, seen_controller)


def place_in_child(cgroup: CgroupMemory, max_bytes: int, pid: int) -> tuple[str | None, str]:
    """Move process ``pid`` into a new child of ``cgroup`` with ``memory.max = max_bytes`` and
    ``memory.oom.group = 1``.  Returns (the child's directory, a note), or (None, why it could not be done;
    nothing is left behind)."""
    if cgroup.path is None:
        return None, cgroup.note
    child = os.path.join(cgroup.path, f"{CHILD_PREFIX}{pid}")
    try:
        os.mkdir(child)
    except OSError as exc:
        return None, f"cannot create a child cgroup in {cgroup.path} ({exc.strerror or exc})"
    if not os.path.exists(os.path.join(child, "memory.max")):
        remove(child)
        return None, (f"{cgroup.path} does not delegate the memory controller to its children "
                      "(memory is not in its cgroup.subtree_control)")
    try:
        for name, value in (("memory.max", max_bytes), ("memory.swap.max", 0), ("memory.oom.group", 1),
                            ("cgroup.procs", pid)):
            if name != "cgroup.procs" and not os.path.exists(os.path.join(child, name)):
                continue  # memory.swap.max without swap accounting; memory.oom.group before Linux 4.19
            with open(os.path.join(child, name), "w") as f:
                f.write(str(value))
    except OSError as exc:
        remove(child)
        return None, f"cannot set up the child cgroup {child} ({exc.strerror or exc})"
    return child, f"the worker's own cgroup {child}, memory.max {max_bytes / (1 << 30):.1f} GiB"


def oom_kills(child: str | None) -> int:
    """How many processes the out-of-memory killer ended inside ``child`` (its ``memory.events``); 0 if unknown."""
    if child is None:
        return 0
    for line in (_read(os.path.join(child, "memory.events")) or "").splitlines():
        name, _, count = line.partition(" ")
        if name == "oom_kill":
            return int(count or 0)
    return 0


def remove(child: str | None) -> None:
    """Remove ``child`` once its processes are gone (a cgroup directory is removed with ``rmdir``)."""
    if child is None:
        return
    try:
        os.rmdir(child)
    except OSError:
        pass
