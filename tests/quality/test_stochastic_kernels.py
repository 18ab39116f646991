"""The fused ReLU + dropout kernel through the interpreter: it passes every stochastic
cell and the ordinary cells that check each example against its model.  Its buggy
variants are in tests/zoo/zoo_dropout.py, checked by test_zoo.py."""

import pytest

from triton_conformance import get_subject
from triton_conformance.conformance.cells import cells_for
from triton_conformance.conformance.runner import run_cell


def stochastic_cells():
    import kernels_under_test.dropout  # noqa: F401 - registers relu_dropout

    return [c for c in cells_for(get_subject("relu_dropout").contract) if c.startswith("stochastic:")]


@pytest.mark.parametrize("cell", stochastic_cells())
def test_relu_dropout_honours_every_stochastic_cell(cell, backend, kernels):
    result = run_cell(get_subject("relu_dropout"), cell, backend=backend, profile="ci", seed=2026)
    assert result.outcome == "honoured", result.message
    assert result.duration_s < 60  # the budget per cell is 10 s on an idle 2-core machine (bench/stochastic_cost.py)


@pytest.mark.parametrize("cell", ["layout:transposed", "layout:broadcast", "dtype:float16", "shape:non-pow2"])
def test_relu_dropout_honours_ordinary_cells_under_its_model(cell, backend, kernels):
    result = run_cell(get_subject("relu_dropout"), cell, backend=backend, profile="ci")
    assert result.outcome == "honoured", result.message
    assert result.examples > 0
