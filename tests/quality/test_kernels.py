"""The kernels under test, judged on the cells the issue names."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from triton_conformance import get_subject
from triton_conformance.conformance.backend import probe_interpreter_bf16
from triton_conformance.conformance.runner import run_cell

LAYOUTS = ["contiguous", "transposed", "sliced", "padded", "offset", "broadcast", "size1", "mixed"]


def test_softmax_block1024_shrinks_to_1025_columns(backend, kernels):
    result = run_cell(get_subject("softmax_block1024"), "layout:contiguous", backend=backend)
    assert (result.outcome, result.finding) == ("wrong", "mismatch")
    assert result.counterexample["dims"] == {"M": 1, "N": 1025}
    assert result.details["first_index"] == [0, 1024] or tuple(result.details["first_index"]) == (0, 1024)


def test_the_reproducer_reproduces_the_failure_on_its_own(backend, kernels, tmp_path):
    result = run_cell(get_subject("softmax_block1024"), "layout:contiguous", backend=backend)
    script = tmp_path / "repro.py"
    script.write_text(result.reproducer)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode != 0
    assert "StillFails: softmax_block1024: wrong (mismatch)" in run.stderr  # an AssertionError
    assert "x: shape=(1, 1025)" in run.stdout


@pytest.mark.parametrize("layout", ["transposed", "sliced", "padded", "broadcast"])
def test_textbook_gemv_rejects_layouts_it_does_not_claim(layout, backend, kernels):
    result = run_cell(get_subject("gemv_textbook"), f"layout:{layout}", backend=backend)
    assert result.outcome == "rejected", (result.finding, result.message)
    assert result.rejected_examples > 0


@pytest.mark.parametrize("cell", ["layout:contiguous", "layout:offset", "dtype:float16", "shape:non-pow2"])
def test_textbook_gemv_honours_contiguous_inputs(cell, backend, kernels):
    # layout:offset: a view that starts one element into its storage is contiguous (is_contiguous())
    result = run_cell(get_subject("gemv_textbook"), cell, backend=backend)
    assert result.outcome == "honoured", (result.finding, result.message)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_stride_aware_gemv_honours_every_layout(layout, backend, kernels):
    result = run_cell(get_subject("gemv_strided"), f"layout:{layout}", backend=backend)
    assert result.outcome == "honoured", (result.finding, result.message)
    assert result.rejected_examples == 0


def test_naive_attention_rejects_inputs_past_its_limits(backend, kernels):
    subject = get_subject("attention_naive")
    assert run_cell(subject, "shape:beyond-range", backend=backend).outcome == "rejected"
    assert run_cell(subject, "layout:contiguous", backend=backend).outcome == "honoured"
    assert subject.contract.dims["N"].max == 128, "loads all of K/V into one tile"


@pytest.mark.parametrize("mask", ["causal", "random", "padding", "all", "broadcast", "fully-masked"])
def test_masked_attention_honours_every_mask_class(mask, backend, kernels):
    subject = get_subject("attention_masked")
    assert subject.contract.inputs["mask"].fully_masked == "zeros"
    result = run_cell(subject, f"mask:{mask}", backend=backend)
    assert result.outcome == "honoured", (result.finding, result.message)


def test_bf16_cells_are_marked_untestable_when_the_interpreter_miscomputes_bf16(backend, kernels):
    broken = probe_interpreter_bf16()
    result = run_cell(get_subject("softmax"), "dtype:bfloat16", backend=backend)
    if broken:
        assert result.outcome == "skipped" and "not testable here" in result.message
        assert "bfloat16" in backend.untestable
    else:  # a fixed interpreter: the correct kernel must then pass
        assert result.outcome == "honoured"


def test_the_bf16_probe_sees_what_the_interpreter_really_does():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_half(x_ptr, out_ptr):
        tl.store(out_ptr, tl.load(x_ptr) + 0.5)

    x = torch.ones(1, dtype=torch.bfloat16)
    out = torch.zeros(1, dtype=torch.bfloat16)
    add_half[(1,)](x, out)
    assert (probe_interpreter_bf16() is None) == (out.item() == 1.5)
