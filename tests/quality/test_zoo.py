"""Every bug in the zoo is caught by the cell meant for it, with the right
outcome class and finding, and the correct kernel it mutates passes that cell."""

from __future__ import annotations

import pytest

from tests.zoo import all_bugs, correct_twin
from triton_conformance import get_subject
from triton_conformance.conformance.runner import run_cell

BUGS = all_bugs()


def test_the_zoo_is_big_enough():
    assert len(BUGS) >= 15
    assert len({name for name, *_ in BUGS}) == len(BUGS), "one row per bug"


@pytest.mark.parametrize(("name", "cell", "outcome", "finding"), BUGS, ids=[b[0] for b in BUGS])
def test_the_intended_cell_catches_the_bug(name, cell, outcome, finding, backend, kernels):
    buggy = get_subject(name)
    result = run_cell(buggy, cell, backend=backend, profile="ci")
    assert (result.outcome, result.finding) == (outcome, finding), result.message
    assert result.counterexample is not None and name in result.reproducer
    twin = correct_twin(buggy, kernels)
    passing = run_cell(twin, cell, backend=backend, profile="ci")
    assert passing.passed and passing.outcome != "skipped", (twin.name, passing.outcome, passing.message)
