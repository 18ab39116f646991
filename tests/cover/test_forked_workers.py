"""Cell workers started by fork on the interpreter (workers/forking.py): the same verdicts as spawned ones,
and a worker that dies is still the cell's crash, with the example it was running."""

from __future__ import annotations

import os

import pytest

from triton_conformance import get_subject
from triton_conformance.model.config import run_config
from triton_conformance.workers.executor import CellExecutor
from triton_conformance.workers.forking import ForkedWorker
from triton_conformance.workers.isolation import WorkerPool


@pytest.fixture
def crash_in_shrink():  # noqa: ANN201
    """tests/cover/_crash_in_shrink.py's subject, registered for this test (the registry is restored after each)."""
    import importlib

    from tests.cover import _crash_in_shrink

    return importlib.reload(_crash_in_shrink)


def _run(fork: bool, subject: str, cells: list[str]):  # noqa: ANN202
    executor = CellExecutor(run_config(profile="ci", seed=5), fork=fork)
    try:
        return [executor.run(get_subject(subject), cell) for cell in cells], executor._pool
    finally:
        executor.close()


def test_a_forked_worker_gives_the_verdicts_of_a_spawned_one(crash_in_shrink):
    cells = ["layout:contiguous", "shape:tiny"]
    (forked, pool), (spawned, _) = _run(True, "crash_in_shrink", cells), _run(False, "crash_in_shrink", cells)
    assert pool.fork
    same = lambda r: (r.outcome, r.finding, r.examples, r.counterexample and r.counterexample.spec)  # noqa: E731
    assert [same(r) for r in forked] == [same(r) for r in spawned]


def test_a_forked_worker_that_dies_is_the_cells_crash_and_is_replaced(crash_in_shrink):
    executor = CellExecutor(run_config(profile="ci"), fork=True)
    try:
        result = executor.run(get_subject("crash_in_shrink"), "shape:non-pow2")
        assert executor._pool._worker is None  # the dead worker is gone
        after = executor.run(get_subject("crash_in_shrink"), "shape:tiny")  # a new fork runs the next cell
        assert isinstance(executor._pool._worker.proc, ForkedWorker)
    finally:
        executor.close()
    assert (result.outcome, result.finding) == ("crash", "process-died"), result.message
    assert "exit status 7" in result.message
    n = result.counterexample.spec["dims"]["N"]
    assert n >= 100 and n not in crash_in_shrink.DRAWN, n
    assert after.outcome == "honoured"


def test_a_forked_worker_keeps_none_of_this_processs_descriptors_but_its_own(tmp_path):
    marker = os.open(str(tmp_path / "held"), os.O_WRONLY | os.O_CREAT)  # a descriptor the child must not keep
    pool = WorkerPool("interpreter", fork=True)
    try:
        status, value, _ = pool.call({"op": "backend"}, 60)
        assert status == "result" and value["name"] == "interpreter"
        child = pool._worker.proc.pid
        held = {os.readlink(f"/proc/{child}/fd/{fd}") for fd in os.listdir(f"/proc/{child}/fd")}
        assert str(tmp_path / "held") not in held, held
    finally:
        pool.close()
        os.close(marker)


def test_fork_is_refused_where_it_cannot_work():
    with pytest.raises(ValueError, match="fork=True needs the interpreter"):
        WorkerPool("cuda", fork=True)
    assert not CellExecutor(run_config(device="cuda"), fork=True).fork
