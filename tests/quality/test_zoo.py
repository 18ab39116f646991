"""Every bug in the zoo is caught by the cell meant for it, with the right
outcome class and finding, and the correct kernel it mutates passes that cell."""

from __future__ import annotations

import pytest

from tests.zoo import all_bugs, all_correct, correct_twin
from triton_conformance.model.config import RunConfig, run_config
from triton_conformance import get_subject
from triton_conformance.workers.executor import CellExecutor
from triton_conformance.conformance.runner import run_cell

BUGS = all_bugs()
CORRECT = all_correct()
# Under the interpreter a read or write far enough out of bounds reaches unmapped memory
# and kills the worker before the guard bands can be compared: the same bug, caught.
OUT_OF_BOUNDS = ("poisoned-read", "oob-write")


@pytest.fixture(scope="module")
def isolated():
    """Buggy kernels run in a worker process, as under the plugin: an out-of-bounds read or
    write that the interpreter turns into a segfault must not take the test process down."""
    executor = CellExecutor(RunConfig(timeout=300.0))
    yield executor
    executor.close()


def test_the_zoo_is_big_enough():
    assert len(BUGS) >= 15
    assert len({name for name, *_ in BUGS}) == len(BUGS), "one row per bug"


@pytest.mark.parametrize(("name", "cell", "outcome", "finding"), BUGS, ids=[b[0] for b in BUGS])
def test_the_intended_cell_catches_the_bug(name, cell, outcome, finding, backend, kernels, isolated):
    buggy = get_subject(name)
    result = isolated.run(buggy, cell)
    got = (result.outcome, result.finding)
    if finding in OUT_OF_BOUNDS and got == ("crash", "process-died"):
        got = (outcome, finding)  # the interpreter faulted on the out-of-bounds access itself
    assert got == (outcome, finding), result.message
    assert result.counterexample is not None and name in result.reproducer
    twin = correct_twin(buggy, kernels)
    passing = run_cell(twin, cell, backend=backend, config=run_config(profile="ci"))
    assert passing.passed and passing.outcome != "skipped", (twin.name, passing.outcome, passing.message)


@pytest.mark.parametrize(("name", "cell"), CORRECT, ids=[f"{n}[{c}]" for n, c in CORRECT])
def test_the_zoo_s_correct_kernels_pass(name, cell, backend, kernels):
    result = run_cell(get_subject(name), cell, backend=backend, config=run_config(profile="ci"))
    assert result.passed and result.outcome != "skipped", (name, result.outcome, result.message)
