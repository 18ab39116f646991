"""A subject split between workers keeps one compile budget (conformance/search/shared_ledger.py).

As in test_compiles.py, a pure-torch launcher "compiles" through Triton's
``jit_cache_hook`` (on a ``cuda`` back end whose tensors stay on the CPU), so
the budget is exercised without a GPU.  A part of a split subject that runs in
another process is played by wiping this process's own ledger and class book
between the parts, and by separate processes for the lock.
"""

import itertools
import multiprocessing
import os

import pytest

from tests.cover.test_compiles import compiling_add, fake_compile
import triton_conformance as tc
from triton_conformance import Dim, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.search import shared_ledger
from triton_conformance.conformance.search.compiles import LEDGER, BudgetExhausted, CellCompiles, counting_compiles
from triton_conformance.conformance.search.specializations import BOOK
from triton_conformance.model.config import run_config


_ids = itertools.count()


def declare(launcher, dims):
    # Names of this module's own: test_compiles may be imported twice under xdist (as ``cover.test_compiles``
    # and ``tests.cover.test_compiles``), each copy counting its subjects' names from 0 in one ledger.
    return tc.register(launcher, name=f"cover_shared_{launcher.__name__}_{next(_ids)}",
                       inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims=dims, oracle=lambda x: x * 2)


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(shared_ledger.SHARED_LEDGER_ENV, str(tmp_path))
    shared_ledger.forget()
    yield str(tmp_path)
    shared_ledger.forget()


def _another_process(subject_name: str) -> None:
    """What a part on another worker starts with: nothing of this process's ledger or class book."""
    LEDGER.seen.pop(subject_name, None)
    LEDGER.started.pop(subject_name, None)
    for name in [n for n in BOOK.subjects if n.split("::")[0] == subject_name]:
        BOOK.forget(name)
    shared_ledger.forget()


def test_two_parts_of_a_split_subject_share_one_budget_and_its_classes(run_dir):
    subject = declare(compiling_add, {"N": Dim(1, 4096)})
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    config = run_config(profile="ci", compile_budget=1, max_examples=30)
    shared_ledger.create(run_dir, subject.name, ["shape:tiny", "layout:contiguous"])
    tiny = run_cell(subject, "shape:tiny", backend=cuda_on_cpu, config=config)  # part 1 buys the one class
    assert tiny.compiles == 1 and tiny.examples == 30
    _another_process(subject.name)
    contiguous = run_cell(subject, "layout:contiguous", backend=cuda_on_cpu, config=config)  # part 2
    # Part 2 runs inside part 1's class: with a budget of its own it would have compiled one of its own.
    assert contiguous.compiles == 0, contiguous.details
    assert contiguous.examples == 30 and contiguous.details["specializations"]["examples_reused"] == 30
    ledger, book = shared_ledger.ledgers_for(subject.name)
    assert ledger.used(subject.name) == 1 and ledger.started[subject.name] == {"shape:tiny", "layout:contiguous"}
    assert LEDGER.used(subject.name) == 0, "a split subject's compiles go to the shared ledger only"


def test_an_unsplit_subject_keeps_this_processs_ledger(run_dir):
    subject = declare(compiling_add, {"N": Dim(1, 4096)})
    assert shared_ledger.ledgers_for(subject.name) == (None, None)  # the controller created no file for it
    run_cell(subject, "shape:tiny", backend=Backend(name="cuda", device="cpu"),
             config=run_config(profile="ci", compile_budget=1, max_examples=10))
    assert LEDGER.used(subject.name) == 1 and not os.listdir(run_dir)


def test_cells_to_come_are_the_planned_cells_not_started_anywhere(run_dir):
    shared_ledger.create(run_dir, "s", ["a", "b", "c", "d"])
    first, _ = shared_ledger.ledgers_for("s")
    first.start_cell("s", "c")  # part 2 started c
    shared_ledger.forget()
    other, _ = shared_ledger.ledgers_for("s")  # part 1, in another process
    other.start_cell("s", "a")
    assert other.to_come("s", "a", ["a", "b", "c", "d"]) == ["b", "d"]
    assert LEDGER.to_come("s", "b", ["a", "b", "c", "d"]) == ["c", "d"]  # one process: catalogue order


def _buy(path: str, worker: int, budget: int, queue) -> None:  # noqa: ANN001
    """One process's cell of the subject: an example per key, each needing a new specialization."""
    ledger = shared_ledger.SharedLedger(path)
    share = CellCompiles("s", budget, ledger=ledger)
    bought = 0
    with counting_compiles(share):
        for key in range(budget):
            share.start_example()
            share.classes = 0  # every example is this cell's first class: the budget alone holds it back
            try:
                fake_compile("k", f"{worker}-{key}")
                bought += 1
            except BudgetExhausted:
                pass
    queue.put(bought)


def test_processes_sharing_the_ledger_buy_no_more_than_the_budget(tmp_path):
    shared_ledger.create(str(tmp_path), "s", ["a"])
    path = os.path.join(str(tmp_path), "s.ledger")
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    workers = [fork.Process(target=_buy, args=(path, w, 6, queue)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    bought = [queue.get(timeout=5) for _ in workers]
    # Each would buy its 6 with a budget of its own; shared, the four buy 6 between them, not one more.
    assert sum(bought) == 6, bought
    assert shared_ledger.SharedLedger(path).used("s") == 6
