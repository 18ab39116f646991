"""The worker's memory bound inside a cgroup v2 (conformance/memory_cgroup.py, memory_bound.py, workers/):
the cgroup's memory.max sizes ``auto``, a worker is placed in a child cgroup of its own where the hierarchy
allows it, and a worker the out-of-memory killer ended there is a discard, never a crash.

Most tests use a fake hierarchy: a tmp dir of cgroup interface files, and a ``mkdir`` that gives a new child
the interface files the kernel would.  One test uses this machine's own hierarchy, whatever it allows."""

from __future__ import annotations

import os

import pytest

from triton_conformance import get_subject
from triton_conformance.conformance import memory_bound, memory_cgroup
from triton_conformance.model.config import AUTO, run_config
from triton_conformance.workers.executor import CellExecutor, memory_death

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's /proc")

GiB = 1 << 30


def _tree(tmp_path, files: dict[str, str], own: str = "/job/worker"):
    """A fake hierarchy under tmp_path/root with ``files`` (path -> text), and a /proc/self/cgroup naming ``own``."""
    root = tmp_path / "root"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / own.lstrip("/")).mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "cgroup"
    proc.write_text(f"4:memory:/somewhere/v1\n0::{own}\n")
    return str(root), str(proc)


def test_the_tightest_memory_max_on_the_way_to_the_root_and_its_free_memory(tmp_path) -> None:
    root, proc = _tree(tmp_path, {
        "job/memory.max": str(8 * GiB), "job/memory.current": str(3 * GiB),  # 5 GiB left here
        "job/worker/memory.max": "max", "job/worker/memory.current": str(1 * GiB),
    })
    found = memory_cgroup.probe(root, proc_cgroup=proc)
    assert (found.path, found.limit, found.headroom, found.controller) == \
        (os.path.join(root, "job", "worker"), 8 * GiB, 5 * GiB, True)
    assert "memory.max 8.0 GiB, 5.0 GiB of it free" in found.note and found.note.endswith("free")
    # The host has more: auto is sized from the cgroup's free memory, less the margin of its limit.
    bound = memory_bound.bound_for(AUTO, "interpreter", cgroup=found)
    margin = max(memory_bound.MIN_MARGIN, int(memory_bound.MARGIN_FRACTION * 8 * GiB))
    assert bound.allowed == 5 * GiB - margin, bound
    assert "auto: the cgroup's free memory less" in bound.describe()
    # A cgroup with more room than the host leaves the host's figure in charge.
    roomy = memory_cgroup.CgroupMemory(found.path, 1 << 50, 1 << 50, "roomy", True)
    assert "the host's available memory" in memory_bound.bound_for(AUTO, "interpreter", cgroup=roomy).sized


@pytest.mark.parametrize(("files", "proc", "says"), [
    ({}, None, "no cgroup v2 hierarchy"),
    ({"cgroup.controllers": "cpu io"}, "0::/job/worker\n", "has no memory controller"),
    ({"job/memory.max": "max"}, "0::/job/worker\n", "memory.max is max up to"),
])
def test_without_a_memory_limit_the_probe_says_why_and_auto_is_the_hosts(tmp_path, files, proc, says) -> None:
    root, proc_file = _tree(tmp_path, files)
    if proc is None:
        (tmp_path / "cgroup").write_text("4:memory:/only/v1\n")  # cgroup v1 alone
    found = memory_cgroup.probe(root, proc_cgroup=proc_file)
    assert says in found.note and found.limit is None and found.headroom is None, found
    bound = memory_bound.bound_for(AUTO, "interpreter", cgroup=found)
    assert "the host's available memory" in bound.sized
    assert says in memory_bound.plan_line(AUTO, "interpreter", cgroup=found)


@pytest.fixture
def kernel_mkdir(monkeypatch):
    """``os.mkdir`` as cgroupfs does it: a new child of a cgroup comes with the interface files of the
    controllers its parent's cgroup.subtree_control names."""
    real = os.mkdir

    def mkdir(path, *args, **kwargs):  # noqa: ANN001, ANN202
        real(path, *args, **kwargs)
        parent = os.path.dirname(path)
        subtree = open(os.path.join(parent, "cgroup.subtree_control")).read().split() \
            if os.path.exists(os.path.join(parent, "cgroup.subtree_control")) else []
        names = ["cgroup.procs"] + (["memory.max", "memory.events", "memory.oom.group"] if "memory" in subtree
                                    else [])
        for name in names:
            open(os.path.join(path, name), "w").close()

    monkeypatch.setattr(memory_cgroup.os, "mkdir", mkdir)


def test_a_worker_is_placed_in_a_child_cgroup_bounded_at_its_allowance(tmp_path, kernel_mkdir) -> None:
    root, proc = _tree(tmp_path, {"job/memory.max": str(8 * GiB), "job/memory.current": "0",
                                  "job/worker/memory.max": "max", "job/worker/cgroup.subtree_control": "memory"})
    found = memory_cgroup.probe(root, proc_cgroup=proc)
    child, note = memory_cgroup.place_in_child(found, 3 * GiB, 4321)
    assert child == os.path.join(found.path, "conformance-worker-4321"), note
    read = {name: open(os.path.join(child, name)).read() for name in ("memory.max", "memory.oom.group",
                                                                       "cgroup.procs")}
    assert read == {"memory.max": str(3 * GiB), "memory.oom.group": "1", "cgroup.procs": "4321"}
    assert "memory.max 3.0 GiB" in note
    assert memory_cgroup.oom_kills(child) == 0
    with open(os.path.join(child, "memory.events"), "w") as f:
        f.write("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    assert memory_cgroup.oom_kills(child) == 1


def test_a_parent_that_does_not_delegate_memory_leaves_no_child_and_says_so(tmp_path, kernel_mkdir) -> None:
    root, proc = _tree(tmp_path, {"job/memory.max": str(8 * GiB), "job/worker/cgroup.subtree_control": "cpu"})
    found = memory_cgroup.probe(root, proc_cgroup=proc)
    child, note = memory_cgroup.place_in_child(found, GiB, 99)
    assert child is None and "does not delegate the memory controller" in note
    # A fake directory keeps its interface files, so rmdir leaves it; on cgroupfs it goes.  Nothing was written.
    assert not os.path.exists(os.path.join(found.path, "conformance-worker-99", "memory.max"))


def test_this_machines_hierarchy_is_used_where_it_allows_and_named_where_it_does_not() -> None:
    """The real /sys/fs/cgroup: a child is made and removed where the memory controller is delegated to this
    process's cgroup; elsewhere (cgroup v1, a hybrid host, read-only) the note says why and nothing is left."""
    found = memory_cgroup.probe()
    before = set(os.listdir(found.path)) if found.path else set()
    child, note = memory_cgroup.place_in_child(found, GiB, os.getpid() + 10 ** 7)  # no such process: refused
    assert child is None, note
    assert note, "no reason given"
    if found.path:
        assert set(os.listdir(found.path)) == before, "a child cgroup was left behind"
    line = memory_bound.plan_line(AUTO, "interpreter", cgroup=found)
    assert found.note in line and line.startswith("worker memory: RLIMIT_AS")


@pytest.fixture
def hog():
    import importlib

    from tests.cover import _memory_hog

    return importlib.reload(_memory_hog)


@pytest.mark.parametrize("oom_kill", [1, 0])
def test_a_worker_the_oom_killer_ended_in_its_cgroup_is_a_discard_and_a_plain_kill_a_crash(
        tmp_path, hog, oom_kill) -> None:
    child = tmp_path / "conformance-worker-1"
    child.mkdir()
    (child / "memory.events").write_text(f"oom 1\noom_kill {oom_kill}\n")
    executor = CellExecutor(run_config(worker_memory="4"))
    try:
        executor._pool = executor._new_pool()
        worker = executor._pool._get()
        assert worker.wait_ready() is None
        # As if the worker had placed itself in a child cgroup (this machine may not allow one).
        worker.memory_bound = dict(worker.memory_bound, cgroup=str(child))
        result = executor.run(get_subject("killed_like_by_the_oom_killer"), "layout:contiguous")
    finally:
        executor.close()
    if oom_kill:
        assert (result.outcome, result.details.get("skip_code")) == ("skipped", "discard:device-memory"), \
            result.message
        assert "killed by the out-of-memory killer in its cgroup" in result.message, result.message
    else:
        assert (result.outcome, result.finding) == ("crash", "process-died"), result.message
    assert memory_death("worker process died (signal SIGKILL); its last output:\n") is None
