"""The stochastic kernels under test through the interpreter: fused ReLU + dropout
(a model with a probability argument) and stochastic rounding (probabilities from
the data) pass every stochastic cell, and the ordinary cells that check each
example against the model.  Their buggy variants are in tests/zoo, checked by test_zoo.py."""

import pytest

from triton_conformance.model.config import run_config
from triton_conformance import get_subject
from triton_conformance.conformance.kinds import cells_for
from triton_conformance.conformance.runner import run_cell

SUBJECTS = {"relu_dropout": "kernels_under_test.dropout",
            "stochastic_round_bf16": "kernels_under_test.stochastic_rounding"}


def stochastic_cells():
    import importlib

    cases = []
    for name, module in SUBJECTS.items():
        importlib.import_module(module)
        cases += [(name, c) for c in cells_for(get_subject(name)) if c.startswith("stochastic:")]
    return cases


@pytest.mark.parametrize(("name", "cell"), stochastic_cells())
def test_honours_every_stochastic_cell(name, cell, backend, kernels):
    result = run_cell(get_subject(name), cell, backend=backend, config=run_config(profile="ci", seed=2026))
    assert result.outcome == "honoured", result.message
    assert result.duration_s < 60  # the budget per cell is 10 s on an idle 2-core machine (bench/stochastic.py)


@pytest.mark.parametrize("name", SUBJECTS)
@pytest.mark.parametrize("cell", ["layout:transposed", "layout:broadcast", "dtype:float32", "shape:non-pow2"])
def test_honours_ordinary_cells_under_its_model(name, cell, backend, kernels):
    result = run_cell(get_subject(name), cell, backend=backend, config=run_config(profile="ci"))
    assert result.outcome == "honoured", result.message
    assert result.examples > 0


def test_edges_apply_only_where_the_model_has_a_probability_argument(kernels):
    assert "stochastic:edges" in cells_for(get_subject("relu_dropout"))
    assert "stochastic:edges" not in cells_for(get_subject("stochastic_round_bf16"))
