"""The compile budget (conformance/compiles.py) and the class-aware size palette.

The interpreter compiles nothing, so these tests call Triton's
``jit_cache_hook`` themselves, with the keyword arguments Triton 3.6 passes
(measured on the H200: key, repr, fn=JitFunctionInfo, compile, is_manual_warmup,
already_compiled), from pure-torch launchers that "compile" one kernel per
specialization class of their size.
"""

import itertools
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import triton_conformance as tc
from triton_conformance import ConformanceUsageError, Dim, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.search.compiles import (
    BudgetExhausted,
    CellCompiles,
    CompileLedger,
    counting_compiles,
    make_hook,
)
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.search.allowance import MAX_DISCARDS
from triton_conformance.model.config import parse_budget, run_config
from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.terminal import compiles_by_subject
from triton_conformance.strategies import palette_sizes, specialization_class, specs
from triton_conformance.strategies._internal.sizes import PALETTE_BLOCKS

knobs = pytest.importorskip("triton").knobs
_ids = itertools.count()


def fake_compile(name: str, key) -> None:
    """What Triton does on an in-memory cache miss: call jit_cache_hook before compiling."""
    hook = knobs.runtime.jit_cache_hook
    if hook is not None:
        info = SimpleNamespace(module="fake_kernels", name=name, jitfn=None)
        hook(key=key, repr=f"{name}[{key}]", fn=info,
             compile={"key": key, "signature": {}, "device": 0, "constants": {}, "num_warps": 4, "configs": [],
                      "specialization_data": "", "is_warmup": False},
             is_manual_warmup=False, already_compiled=False)


# -- the ledger and the hook ---------------------------------------------------

def test_hook_counts_each_new_specialization_once_per_subject():
    ledger = CompileLedger()
    with counting_compiles(CellCompiles("s", None, ledger=ledger)) as counter:
        for key in ("a", "b", "a", "c", "b"):
            fake_compile("k", key)
    assert counter.count == 3 and ledger.used("s") == 3
    with counting_compiles(CellCompiles("s", None, ledger=ledger)) as again:
        fake_compile("k", "a")  # e.g. another device: already charged to the subject
        fake_compile("other_kernel", "a")  # same key, another kernel: a new specialization
    assert again.count == 1 and ledger.used("s") == 4
    assert knobs.runtime.jit_cache_hook is None, "the hook is restored afterwards"


def test_hook_raises_budget_exhausted_past_the_budget_and_not_before():
    ledger = CompileLedger()
    with counting_compiles(CellCompiles("s", 2, ledger=ledger)) as counter:
        fake_compile("k", 1)  # the cell's first example: its first class
        counter.start_example()
        fake_compile("k", 2)  # a second class, within the budget
        fake_compile("k", 1)  # already paid for: allowed
        counter.start_example()
        with pytest.raises(BudgetExhausted, match="compile budget of 2") as info:
            fake_compile("k", 3)
    assert counter.count == 2 and info.value.subject == "s" and counter.past_budget == 0
    assert not isinstance(info.value, Exception), "launchers' `except Exception` must not swallow it"
    with counting_compiles(CellCompiles("t", 2, ledger=ledger)):
        fake_compile("k", 3)  # another subject has its own budget


def test_a_cells_first_class_is_paid_in_full_past_the_budget_and_a_second_is_not():
    ledger = CompileLedger()
    with counting_compiles(CellCompiles("s", 2, ledger=ledger)):
        fake_compile("k", 1)
        fake_compile("k", 2)  # an earlier cell spent the whole budget
    # A cell that cannot steer (a fixed size) has no other way to run: its class of three kernels is paid.
    fixed = CellCompiles("s", 2, steers=False, ledger=ledger)
    with counting_compiles(fixed):
        fixed.start_example()
        for kernel in ("fwd", "bwd", "dw"):
            fake_compile(kernel, 3)
        fixed.start_example()
        with pytest.raises(BudgetExhausted):
            fake_compile("k", 4)  # its second class is held to the budget
    assert (fixed.count, fixed.classes, fixed.past_budget, ledger.used("s")) == (3, 1, 3, 5)
    assert ledger.class_costs[("s", "forward")] == [2, 3]  # what each class cost: the next reserve's measure
    # A steering cell past its share starts a first class only once granted (its search found no compiled
    # class that holds the draw).
    steering = CellCompiles("s", 2, ledger=ledger)
    with counting_compiles(steering):
        steering.start_example()
        with pytest.raises(BudgetExhausted):
            fake_compile("k", 5)
        steering.grant_first_class()
        steering.start_example()
        fake_compile("k", 5)
    assert (steering.classes, steering.past_budget) == (1, 1)


def test_the_reserve_counts_what_each_later_cells_kernels_cost():
    ledger = CompileLedger()
    ledger.seen["s"] = {("k", str(i)) for i in range(4)}  # 4 of 12 used: 8 left
    ledger.class_costs[("s", "forward")] = [1, 1, 2]  # a forward class costs 2 (the mean, rounded up)
    # Later: two forward cells that steer, and two backward cells, not yet seen (first guess: 2 each).
    later = (("forward", True), ("forward", True), ("backward", True), ("backward", True))
    assert ledger.class_cost("s", "forward") == 2 and ledger.class_cost("s", "backward") == 2
    share = CellCompiles("s", 12, later, ledger=ledger)
    assert share.may_start_class()  # a first class: no later cell is fixed-size, so 8 left is enough
    share.classes = 1
    assert not share.may_start_class()  # a second would leave less than the 8 the later cells need
    ledger.class_costs[("s", "backward")] = [1]
    assert share.may_start_class()  # backward classes turned out cheaper: 6 needed, 8 left
    fixed = CellCompiles("s", 12, (("forward", False),) * 4, ledger=ledger)
    assert not fixed.may_start_class()  # even a first class keeps what the fixed-size cells need


def test_hook_chains_the_previous_hook_and_returns_its_answer():
    calls = []
    hook = make_hook(CellCompiles("s", ledger=CompileLedger()),
                     previous=lambda **kw: calls.append(kw["key"]) or True)
    assert hook(key="k1", fn=SimpleNamespace(module="m", name="f")) is True
    assert calls == ["k1"]


def test_no_hook_without_cuda():
    with counting_compiles(None) as counter:
        fake_compile("k", 1)
    assert counter is None


def test_the_allowance_installs_its_meters_for_the_cell_and_removes_them_after():
    from triton_conformance.conformance.search import interpreter_cost
    from triton_conformance.conformance.search.allowance import Allowance
    from triton_conformance.conformance.search.policy import SearchPolicy

    forward = SimpleNamespace(kernels="forward", steers=True, interpreter_cost=True)
    policy = SearchPolicy.of(run_config(profile="ci", compile_budget=1))
    subject = SimpleNamespace(name=f"cover_metered_{next(_ids)}")
    with Allowance.metered(policy, subject, Backend(name="cuda", device="cpu"), forward) as allowance:
        assert allowance.meter is None and allowance.compile_budget == 1  # CUDA: compiles, no cost meter
        fake_compile("k", 1)  # the cell's first class: its one compile
        allowance.compiles.start_example()
        with pytest.raises(BudgetExhausted):
            fake_compile("k", 2)  # the share, not the ledger, refuses the budget's second compile
    assert allowance.compiled == 1 and knobs.runtime.jit_cache_hook is None
    interpreted = SearchPolicy.of(run_config(profile="ci"))
    with Allowance.metered(interpreted, subject, Backend(), forward) as allowance:
        assert allowance.compiles is None and allowance.compiled is None  # the interpreter compiles nothing
        assert allowance.meter is not None and interpreter_cost.active_meter() is allowance.meter
    assert interpreter_cost.active_meter() is None
    unmetered = SimpleNamespace(kernels="forward", steers=True, interpreter_cost=False)
    with Allowance.metered(interpreted, subject, Backend(), unmetered) as allowance:
        assert allowance.meter is None  # a kind at designed sizes is not metered



@pytest.mark.parametrize("value, expected", [(None, None), ("", None), ("0", None), (0, None), ("16", 16), (3, 3)])
def test_parse_budget(value, expected):
    assert parse_budget(value) == expected


@pytest.mark.parametrize("value", ["many", "-1", -2, True])
def test_parse_budget_names_bad_values(value):
    with pytest.raises(ConformanceUsageError, match=r"--conformance-compiles=.*expected a non-negative number"):
        parse_budget(value, "--conformance-compiles")


def test_budget_resolution_order(monkeypatch):
    # The profile's budget unless the option gives one (0: none); the environment plays no part.
    monkeypatch.setenv("CONFORMANCE_COMPILES", "5")
    assert run_config(profile="nightly").compile_budget == 16
    assert run_config(profile="ci").compile_budget is None
    assert run_config(profile="nightly", compile_budget="7").compile_budget == 7
    assert run_config(profile="nightly", compile_budget="0").compile_budget is None


def test_totals_per_subject():
    results = [CellResult(subject="a", family="f", cell="x", outcome="honoured", compiles=3),
               CellResult(subject="a", family="f", cell="y", outcome="honoured", compiles=2),
               {"subject": "b", "cell": "x", "compiles": 1}, {"subject": "c", "cell": "x", "compiles": None}]
    assert compiles_by_subject(results) == {"a": 5, "b": 1}


# -- the runner under a budget -----------------------------------------------

def compiling_add(x):
    """A launcher that 'compiles' one kernel per specialization of N, like a Triton launcher: its
    int class and the power-of-two block it derives from N."""
    n = x.shape[0]
    block = 1 if n <= 1 else 1 << (n - 1).bit_length()
    fake_compile("add_kernel", (specialization_class(n), block, str(x.dtype)))
    return x * 2


def declare(launcher, dims):
    return tc.register(launcher, name=f"cover_{launcher.__name__}_{next(_ids)}",
                       inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims=dims, oracle=lambda x: x * 2)


def test_the_budget_buys_each_cell_its_first_class_before_any_cell_a_second():
    subject = declare(compiling_add, {"N": Dim(1, 4096)})
    cuda_on_cpu = Backend(name="cuda", device="cpu")  # hooks armed; tensors stay on the CPU
    cells = ("layout:contiguous", "shape:non-pow2", "shape:beyond-block")
    results = [run_cell(subject, cell, backend=cuda_on_cpu, config=run_config(profile="ci", compile_budget=3,
                                                                                max_examples=40)) for cell in cells]
    assert all(r.passed for r in results), [(r.cell, r.outcome, r.message) for r in results]
    # Each cell bought one class (the later cells' reserve kept the first ones from a second), and
    # then ran every example it was asked for inside the classes compiled, discarding none.
    assert [r.compiles for r in results] == [1, 1, 1]
    assert [r.examples for r in results] == [40, 40, 40]
    for r in results:
        share = r.details["specializations"]
        assert share["classes_compiled"] == 1 and share["examples_reused"] == 39, (r.cell, share)
        # at most the few small draws that came before the first class (it waits for a real size)
        assert r.details.get("no-compiled-class_discarded", 0) <= 3, (r.cell, r.message)
    assert results[0].details["specializations"]["examples_steered"] > 20  # moved into the compiled class


def test_a_cell_past_the_whole_budget_runs_inside_compiled_classes_or_buys_its_one_class():
    from triton_conformance.conformance.search.compiles import LEDGER

    subject = declare(compiling_add, {"N": Dim(1, 4096)})
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    config = run_config(profile="ci", compile_budget=1, max_examples=30)
    tiny = run_cell(subject, "shape:tiny", backend=cuda_on_cpu, config=config)
    assert tiny.compiles == 1 and tiny.examples == 30  # one class of N <= 3, every example inside it
    # A cell whose sizes can be moved runs all its examples in the compiled class, compiling nothing.
    contiguous = run_cell(subject, "layout:contiguous", backend=cuda_on_cpu, config=config)
    assert contiguous.examples == 30 and contiguous.details["specializations"]["examples_reused"] == 30
    assert contiguous.compiles == 0
    # No budget is left, and shape:beyond-block's sizes past 2048 cannot be moved into a block of 4.
    # Starved, it would check nothing: it buys its one class past the budget, and says so.
    beyond = run_cell(subject, "shape:beyond-block", backend=cuda_on_cpu, config=config)
    assert (beyond.outcome, beyond.examples, beyond.compiles) == ("honoured", 30, 1), beyond.message
    assert beyond.details["specializations"]["compiled_past_budget"] == 1
    assert LEDGER.used(subject.name) == 2  # and no more: its other examples ran inside that class


def test_runner_without_a_budget_compiles_per_class():
    subject = declare(compiling_add, {"N": Dim(1, 4096)})
    r = run_cell(subject, "layout:contiguous", backend=Backend(name="cuda", device="cpu"), config=run_config(profile="ci", compile_budget=0, max_examples=40))
    assert r.outcome == "honoured" and "discarded" not in r.message
    assert r.compiles > 3


def test_a_bug_found_within_the_budget_is_still_reported():
    def wrong_past_64(x):
        compiling_add(x)
        return x * 2 if x.shape[0] <= 64 else x * 3

    subject = declare(wrong_past_64, {"N": Dim(1, 4096)})
    r = run_cell(subject, "shape:beyond-block", backend=Backend(name="cuda", device="cpu"), config=run_config(profile="ci", compile_budget=4))
    assert r.outcome == "wrong" and r.finding == "mismatch"


def test_interpreter_counts_nothing():
    subject = declare(compiling_add, {"N": Dim(1, 64)})
    r = run_cell(subject, "layout:contiguous", backend=Backend(), config=run_config(profile="ci", compile_budget=1))
    assert r.compiles is None and r.outcome == "honoured" and "discarded" not in r.message


# -- the palette -----------------------------------------------------------------

@pytest.mark.parametrize("lo, hi", [(1, 1 << 20), (0, 8192), (1, 4096), (2, 100)])
def test_palette_covers_every_specialization_class_and_block_boundary(lo, hi):
    pool = palette_sizes(lo, hi)
    assert all(lo <= n <= hi for n in pool) and lo in pool and hi in pool
    classes = {specialization_class(n) for n in pool}
    assert classes >= ({"div16", "other"} | ({"one"} if lo <= 1 else set()))
    for block in PALETTE_BLOCKS:
        for n in (block - 1, block, block + 1):
            if lo <= n <= hi:
                assert n in pool, (block, n)
    assert any(n % 16 == 0 and n & (n - 1) for n in pool if n > 0) or hi < 48, "a multiple of 16 off the powers"


def test_palette_is_small():
    assert len(palette_sizes(1, 1 << 30)) <= 3 * len(PALETTE_BLOCKS) + 6


def test_specialization_classes_match_triton_3_6():
    # measured: (100, 1) and (101, 1) share a kernel; 112, 128, 1 and 17 each differ from them
    assert specialization_class(100) == specialization_class(101) == specialization_class(17) == "other"
    assert specialization_class(112) == specialization_class(128) == specialization_class(32) == "div16"
    assert specialization_class(1) == "one"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_palette_specs_draw_only_palette_sizes(data):
    contract = tc.Contract(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 64), "N": Dim(1, 8192)},
                           oracle=lambda x: x)
    for shape in ("any", "non-pow2"):
        spec = data.draw(specs(contract, shape=shape, palette=True))
        assert spec.dims["N"] in palette_sizes(1, 8192) and spec.dims["M"] in palette_sizes(1, 64)
        if shape == "non-pow2":
            assert all(n > 1 and n & (n - 1) for n in spec.dims.values())
    spec = data.draw(specs(contract, shape="beyond-block", palette=True))
    assert spec.dims["N"] in (4097, 4112, 4113)


def test_palette_specs_reach_each_class_of_a_dim():
    contract = tc.Contract(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 8192)}, oracle=lambda x: x)
    seen = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(specs(contract, palette=True))
    def collect(spec):
        seen.add(specialization_class(spec.dims["N"]))

    collect()
    assert seen == {"one", "div16", "other"}


def test_the_terminal_summary_lists_compilations_per_subject_only_when_counted():
    from triton_conformance.reports.terminal import compile_lines, matrix_lines

    counted = [CellResult(subject="softmax", family="softmax", cell="layout:contiguous", outcome="honoured",
                          compiles=4),
               CellResult(subject="softmax", family="softmax", cell="shape:tiny", outcome="honoured", compiles=3),
               CellResult(subject="add", family="add", cell="layout:contiguous", outcome="honoured", compiles=9)]
    assert compile_lines(counted)[1:] == [
        "Triton compilations per subject (new specializations, summed over its cells):", "  add      9",
        "  softmax  7"]
    assert compile_lines(counted)[1] in matrix_lines(counted)
    counted.append(CellResult(subject="add", family="add", cell="grad:dtype:float32", outcome="honoured",
                              compiles=3, details={"specializations": {"compiled_past_budget": 2}}))
    assert compile_lines(counted)[2] == ("  add      12  (2 past the budget: first classes of cells that could "
                                         "run nothing else)")
    interpreted = [CellResult(subject="add", family="add", cell="layout:contiguous", outcome="honoured")]
    assert compile_lines(interpreted) == [] and not any("compilations" in x for x in matrix_lines(interpreted))


def test_a_cell_stops_paying_for_discards_once_the_budget_is_spent():
    from triton_conformance import Dim, Tensor, register
    from triton_conformance.conformance.search.compiles import BudgetExhausted
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.conformance.search.allowance import MAX_DISCARDS

    calls = []

    def always_needs_a_new_kernel(x):
        calls.append(1)
        raise BudgetExhausted("needs_new_kernels", 16, "kernel")

    subject = register(always_needs_a_new_kernel, name="needs_new_kernels", inputs={"x": Tensor(("N",))},
                       dims={"N": Dim(1, 64)}, oracle=lambda x: x * 1.0)
    result = run_cell(subject, "layout:contiguous", config=run_config(profile="ci", max_examples=100))
    assert result.outcome == "skipped" and "compile budget" in result.message
    assert len(calls) == MAX_DISCARDS  # then every further draw is rejected without building inputs


def test_a_stopped_cell_stops_drawing_too(monkeypatch):
    """Past the discard limit the search ends: Hypothesis does not go on drawing specs to reject."""
    from triton_conformance import Dim, Tensor, register
    from triton_conformance.conformance import runner
    from triton_conformance.conformance.kinds import searched

    drawn = []
    original = searched.specs
    monkeypatch.setattr(searched, "specs", lambda *a, **k: original(*a, **k).map(lambda s: drawn.append(s) or s))

    def always_needs_a_new_kernel(x):
        raise BudgetExhausted("needs_new_kernels_2", 16, "kernel")

    subject = register(always_needs_a_new_kernel, name="needs_new_kernels_2", inputs={"x": Tensor(("N",))},
                       dims={"N": Dim(1, 64)}, oracle=lambda x: x * 1.0)
    result = runner.run_cell(subject, "layout:contiguous", config=run_config(profile="ci", max_examples=100))
    assert result.outcome == "skipped"
    assert len(drawn) <= MAX_DISCARDS + 2, len(drawn)  # it used to draw about ten per example asked for


def test_a_failure_found_before_the_shrink_budget_ran_out_is_reported(monkeypatch):
    from dataclasses import replace

    from triton_conformance import Dim, Tensor, register
    from triton_conformance.conformance import runner

    config = run_config(profile="ci")
    config = replace(config, profile=replace(config.profile, shrink_calls=0))  # Hypothesis stops at once
    subject = register(lambda x: x * 2 if x.shape[0] < 40 else x * 3, name="wrong_from_40",
                       inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 4096)}, oracle=lambda x: x * 2.0)
    result = runner.run_cell(subject, "layout:contiguous", config=config)
    assert result.outcome == "wrong" and result.finding == "mismatch"
    assert result.counterexample["dims"]["N"] == 40  # the per-dim search still runs after Hypothesis stops


def test_a_cell_keeps_one_compile_for_each_later_cell_that_applies():
    from triton_conformance.conformance.search.compiles import LEDGER
    from triton_conformance.conformance.kinds import cells_for

    subject = declare(compiling_add, {"N": Dim(1, 4096)})
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    cells = cells_for(subject)
    last = cells[-1]
    # The last cell of the subject has no later cell to leave budget for: it may buy as many classes
    # as the budget holds, where the first cell buys one.
    config = run_config(profile="ci", compile_budget=6, max_examples=40)
    first = run_cell(subject, "layout:contiguous", backend=cuda_on_cpu, config=config)
    assert first.compiles == 1
    final = run_cell(subject, last, backend=cuda_on_cpu, config=config)
    assert last == "determinism" and final.compiles > 1 and LEDGER.used(subject.name) <= 6


class _CompilingScale(torch.autograd.Function):
    """y = x * 2, whose backward 'compiles' one kernel per class of N (and of grad_output's layout)."""

    @staticmethod
    def forward(ctx, x):
        compiling_add(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        n = g.shape[0]
        block = 1 if n <= 1 else 1 << (n - 1).bit_length()
        fake_compile("add_backward", (specialization_class(n), block, g.stride()))
        return g * 2


def test_gradient_cells_run_inside_compiled_classes_once_their_share_is_spent():
    subject = tc.register(_CompilingScale, name=f"cover_compiling_scale_{next(_ids)}",
                          inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 4096)},
                          oracle=lambda x: x * 2, backward=True)
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    config = run_config(profile="ci", compile_budget=2, max_examples=30)
    r = run_cell(subject, "grad:layout:contiguous", backend=cuda_on_cpu, config=config)
    # One class bought (forward and backward kernels of one N class: 2 compiles), then 30 examples in it.
    assert (r.outcome, r.examples, r.compiles) == ("honoured", 30, 2), r.message
    # Only the few small draws before the first class (it waits for a real size) were not run; none
    # needed a kernel the budget refused.
    assert set(r.details) - {"error_ulps", "allowance_used"} == {"no-compiled-class_discarded", "specializations"} \
        or "discarded" not in r.message
    assert r.details.get("no-compiled-class_discarded", 0) <= 5, r.message
    assert r.details["specializations"]["examples_reused"] == 29


def compiling_rows(x):
    """A 2-D launcher that 'compiles' per stride pattern as well as per size class of N."""
    n = x.shape[1]
    block = 1 if n <= 1 else 1 << (n - 1).bit_length()
    strides = tuple("0" if s == 0 else specialization_class(s) for s in x.stride())
    fake_compile("rows_kernel", (strides, specialization_class(n), block, x.storage_offset() % 4 == 0))
    return x * 2


def test_a_cell_with_one_class_of_its_own_runs_every_example_in_it():
    # Sliced layouts come in many step patterns, each its own specialization: with one class of
    # its own, the cell replays that class's layout with fresh sizes and values, discarding nothing.
    subject = tc.register(compiling_rows, name=f"cover_compiling_rows_{next(_ids)}",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
                          dims={"M": Dim(1, 64), "N": Dim(1, 4096)}, oracle=lambda x: x * 2)
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    r = run_cell(subject, "layout:sliced", backend=cuda_on_cpu, config=run_config(profile="ci", compile_budget=1,
                                                                                   max_examples=30))
    assert (r.outcome, r.examples, r.compiles) == ("honoured", 30, 1), r.message
    # at most the few small draws before the first class (it waits for a real size)
    assert r.details.get("no-compiled-class_discarded", 0) <= 5 and r.details["specializations"]["examples_steered"] > 0


def test_a_fixed_size_cell_later_in_the_order_keeps_a_compile_of_its_own():
    from triton_conformance.conformance.search.compiles import LEDGER

    subject = declare(compiling_add, {"N": Dim(1, 1 << 40)})  # large enough for the large-index cell
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    config = run_config(profile="ci", compile_budget=2, max_examples=20)
    first = run_cell(subject, "layout:contiguous", backend=cuda_on_cpu, config=config)
    second = run_cell(subject, "dtype:float32", backend=cuda_on_cpu, config=config)
    # shape:large-index comes later and cannot steer: one of the two compiles stays free for it.
    assert (first.compiles, second.compiles) == (1, 0) and LEDGER.used(subject.name) == 1
    assert second.examples == 20  # it ran inside the first cell's class instead


def test_a_subject_with_a_backward_has_twice_the_budget():
    from triton_conformance.conformance.runner import cell_allowance
    from triton_conformance.conformance.search.policy import SearchPolicy

    subject = tc.register(_CompilingScale, name=f"cover_compiling_scale_budget_{next(_ids)}",
                          inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 64)},
                          oracle=lambda x: x * 2, backward=True)
    nightly = SearchPolicy.of(run_config(profile="nightly"))
    with cell_allowance(subject, "layout:contiguous", Backend(name="cuda", device="cpu"), nightly) as allowance:
        assert allowance.compile_budget == 32


def test_a_cells_first_class_waits_for_a_real_size_unless_the_cell_keeps_to_tiny_ones():
    from triton_conformance.conformance.observe import Observer

    class Sizes(Observer):
        def __init__(self):
            self.n = []

        def example_started(self, subject, cell, spec):
            self.n.append(spec.dims["N"])

    subject = declare(compiling_add, {"N": Dim(1, 4096)})
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    config = run_config(profile="ci", compile_budget=16, max_examples=20)
    contiguous, tiny = Sizes(), Sizes()
    run_cell(subject, "layout:contiguous", backend=cuda_on_cpu, config=config, observer=contiguous)
    # Hypothesis draws N = 1 first; the one class the cell buys must not be that one, or every
    # later draw would be moved to N = 1.
    assert len(contiguous.n) == 20 and contiguous.n[0] >= 64, contiguous.n
    r = run_cell(subject, "shape:tiny", backend=cuda_on_cpu, config=config, observer=tiny)
    assert r.examples == 20 and max(tiny.n) <= 3 and r.compiles >= 1


def test_a_cell_stops_drawing_once_the_interpreters_cost_keeps_refusing():
    from triton_conformance import register
    from triton_conformance.conformance.search.interpreter_cost import OverCost

    calls = []

    def always_over_cost(x):
        calls.append(1)
        raise OverCost("always_over_cost", 10**9, 1, "every example")

    subject = register(always_over_cost, name="always_over_cost", inputs={"x": Tensor(("N",))},
                       dims={"N": Dim(1, 64)}, oracle=lambda x: x * 1.0)
    result = run_cell(subject, "layout:contiguous", config=run_config(profile="ci", max_examples=100))
    assert result.outcome == "skipped" and result.details["over-cost_discarded"] == MAX_DISCARDS, result.message
    assert len(calls) == MAX_DISCARDS  # not Hypothesis's whole allowance of invalid draws


class _CompilingNorm(torch.autograd.Function):
    """y = x * 2 over rows, whose backward 'compiles' two kernels (dx and a reduction) per class of N,
    dtype and grad_output's strides: as a norm's backward does."""

    @staticmethod
    def forward(ctx, x):
        compiling_rows(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        key = (specialization_class(g.shape[1]), tuple("0" if s == 0 else specialization_class(s)
                                                        for s in g.stride()), str(g.dtype))
        fake_compile("norm_dx", key)
        fake_compile("norm_dw", key)
        return g * 2


def test_no_cell_of_a_subject_with_a_backward_starves_on_a_tight_budget():
    """The rms_norm case on the H200 (nightly, seed 7): its forward cells' second classes, reserved one
    compile per later cell, left its last grad cells (each class three kernels) nothing, and two of
    them ran no example.  The reserve now counts what each later cell's classes cost."""
    from triton_conformance.conformance.search.compiles import LEDGER
    from triton_conformance.conformance.kinds import cells_for

    subject = tc.register(_CompilingNorm, name=f"cover_compiling_norm_{next(_ids)}",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float16", "bfloat16", "float32"),
                                              layouts="any")},
                          dims={"M": Dim(1, 64), "N": Dim(1, 4096)}, oracle=lambda x: x * 2, backward=True)
    cuda_on_cpu = Backend(name="cuda", device="cpu")
    config = run_config(profile="ci", compile_budget=12, max_examples=12)
    results = [run_cell(subject, cell, backend=cuda_on_cpu, config=config) for cell in cells_for(subject)]
    ran = [r for r in results if r.outcome != "skipped" or "compile" not in r.message]
    starved = [(r.cell, r.message) for r in results if r.outcome == "skipped" and (
        "budget" in r.message or "compiled-class" in r.message)]
    assert not starved and len(ran) == len(results)
    grads = [r for r in results if r.cell.startswith("grad:")]
    assert len(grads) >= 8 and all(r.examples >= 1 for r in grads), [(r.cell, r.message) for r in grads]
    # Past the budget only as first classes of cells that had no other way to run.
    past = {r.cell: r.details["specializations"]["compiled_past_budget"] for r in results
            if r.details.get("specializations", {}).get("compiled_past_budget")}
    assert LEDGER.used(subject.name) <= 2 * 12 + sum(past.values())
    assert all(r.details["specializations"]["classes_compiled"] == 1 for r in results if r.cell in past)
