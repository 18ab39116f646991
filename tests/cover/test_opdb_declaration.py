"""bench/opdb_declarations.py, the generic declaration: the inputs an op documents as written (its aten schemas'
``Tensor(a!)``) are declared in place, so the memory check expects those writes and still catches any other."""

from __future__ import annotations

import os
import sys
import types
import warnings

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
opdb = pytest.importorskip("opdb_declarations")


def _batch_norm_inputs():
    x = torch.randn(4, 3, 5)
    return [x, torch.rand(3) + 0.5, torch.randn(3), torch.zeros(3), torch.ones(3)]


def test_the_written_inputs_are_the_schemas_mutable_arguments():
    xs = _batch_norm_inputs()
    legit = torch.ops.aten._native_batch_norm_legit.default
    assert opdb._written_inputs(lambda: legit(*xs, True, 0.1, 1e-5), xs, torch) == [3, 4]  # running mean, var
    assert opdb._written_inputs(lambda: xs[0] * 2, xs, torch) == []


def _declared(name, op=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        decl = next(opdb.declarations("cpu", [name]))
        if op is not None:  # the same declaration, of another op
            decl.op = types.SimpleNamespace(op=op, name=decl.op.name + "_variant", variant_test_name="")
        return decl, decl.register(torch)


def _memory(subject):
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_cell(subject, "memory", config=run_config(profile="ci", seed=5, device="interpreter"))


def test_a_training_batch_norm_declares_its_running_statistics_and_any_other_write_is_caught():
    decl, subject = _declared("_native_batch_norm_legit")
    assert decl.inplace == ("x3", "x4")
    assert _memory(subject).finding != "mutated-input"
    real = decl.op.op

    def also_writes_the_weight(*args, **kwargs):
        out = real(*args, **kwargs)
        args[1].mul_(1.5)  # an undocumented write into the weight
        return out

    _, buggy = _declared("_native_batch_norm_legit", also_writes_the_weight)
    result = _memory(buggy)
    assert result.finding == "mutated-input" and "x1" in result.message, result.message


@pytest.mark.parametrize("name", ["nn.functional.conv1d", "slice_scatter"])
def test_the_declared_dims_run_at_every_corner_of_their_ranges(name):
    """conv1d's kernel may not exceed its padded input, slice_scatter's src is the slice's size (its end is
    20): the probe ties the first two dims and bounds the second, so no drawn size breaks the op."""
    import itertools

    decl, _ = _declared(name)
    symbols = [s for s, m in decl.dim_max.items() if m > 1]
    generator = torch.Generator().manual_seed(0)
    for corner in itertools.product(*[(decl.dim_min, decl.dim_max[s]) for s in symbols]):
        dims = {**{s: 1 for s in decl.dim_max}, **dict(zip(symbols, corner))}
        assert decl._runs(dims, torch, generator), f"{name} fails at {dims}"
    if name == "slice_scatter":
        assert decl.dim_max == {"A": 20}


def test_an_op_that_takes_strides_and_an_offset_gets_a_tensor_that_owns_its_storage():
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    decl, subject = _declared("as_strided_copy")
    assert decl.owns_storage and not _declared("add")[0].owns_storage  # from the aten schemas it reaches
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_cell(subject, "layout:offset", config=run_config(profile="ci", seed=7, device="interpreter"))
    # as a view at an offset, its storage_offset=0 would address the elements before the view
    assert result.outcome == "honoured", result.message


def test_only_the_outputs_autograd_differentiates_carry_a_gradient():
    decl, _ = _declared("_batch_norm_with_update")  # (out, save_mean, save_invstd): the statistics are saved
    assert decl.has_backward(torch) and decl.backward_outputs() == {0: decl.outputs[0]}
    both, _ = _declared("var_mean")
    assert both.has_backward(torch) and set(both.backward_outputs()) == {0, 1}
