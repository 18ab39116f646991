"""The worker process's memory bound: the suite, not the host's out-of-memory killer, notices first.

A launcher that materialises a 2^31-element intermediate can take a host's
whole memory; the out-of-memory killer then ends whichever process it likes,
perhaps not ours.  So each worker process bounds what it may allocate
(:func:`apply`, called by the worker once it has started), and an allocation
past the bound fails at once, inside the example: a ``MemoryError`` or torch's
allocation error, which the battery discards as ``device-memory``
(:mod:`.search.allowance`), or a worker that aborted on ``std::bad_alloc``,
which the executor discards the same way.  Neither is ever a verdict.

The bound is a soft resource limit, counted beyond what the worker held once
it had started (its libraries, torch and triton):

- on the interpreter, ``RLIMIT_AS`` (address space);
- on CUDA, ``RLIMIT_DATA`` (private writable mappings): the CUDA driver and
  triton reserve terabytes of address space, as inaccessible mappings that
  it does not count; the GPU's own memory is never bounded here.

``auto`` sizes it from the host's available memory when the worker starts,
less a margin, shared among the xdist workers of the run.

Inside a cgroup v2 (:mod:`.memory_cgroup`), ``auto`` is sized from the smaller of
the host's available memory and what the cgroup's ``memory.max`` leaves; where
the worker may create a child cgroup with the memory controller, :func:`apply`
moves it into one of its own whose ``memory.max`` is the bound, so the
out-of-memory killer can only pick the worker, and a death there (the child's
``oom_kill``) is a discard, never a verdict.  :func:`plan_line` says in the
run's header and environment which of these applies.

A mapping that is reserved but never touched (the large-index emulation's
arena: tens of GiB of address space, a few MB of memory) is address space
and not memory: :func:`reserved_mapping` widens the limit by its size while it is mapped.
"""

from __future__ import annotations

import mmap
import os
import resource
import weakref
from dataclasses import dataclass, replace
from typing import Any

from triton_conformance.conformance import memory_cgroup
from triton_conformance.model.config import AUTO, on_cuda

__all__ = ["MemoryBound", "bound_for", "apply", "current", "reserved_mapping", "available_host_memory", "plan_line",
           "MARGIN_FRACTION", "MIN_MARGIN", "MIN_BOUND"]

# Left to the rest of the host under ``auto``: this fraction of its memory, and at least MIN_MARGIN.
MARGIN_FRACTION = 0.05
MIN_MARGIN = 1 << 30
# The least ``auto`` gives a worker, however little is available: below it no example could run at all.
MIN_BOUND = 1 << 30

_RESOURCES = {"RLIMIT_AS": ("VmSize", "address space"), "RLIMIT_DATA": ("VmData", "private writable memory")}


@dataclass(frozen=True)
class MemoryBound:
    """A worker's bound: ``allowed`` bytes beyond ``base``, what it held once started, counted as ``resource``
    (``RLIMIT_AS`` or ``RLIMIT_DATA``); ``sized``: how the bound was chosen (for messages); ``cgroup``: the
    worker's own child cgroup once :func:`apply` placed it there (None: the resource limit alone);
    ``cgroup_note``: what the cgroup v2 probe found, or why no child cgroup was made."""

    resource: str
    allowed: int
    base: int
    sized: str
    cgroup: str | None = None
    cgroup_note: str = ""

    @property
    def limit(self) -> int:
        return self.base + self.allowed

    def describe(self) -> str:
        inside = f"; in {self.cgroup_note}" if self.cgroup is not None else ""
        return (f"{self.allowed / (1 << 30):.1f} GiB of {_RESOURCES[self.resource][1]} beyond the worker's "
                f"start-up ({self.resource}, {self.sized}{inside})")

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "allowed": self.allowed, "base": self.base, "sized": self.sized,
                "cgroup": self.cgroup, "cgroup_note": self.cgroup_note, "describe": self.describe()}


def available_host_memory() -> int:
    """Bytes the host could give now without swapping (``MemAvailable``)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _total_host_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _held(resource_name: str) -> int:
    """What this process holds now, as ``resource_name`` counts it (``/proc/self/status``)."""
    field = _RESOURCES[resource_name][0] + ":"
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))


def bound_for(setting: str | int | None, device: str, *, workers: int = 1,
              cgroup: memory_cgroup.CgroupMemory | None = None) -> MemoryBound | None:
    """The bound a worker on ``device`` gets for ``setting`` (:attr:`RunConfig.worker_memory`): None for None
    (no bound) or where the platform has no such limit; ``workers``: processes sharing the host under ``auto``;
    ``cgroup``: this process's cgroup v2 (default: :func:`memory_cgroup.probe`), whose free memory under its
    ``memory.max`` caps ``auto`` where it is less than the host's."""
    name = "RLIMIT_DATA" if on_cuda(device) else "RLIMIT_AS"
    if setting is None or not hasattr(resource, name) or not os.path.exists("/proc/self/status"):
        return None
    cgroup = memory_cgroup.probe() if cgroup is None else cgroup
    if setting == AUTO:
        total, available, source = _total_host_memory(), available_host_memory(), "the host's available memory"
        if cgroup.headroom is not None and cgroup.headroom < available:
            total, available, source = cgroup.limit, cgroup.headroom, "the cgroup's free memory"
        margin = max(MIN_MARGIN, int(MARGIN_FRACTION * total))
        allowed = max(MIN_BOUND, (available - margin) // max(1, workers))
        share = f", shared by {workers} workers" if workers > 1 else ""
        sized = f"auto: {source} less {margin / (1 << 30):.1f} GiB{share}"
    else:
        allowed, sized = int(setting), "as configured"
    return MemoryBound(name, allowed, _held(name), sized, cgroup_note=cgroup.note)


def plan_line(setting: str | int | None, device: str, *, workers: int = 1,
              cgroup: memory_cgroup.CgroupMemory | None = None) -> str:
    """One line for the run's header and environment: which memory bound each worker will apply."""
    cgroup = memory_cgroup.probe() if cgroup is None else cgroup
    bound = bound_for(setting, device, workers=workers, cgroup=cgroup)
    if bound is None:
        return "worker memory: unbounded" + (" (--conformance-worker-memory=none)" if setting is None else
                                              " (no resource limits on this platform)")
    child = ("; each worker asks for a child cgroup of its own with that memory.max" if cgroup.controller
             else "; no child cgroups: the resource limit alone")
    return (f"worker memory: {bound.resource}, {bound.allowed / (1 << 30):.1f} GiB beyond start-up "
            f"({bound.sized}); {bound.cgroup_note}{child}")


_IN_FORCE: list[MemoryBound] = []  # the bound applied in this process, if any


def apply(bound: MemoryBound | None, *, cgroup: memory_cgroup.CgroupMemory | None = None) -> MemoryBound | None:
    """Set ``bound``'s soft limit on this process (the hard limit stays; None: nothing is bounded), and move
    the process into a child cgroup of ``cgroup`` (default: :func:`memory_cgroup.probe`) whose ``memory.max``
    is ``bound.allowed``, where that can be done.  Returns the bound in force: with its child cgroup, or
    with ``cgroup_note`` saying why there is none."""
    if bound is None:
        return None
    which = getattr(resource, bound.resource)
    _, hard = resource.getrlimit(which)
    limit = bound.limit if hard == resource.RLIM_INFINITY else min(bound.limit, hard)
    resource.setrlimit(which, (limit, hard))
    cgroup = memory_cgroup.probe() if cgroup is None else cgroup
    child, note = memory_cgroup.place_in_child(cgroup, bound.allowed, os.getpid())
    if child is None and note != bound.cgroup_note:  # the probe's finding, then why no child was made
        note = f"{bound.cgroup_note}; no child cgroup: {note}"
    bound = replace(bound, cgroup=child, cgroup_note=note)
    _IN_FORCE[:] = [bound]
    return bound


def current() -> MemoryBound | None:
    """The bound in force in this process, or None."""
    return _IN_FORCE[0] if _IN_FORCE else None


def _widen(resource_name: str, nbytes: int) -> None:
    which = getattr(resource, resource_name)
    soft, hard = resource.getrlimit(which)
    if soft == resource.RLIM_INFINITY:
        return
    soft = max(0, soft + nbytes)
    resource.setrlimit(which, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def reserved_mapping(nbytes: int, flags: int) -> mmap.mmap:
    """An anonymous mapping of ``nbytes`` (``flags``: ``mmap.MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE``)
    whose pages mostly stay untouched: address space, not memory, so the bound in force (both limits count
    such a mapping) is widened by its size from now until the mapping is collected."""
    bound = current()
    if bound is None:
        return mmap.mmap(-1, nbytes, flags=flags)
    _widen(bound.resource, nbytes)
    try:
        mapping = mmap.mmap(-1, nbytes, flags=flags)
    except BaseException:
        _widen(bound.resource, -nbytes)
        raise
    weakref.finalize(mapping, _widen, bound.resource, -nbytes)
    return mapping
