"""Libraries that call Triton only for CUDA tensors (compat/cuda_dispatch.py), and the note a cell gets on the
interpreter when its launcher launched no Triton kernel (conformance/triton_path.py)."""

from __future__ import annotations

import importlib
import os
from dataclasses import replace

import pytest
import torch

from triton_conformance import Dim, InvalidContract, Tensor, register
from triton_conformance.compat.cuda_dispatch import CudaLooking, plain, pretending_cuda
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.triton_path import NO_TRITON_LAUNCH
from triton_conformance.model.config import RunConfig
from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.html import render_html
from triton_conformance.reports.results_json import environment, results_document
from triton_conformance.reports.terminal import matrix_lines

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the interpreter")
CELL = "layout:contiguous"


@pytest.fixture
def zoo():
    from tests.zoo import zoo_cuda_dispatch

    module = importlib.reload(zoo_cuda_dispatch)  # registered again after an earlier test's were dropped
    module.TRITON_CALLS.clear()
    return module


def _subject(zoo, name, **changes):
    from triton_conformance import get_subject

    return replace(get_subject(name), **changes)


def test_with_pretend_cuda_the_triton_path_runs_and_its_bug_is_caught(zoo) -> None:
    buggy = run_cell(_subject(zoo, "zoo_cuda_dispatch_drops_bias"), CELL, backend=Backend(), config=RunConfig())
    assert (buggy.outcome, buggy.finding) == ("wrong", "mismatch"), buggy.message
    assert zoo.TRITON_CALLS["zoo_cuda_dispatch_drops_bias"] > 0
    twin = run_cell(_subject(zoo, "cuda_dispatch_scale_shift"), CELL, backend=Backend(), config=RunConfig())
    assert twin.outcome == "honoured" and "no_triton_launch" not in twin.details, twin.message
    assert zoo.TRITON_CALLS["cuda_dispatch_scale_shift"] >= 2 * twin.examples  # each example's launches


def test_without_it_the_fallback_runs_and_the_cell_says_no_triton_kernel_was_launched(zoo) -> None:
    hidden = run_cell(_subject(zoo, "zoo_cuda_dispatch_drops_bias", pretend_cuda=False), CELL, backend=Backend(),
                      config=RunConfig())
    assert hidden.outcome == "honoured", hidden.message  # the torch fallback is right: the bug is not reached
    assert not zoo.TRITON_CALLS
    note = hidden.details["no_triton_launch"]
    assert note.startswith(NO_TRITON_LAUNCH) and "pretend_cuda=True" in note
    # Shown in the terminal's summary and the cell's HTML panel, as a note (the cell still passes).
    lines = matrix_lines([hidden])
    at = lines.index(f"{NO_TRITON_LAUNCH} (a library that calls Triton only for CUDA tensors runs its Triton path "
                     "on the interpreter when declared pretend_cuda=True), in 1 cells:")
    assert lines[at + 1] == f"  zoo_cuda_dispatch_drops_bias: {CELL}"
    page = render_html(results_document([hidden], environment(device="interpreter", profile="ci", seed=None)))
    assert page.count(f"<strong>Note:</strong> {NO_TRITON_LAUNCH}") == 1


def test_a_subject_without_triton_kernels_gets_no_note() -> None:
    torch_only = register(lambda x: x * 2, name="cover_torch_only_doubler", inputs={"x": Tensor(("N",))},
                          dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2)
    result = run_cell(torch_only, CELL, backend=Backend(), config=RunConfig())
    assert result.outcome == "honoured" and "no_triton_launch" not in result.details


def test_the_tensors_look_like_cuda_inside_the_launcher_only() -> None:
    seen = {}

    def launcher(x, pair, scale):
        seen.update(x=(x.is_cuda, x.device.type), pair=[t.is_cuda for t in pair], scale=scale,
                    made=torch.empty_like(x).is_cuda)
        x.add_(1)  # the same storage: an in-place write lands in the caller's tensor
        return x * 2, [pair[0]]

    x = torch.zeros(3, requires_grad=False)
    out, rest = pretending_cuda(launcher)(x, (torch.ones(2), torch.ones(2)), scale=2.0)
    assert seen == {"x": (True, "cuda"), "pair": [True, True], "scale": 2.0, "made": True}
    assert type(out) is torch.Tensor and not out.is_cuda and out.device.type == "cpu"
    assert type(rest[0]) is torch.Tensor and x.tolist() == [1.0, 1.0, 1.0]
    assert not x.is_cuda and type(x) is torch.Tensor


def test_gradients_flow_through_the_views() -> None:
    x = torch.ones(4, requires_grad=True)
    pretending_cuda(lambda t: (t * 3).sum())(x).backward()
    assert x.grad.tolist() == [3.0] * 4 and type(x.grad) is torch.Tensor
    assert isinstance(torch.ones(1).as_subclass(CudaLooking), CudaLooking) and type(plain((CudaLooking(),))[0]) \
        is torch.Tensor


def test_pretend_cuda_must_be_a_bool() -> None:
    with pytest.raises(InvalidContract, match=r"register: pretend_cuda='yes', expected True or False \(subject "
                                              r"'cover_bad_pretend'"):
        register(lambda x: x, name="cover_bad_pretend", inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 4)},
                 oracle=lambda x: x, pretend_cuda="yes")


def test_a_result_without_the_note_adds_no_terminal_line() -> None:
    plain_result = CellResult(subject="s", family="s", cell=CELL, outcome="honoured", details={})
    assert not any(NO_TRITON_LAUNCH in line for line in matrix_lines([plain_result]))


def test_an_empty_cell_that_launched_nothing_gets_no_note(zoo) -> None:
    hidden = _subject(zoo, "zoo_cuda_dispatch_drops_bias", pretend_cuda=False)
    empty = run_cell(hidden, "shape:empty", backend=Backend(), config=RunConfig())
    assert empty.examples and "no_triton_launch" not in empty.details, (empty.outcome, empty.message)


def test_a_cell_whose_every_example_was_refused_gets_no_note(zoo) -> None:
    """A refused example never needed a kernel (liger's beyond-range cells: ``calculate_settings`` refuses
    N > 65536 before any launch), so a cell that refused every example says nothing of the path it took."""
    cpu_path = _subject(zoo, "cuda_dispatch_scale_per_device", pretend_cuda=False)
    refused = run_cell(cpu_path, "dtype:float16", backend=Backend(), config=RunConfig())
    assert refused.outcome == "rejected" and refused.examples == refused.rejected_examples > 0, refused.message
    assert "no_triton_launch" not in refused.details, refused.details
    # The same path on a dtype it computes (float32: the torch fallback, no kernel) still gets the note.
    computed = run_cell(cpu_path, "dtype:float32", backend=Backend(), config=RunConfig())
    assert computed.outcome == "honoured" and computed.details["no_triton_launch"].startswith(NO_TRITON_LAUNCH)


@pytest.fixture
def cuda_allocations():
    """The cuda_allocations shim, as the plugin and every worker install it (module.to(x.device) is "cuda")."""
    from triton_conformance import compat

    added = "cuda_allocations" not in compat.installed()
    compat.install(["cuda_allocations"])
    yield
    if added:
        compat.uninstall(["cuda_allocations"])


def test_an_nn_module_with_a_drawn_weight_reaches_its_triton_path_forward_and_backward(cuda_allocations) -> None:
    import triton
    import triton.language as tl

    calls = []

    @triton.jit
    def scale_rows(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        row = tl.program_id(0)
        w = tl.load(w_ptr + cols, mask=mask)
        tl.store(out_ptr + row * n + cols, tl.load(x_ptr + row * n + cols, mask=mask) * w, mask=mask)

    class ScaleFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            calls.append(type(x).__name__)
            out = torch.empty_like(x)
            scale_rows[(x.shape[0],)](x, weight, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
            ctx.save_for_backward(x, weight)
            return out

        @staticmethod
        def backward(ctx, grad):
            x, weight = ctx.saved_tensors
            return grad * weight, (grad * x).sum(0)

    class Scale(torch.nn.Module):  # the shape of a normalization library's module
        def __init__(self, N):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(N))

        def forward(self, x):
            return ScaleFunction.apply(x, self.weight) if x.is_cuda else x * self.weight

    subject = register(Scale, name="cover_cuda_dispatch_module", inputs={"x": Tensor(("M", "N")),
                                                                          "weight": Tensor(("N",))},
                       dims={"M": Dim(1, 8), "N": Dim(1, 64)}, oracle=lambda x, weight: x * weight,
                       parameters={"weight": "weight"}, backward=True, pretend_cuda=True)
    for cell in (CELL, "grad:" + CELL):
        result = run_cell(subject, cell, backend=Backend(), config=RunConfig())
        assert result.outcome == "honoured" and "no_triton_launch" not in result.details, (cell, result.message)
    assert calls and set(calls) == {"CudaLooking"}


def test_a_launcher_that_refuses_the_fp16_its_cuda_claim_names_is_caught_and_its_twin_passes(zoo) -> None:
    """Dtypes per device (``Tensor(dtypes={"cpu": ..., "cuda": ...})``): each device's claim judges its path."""
    from triton_conformance.reports.terminal import claims_lines

    backend = Backend()
    bug, twin = (_subject(zoo, n) for n in ("zoo_cuda_dispatch_refuses_claimed_fp16",
                                            "cuda_dispatch_scale_per_device"))
    caught = run_cell(bug, "dtype:float16", backend=backend)
    assert (caught.outcome, caught.finding, caught.details["claims_of"]) == ("crash", "exception", "cuda"), \
        caught.message
    passed = run_cell(twin, "dtype:float16", backend=backend)
    assert (passed.outcome, passed.details["claims_of"]) == ("honoured", "cuda"), passed.message
    assert zoo.TRITON_CALLS["cuda_dispatch_scale_per_device"] > 0
    # On its CPU path (no pretend_cuda) the CPU claim applies: fp16 is outside it, and refusing it is right.
    cpu = run_cell(replace(twin, pretend_cuda=False), "dtype:float16", backend=backend)
    assert (cpu.outcome, cpu.details["claims_of"]) == ("rejected", "cpu"), cpu.message
    # One claim for every device cannot say this: fp16 claimed everywhere makes that refusal a crash.
    everywhere = replace(twin, pretend_cuda=False, contract=replace(
        twin.contract, inputs={"x": Tensor(("N",), dtypes=("float16", "float32"))}))
    assert run_cell(everywhere, "dtype:float16", backend=backend).outcome == "crash"
    assert claims_lines([caught, cpu]) == ["", "claims that differ by device:",
                                           "  the 'cpu' claims judged cuda_dispatch_scale_per_device",
                                           "  the 'cuda' claims judged zoo_cuda_dispatch_refuses_claimed_fp16"]
