"""The worker's memory bound (workers/worker.py, conformance/memory_bound.py): an example too large for it is
discarded (skipped, saying so), never a crash, and the host never gives the worker that memory."""

from __future__ import annotations

import os
import resource

import pytest

from triton_conformance import get_subject
from triton_conformance.conformance import memory_bound, memory_cgroup
from triton_conformance.conformance.discards import out_of_memory
from triton_conformance.errors import ConformanceUsageError
from triton_conformance.model.config import AUTO, RunConfig, run_config
from triton_conformance.workers.executor import CellExecutor

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's /proc")


def _status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def _address_space_limit(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as f:
        return next(line.split()[3] for line in f if line.startswith("Max address space"))


@pytest.fixture
def hog():
    import importlib

    from tests.cover import _memory_hog

    return importlib.reload(_memory_hog)  # its subjects, registered again after an earlier test's were dropped


def test_a_launcher_allocating_past_the_bound_is_skipped_with_the_reason_and_never_given_the_memory(hog) -> None:
    executor = CellExecutor(run_config(worker_memory="0.5"))
    try:
        result = executor.run(get_subject("doubles_with_a_scratch"), "shape:large-index")
        assert (result.outcome, result.details.get("skip_code")) == ("skipped", "discard:device-memory"), \
            result.message
        pid, bound = executor._pool._worker.proc.pid, executor._pool.memory_bound  # a skip keeps its worker
        peak = _status(pid, "VmHWM")
        assert _address_space_limit(pid) == str(bound["base"] + bound["allowed"])
        # A searched cell: every example discarded, the cell skipped saying why.
        searched = executor.run(get_subject("doubles_with_a_scratch"), "layout:contiguous")
        # The twin, in the same bounded worker: tens of GiB of untouched address space for its arena, run.
        twin = executor.run(get_subject("doubles_with_a_kernel"), "shape:large-index")
    finally:
        executor.close()
    assert (searched.outcome, searched.details.get("skip_code")) == ("skipped", "discard:device-memory")
    assert "discarded for running the machine out of memory (inside the worker's memory bound: 0.5 GiB" in \
        searched.message, searched.message
    assert "out of memory in the launcher" in result.message, result.message
    assert "inside the worker's memory bound: 0.5 GiB of address space" in result.message, result.message
    assert peak < hog.SCRATCH // 2, f"the worker held {peak} bytes at its peak"
    assert twin.outcome == "honoured", twin.message


def test_the_bound_is_not_applied_when_disabled(hog) -> None:
    executor = CellExecutor(run_config(worker_memory="none"))
    try:
        result = executor.run(get_subject("doubles_with_a_scratch"), "shape:large-index")
        limit, bound = _address_space_limit(executor._pool._worker.proc.pid), executor._pool.memory_bound
    finally:
        executor.close()
    assert bound is None
    assert limit == "unlimited"
    assert result.outcome == "honoured", result.message  # given its 2 GiB


@pytest.mark.parametrize(("value", "expected"), [
    ("auto", AUTO), (None, AUTO), ("none", None), ("off", None), ("0", None), ("8", 8 << 30), ("0.5", 1 << 29),
])
def test_the_option_reads_auto_none_or_gib(value, expected) -> None:
    assert run_config(worker_memory=value).worker_memory == expected


@pytest.mark.parametrize("value", ["lots", "-1", "nan", "8GB"])
def test_a_bad_bound_is_a_usage_error_naming_the_option(value) -> None:
    with pytest.raises(ConformanceUsageError, match=rf"--conformance-worker-memory={value!r}, expected auto, none, "
                                                    "or a positive number of GiB"):
        run_config(worker_memory=value, where={"worker_memory": "--conformance-worker-memory"})
    with pytest.raises(ConformanceUsageError, match=r"RunConfig: worker_memory='lots', expected 'auto', None"):
        RunConfig(worker_memory="lots")


def test_auto_is_the_available_memory_less_a_margin_shared_by_the_workers(monkeypatch) -> None:
    monkeypatch.setattr(memory_bound, "available_host_memory", lambda: 20 << 30)
    monkeypatch.setattr(memory_bound, "_total_host_memory", lambda: 24 << 30)
    none = memory_cgroup.CgroupMemory(None, None, None, "no cgroup v2 hierarchy")  # the host's figures alone
    one, two = (memory_bound.bound_for(AUTO, "interpreter", workers=n, cgroup=none) for n in (1, 2))
    margin = max(memory_bound.MIN_MARGIN, int(memory_bound.MARGIN_FRACTION * (24 << 30)))
    assert (one.resource, one.allowed) == ("RLIMIT_AS", (20 << 30) - margin)
    assert two.allowed == ((20 << 30) - margin) // 2 and "shared by 2 workers" in two.describe()
    # On CUDA the driver's terabytes of reserved address space are not memory: the data limit, not RLIMIT_AS.
    assert memory_bound.bound_for(AUTO, "cuda").resource == "RLIMIT_DATA"
    assert memory_bound.bound_for(None, "interpreter") is None
    assert memory_bound.bound_for(3 << 30, "interpreter").allowed == 3 << 30


def test_an_untouched_reservation_widens_the_bound_while_it_is_mapped(monkeypatch) -> None:
    import gc
    import mmap

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = memory_bound.MemoryBound("RLIMIT_AS", 1 << 30, memory_bound._held("RLIMIT_AS"), "as configured")
    monkeypatch.setattr(memory_bound, "_IN_FORCE", [])
    try:
        memory_bound.apply(bound)
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
        with pytest.raises(OSError):  # more than the bound, mapped as ordinary memory: refused
            mmap.mmap(-1, 4 << 30, flags=flags)
        mapping = memory_bound.reserved_mapping(4 << 30, flags)
        assert resource.getrlimit(resource.RLIMIT_AS)[0] == bound.limit + (4 << 30)
        del mapping
        gc.collect()
        assert resource.getrlimit(resource.RLIMIT_AS)[0] == bound.limit
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_torchs_cpu_allocator_refusing_is_out_of_memory_and_other_runtime_errors_are_not() -> None:
    assert out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
                                      "allocate memory: you tried to allocate 17179901976 bytes. Error code 12"))
    assert out_of_memory(MemoryError())
    assert not out_of_memory(RuntimeError("CUDA error: an illegal memory access was encountered"))


class _DeadPool:
    """A pool whose worker aborted on std::bad_alloc inside its bound."""

    memory_bound = memory_bound.MemoryBound("RLIMIT_AS", 2 << 30, 1 << 30, "as configured").to_dict()

    def call(self, message, timeout):
        return ("died", "worker process died (signal SIGABRT); its last output:\nterminate called after throwing "
                "an instance of 'std::bad_alloc'\n  what():  std::bad_alloc", {"dims": {"N": 8}})

    def retire(self) -> None:
        pass


def test_a_worker_that_aborted_inside_its_bound_is_a_discard_naming_the_bound() -> None:
    from triton_conformance import Dim, Tensor, register

    subject = register(lambda x: x * 2, name="cover_bound_doubler", inputs={"x": Tensor(("N",))},
                       dims={"N": Dim(1, 8)}, oracle=lambda x: x * 2)
    executor = CellExecutor(RunConfig())
    executor._pool = _DeadPool()
    result = executor.run(subject, "layout:contiguous")
    assert (result.outcome, result.details["skip_code"]) == ("skipped", "discard:device-memory"), result.message
    assert "inside its memory bound: 2.0 GiB of address space beyond the worker's start-up" in result.message
    assert result.details["memory_bound"]["allowed"] == 2 << 30
