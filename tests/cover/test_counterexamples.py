"""A stored finding's values in hand: ``counterexample_inputs`` and ``triton-conformance replay --dump``.

A real finding of a zoo bug, found on the interpreter, is rebuilt from its results file: the tensors have
the counterexample's strides and storage offset, and the buggy launcher run on them by hand still
disagrees with the oracle where its correct twin agrees (or refuses).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the zoo's @triton.jit kernels are defined
import subprocess
import sys

import pytest
import torch

import triton_conformance
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.runner import run_cell
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.subject import get_subject
from triton_conformance.reports.results_json import results_document, write_results


@pytest.fixture(scope="module", autouse=True)
def _zoo():
    # Module scope: declared before the registry is saved for each test, so they stay declared.
    import kernels_under_test.gemv  # noqa: F401 - the correct twins
    import kernels_under_test.rms_norm  # noqa: F401
    import tests.zoo.zoo_gemv  # noqa: F401 - the bugs
    import tests.zoo.zoo_gradients  # noqa: F401


@pytest.fixture(scope="module")
def gemv_finding(tmp_path_factory):
    return _finding("zoo_gemv_unchecked_contiguous", "layout:transposed", tmp_path_factory.mktemp("gemv"))


def _finding(name: str, cell: str, tmp_path) -> tuple:
    result = run_cell(get_subject(name), cell, backend=Backend())
    assert result.counterexample is not None, (result.outcome, result.message)
    path = tmp_path / "results.json"
    write_results(str(path), results_document([result], {"device": "interpreter"}))
    return result, str(path)


def _views_match(loaded: dict, result) -> None:
    for name, view in result.counterexample.tensors.items():
        t = loaded[name]
        assert (tuple(t.shape), t.stride(), t.storage_offset(), str(t.dtype).removeprefix("torch.")) == (
            view.shape, view.strides, view.storage_offset, view.dtype), name


def test_the_dump_of_a_layout_finding_reproduces_it_by_hand(gemv_finding, tmp_path):
    result, path = gemv_finding
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message + str(result.details)[-2000:]
    example = triton_conformance.counterexample_inputs(path, "zoo_gemv_unchecked_contiguous[layout:transposed]")
    example.save(str(tmp_path / "dump.pt"))
    loaded = torch.load(str(tmp_path / "dump.pt"))
    assert set(loaded) >= {"inputs", "scalars", "grad_outputs", "spec"} and loaded["grad_outputs"] == []
    _views_match(loaded["inputs"], result)
    assert any(t.stride() != t.contiguous().stride() for t in loaded["inputs"].values())  # a transposed A
    buggy = get_subject("zoo_gemv_unchecked_contiguous")
    judge = Judge(buggy)
    spec = example.spec
    out = buggy.launcher(**loaded["inputs"], **loaded["scalars"])
    found = judge.compare(loaded["inputs"], spec.dims, spec.dtypes, loaded["scalars"], (out,))
    assert found is not None and (found.outcome, found.kind) == ("wrong", "mismatch"), found
    # The same tensors, contiguous: the bug is the layout, so the kernel agrees with the oracle there.
    plain = {n: t.contiguous() for n, t in loaded["inputs"].items()}
    assert judge.compare(plain, spec.dims, spec.dtypes, loaded["scalars"], (buggy.launcher(**plain),)) is None


def test_a_grad_finding_carries_its_grad_output(tmp_path):
    result, path = _finding("zoo_rms_norm_grad_output_as_contiguous", "grad:layout:transposed", tmp_path)
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message + str(result.details)[-2000:]
    example = triton_conformance.counterexample_inputs(
        path, "zoo_rms_norm_grad_output_as_contiguous[grad:layout:transposed]")
    (go,) = example.grad_outputs
    _views_match({**example.inputs, "grad_output": go}, result)  # grad_output's view is recorded too
    buggy = get_subject("zoo_rms_norm_grad_output_as_contiguous")
    spec = example.spec
    layout = spec.layout("grad_output")
    assert go.stride() != go.contiguous().stride() or layout.offset, layout  # its own drawn layout
    leaves = {n: t.detach().clone().requires_grad_(n in buggy.contract.backward.grads)
              for n, t in example.inputs.items()}
    out = buggy.launcher(**leaves, **example.scalars)
    grads = torch.autograd.grad(out, [leaves[n] for n in buggy.contract.backward.grads], grad_outputs=go)
    found = Judge(buggy).compare_gradients(example.inputs, go.to(torch.float64), spec.dims, spec.dtypes,
                                           example.scalars, grads)
    assert found is not None and found.outcome == "wrong", found
    # With the grad_output made contiguous (what the bug assumes), the same backward agrees.
    out = buggy.launcher(**leaves, **example.scalars)
    grads = torch.autograd.grad(out, [leaves[n] for n in buggy.contract.backward.grads],
                                grad_outputs=go.contiguous())
    assert Judge(buggy).compare_gradients(example.inputs, go.to(torch.float64), spec.dims, spec.dtypes,
                                          example.scalars, grads) is None


def test_replay_dump_saves_the_example(gemv_finding, tmp_path):
    result, path = gemv_finding
    dump = tmp_path / "cli.pt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "triton_conformance.cli", "replay", path,
                          "zoo_gemv_unchecked_contiguous[layout:transposed]", "--dump", str(dump)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr  # it still fails, and the dump was written first
    loaded = torch.load(str(dump))
    _views_match(loaded["inputs"], result)
    assert loaded["spec"] == result.counterexample.spec


def test_bad_sources_are_named():
    with pytest.raises(InvalidArgument, match=r"subject= and cell="):
        triton_conformance.counterexample_inputs({"dims": {"M": 1}})
    with pytest.raises(InvalidArgument, match=r"subject='no_such_subject' is not declared.*module="):
        triton_conformance.counterexample_inputs({"dims": {"M": 1}}, "no_such_subject[layout:transposed]")
    with pytest.raises(InvalidArgument, match=r"has no counterexample"):
        triton_conformance.counterexample_inputs({"subject": "zoo_gemv_unchecked_contiguous", "cell": "memory",
                                                  "outcome": "honoured", "counterexample": None})
    with pytest.raises(InvalidArgument, match=r"expected a Spec"):
        triton_conformance.counterexample_inputs(None, subject="zoo_gemv_unchecked_contiguous",
                                                 cell="layout:transposed")
    with pytest.raises(InvalidArgument, match=r"large-index cell's fixed plan has no spec to build"):
        triton_conformance.counterexample_inputs({"dims": {"M": 1 << 31, "N": 1}, "dtypes": {}},
                                                 "zoo_gemv_unchecked_contiguous[shape:large-index]")
