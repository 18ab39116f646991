"""torch's own ops pass every cell: the tolerance raises no alarm on a correct computation.

The CI share of ``bench/calibration.py`` (which runs fresh ``nightly`` seeds):
every cell of every subject of ``tests/calibration/``, at the ``ci`` profile
(its draws fixed by the cell's name) and at one fixed seed of the ``dev``
profile (other draws, as fixed).  A failing cell names the command that replays it.
"""

from __future__ import annotations

import pytest

from tests.calibration import subjects
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.kinds.base import cells_for
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config

PASSING = ("honoured", "rejected", "accepted", "skipped")
SUBJECTS = subjects()
# torch's ops never go through the interpreter, so its bf16 probe does not concern them: bf16 cells run.
TORCH = Backend(name="interpreter")


def _failing(subject, config, cells):
    failed = []
    for cell in cells:
        result = run_cell(subject, cell, backend=TORCH, config=config)
        if result.outcome not in PASSING:
            failed.append(f"{cell}: {result.outcome} ({result.finding}) {result.message[:300]}")
    return failed


def _check(subject, profile, seed, grad):
    cells = [c for c in cells_for(subject) if c.startswith("grad:") == grad]
    failed = _failing(subject, run_config(profile=profile, seed=seed), cells)
    replay = (f"python bench/calibration.py --profile {profile} --seed {seed or 0} --subjects {subject.name}"
              f"{' --cells grad:' if grad else ''}")
    assert not failed, f"{len(failed)} false alarm(s); replay with `{replay}`:\n" + "\n".join(failed)


PROFILES = pytest.mark.parametrize("profile, seed", [("ci", None), ("dev", 22)], ids=["ci", "dev-22"])
EACH = pytest.mark.parametrize("subject", SUBJECTS, ids=[s.name for s in SUBJECTS])


@PROFILES
@EACH
def test_torchs_own_op_passes_every_forward_cell(subject, profile, seed):
    _check(subject, profile, seed, grad=False)


@PROFILES
@EACH
def test_torchs_own_backward_passes_every_grad_cell(subject, profile, seed):
    _check(subject, profile, seed, grad=True)


def test_the_calibration_covers_the_issues_list_in_three_dtypes_forward_and_backward():
    ops = {"sum", "mean", "cumsum", "softmax", "log_softmax", "layer_norm", "layer_norm_no_bias", "rms_norm",
           "matmul", "cross_entropy", "gelu", "silu", "sdpa"}
    names = {s.name.removeprefix("torch_") for s in SUBJECTS}
    assert ops <= names, ops - names
    for s in (s for s in SUBJECTS if s.name.removeprefix("torch_") in ops):  # fp8's ops have no gradient
        assert s.contract.backward is not None, s.name
        dtypes = {d for spec in s.contract.inputs.values() for d in spec.dtypes}
        assert {"float16", "bfloat16", "float32"} <= dtypes, s.name


def _prefix_rounding_cumsum(x):
    """torch's CUDA cumsum, emulated on the CPU: its scan runs in the element type, so every fp16 or bf16
    prefix is rounded to it (here sequentially, the order that rounds the most)."""
    import torch

    acc = torch.zeros(x.shape[:-1], dtype=torch.float32)
    out = torch.empty(x.shape, dtype=x.dtype)
    for j in range(x.shape[-1]):
        acc = (acc + x[..., j].float()).to(x.dtype).float()
        out[..., j] = acc.to(x.dtype)
    return out


def test_a_scan_rounding_every_prefix_passes_as_cumsum_is_declared_and_fails_a_float32_claim():
    from dataclasses import replace

    from tests.calibration.reductions import torch_cumsum
    from triton_conformance.model.subject import Subject

    cells = ["dtype:float16", "dtype:bfloat16", "layout:transposed", "shape:beyond-block"]
    as_declared = Subject(name="prefix_rounding_cumsum", family="cumsum", launcher=_prefix_rounding_cumsum,
                          contract=torch_cumsum.contract, module=__name__)
    assert not _failing(as_declared, run_config(profile="ci"), cells)
    claims_float32 = replace(as_declared, contract=replace(torch_cumsum.contract, accumulate="float32"))
    assert _failing(claims_float32, run_config(profile="ci"), cells), "a float32 claim must catch fp16 prefixes"
