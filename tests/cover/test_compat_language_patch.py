"""compat.language_patch: inside held_language_patch() a block of launches patches triton.language once, and
each launch still runs the builtins it would get on its own."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import pytest
import torch
import triton
import triton.language as tl

import triton_conformance as tc
from triton_conformance import Dim, Tensor, compat
from triton_conformance.conformance import backend as backend_module
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config

pytestmark = [pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the layer is interpreter-only"),
              pytest.mark.usefixtures("no_shims")]

from tests.compat_kernels import kernels  # noqa: E402  (after TRITON_INTERPRET)


@pytest.fixture
def scans(monkeypatch):
    """The interpreter's scans of a language namespace for builtins (each patch of the language makes some)."""
    from triton.runtime import interpreter

    made = []
    original = interpreter._patch_builtin

    def counting(*args, **kwargs):
        made.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(interpreter, "_patch_builtin", counting)
    return made


def _namespaces():
    """Every name and value of the namespaces the interpreter patches."""
    spaces = (tl, tl.core, tl.math, tl.tensor, tl.core.base_value, tl.core.tensor_descriptor_base, tl.dtype,
              tl.condition)
    return [(space, dict(vars(space))) for space in spaces]


def _same(before, after):
    return all(a.keys() == b.keys() and all(a[k] is b[k] for k in a) for (_, a), (_, b) in zip(before, after))


def test_a_held_block_patches_the_language_once_gives_the_same_bits_and_leaves_it_as_it_was(scans):
    compat.install(["nested_calls"])
    x = torch.randn(6, 20)
    one = kernels.nested_calls(x)  # rewriting tl.sum puts the interpreter's globals (tl) into its module's
    scans.clear()
    kernels.nested_calls(x)  # the launch's patch and its calls' (tl.sum's module reaches tl.core and tl)
    per_launch = len(scans)
    before = _namespaces()
    scans.clear()
    with compat.held_language_patch():
        outs = [kernels.nested_calls(x) for _ in range(4)]
        assert not _same(before, _namespaces())  # patched between the launches
    assert len(scans) == per_launch, (len(scans), per_launch)
    assert all(torch.equal(out, one) for out in outs)
    assert _same(before, _namespaces())


def test_every_launch_and_call_still_reaches_patch_lang():
    """The cost meter charges each call of interpreter._patch_lang: a held block makes as many."""
    from triton.runtime import interpreter

    compat.install(["nested_calls"])
    held = interpreter._patch_lang
    counts = []

    def counting(fn):
        counts.append(1)
        return held(fn)

    interpreter._patch_lang = counting
    try:
        x = torch.randn(3, 20)
        kernels.nested_calls(x)
        unheld = len(counts)
        counts.clear()
        with compat.held_language_patch():
            kernels.nested_calls(x)
        assert len(counts) == unheld > 3  # the launch and each program's calls
    finally:
        interpreter._patch_lang = held


def _counting_sqrt(calls):
    real = tl.sqrt

    @tl.core.builtin
    def sqrt(x, _semantic=None):
        calls.append(1)
        return real(x, _semantic=_semantic)

    return real, sqrt


def test_a_builtin_bound_between_held_launches_is_the_one_the_next_launch_runs(monkeypatch):
    compat.install(["nested_calls"])
    x = torch.randn(3, 20)
    expected = kernels.nested_calls(x)
    calls = []
    real, counted = _counting_sqrt(calls)
    with compat.held_language_patch():
        kernels.nested_calls(x)
        monkeypatch.setattr(tl, "sqrt", counted)  # what the interpreter would wrap at the next launch
        assert torch.equal(kernels.nested_calls(x), expected)
        assert len(calls) == 3  # one call a program
        monkeypatch.undo()  # puts back what it found: the held patch's wrapper
        kernels.nested_calls(x)
        assert len(calls) == 3
        tl.sqrt = counted  # bound, and kept after the block
        kernels.nested_calls(x)
    try:
        assert len(calls) == 6 and tl.sqrt is counted
    finally:
        tl.sqrt = real


def _rebind_exp():  # plain Python, called inside a kernel
    tl.exp = _rebind_exp


@triton.jit
def rebinding_kernel(x_ptr, out_ptr):
    _rebind_exp()
    tl.store(out_ptr, tl.sqrt(tl.load(x_ptr)))


def test_a_launch_that_changes_the_patch_is_undone_in_full_as_the_interpreter_undoes_it():
    compat.install(["nested_calls"])
    real = tl.exp
    x, out = torch.tensor([4.0]), torch.empty(1)
    try:
        rebinding_kernel[(1,)](x, out)
        assert tl.exp is real  # the interpreter's restore puts back what it patched, over the rebinding
        with compat.held_language_patch():
            rebinding_kernel[(1,)](x, out)
            assert tl.exp is real
            rebinding_kernel[(1,)](x, out)
    finally:
        tl.exp = real
    assert out.item() == 2.0


def test_a_cell_patches_the_language_once_for_its_launches(scans):
    compat.install(["nested_calls"])
    subject = tc.register(kernels.nested_calls, name="compat_held_nested_calls",
                          inputs={"x": Tensor(("M", "N"), dtypes=("float32",))}, dims={"M": Dim(1, 8),
                          "N": Dim(1, 64)}, oracle=lambda x: x.norm(dim=1) + x.max(dim=1).values, reduces="N")
    backend = backend_module.current_backend("interpreter")  # its probe launches a kernel
    kernels.nested_calls(torch.randn(2, 8))
    scans.clear()
    kernels.nested_calls(torch.randn(2, 8))
    per_launch = len(scans)
    scans.clear()
    result = run_cell(subject, "dtype:float32", backend=backend, config=run_config(profile="ci"))
    assert result.outcome == "honoured" and result.examples > 2, (result.outcome, result.message)
    assert len(scans) == per_launch, (len(scans), per_launch)


@triton.jit
def _loop_count(out_ptr, n):
    total = 0
    for _ in tl.range(0, n):
        total += 1
    tl.store(out_ptr + tl.program_id(0), total)


def test_what_a_caller_sets_on_a_held_launchs_scope_lasts_that_launch(scans):
    """The large-index emulation sets tl.range on the scope _patch_lang returns (long loops trimmed to their
    last iterations): inside a held block it holds for that launch, and the next launch loops in full on the
    same patch (undoing the caller's change leaves the held patch as it was)."""
    from triton_conformance.conformance.kinds.large_index.tail_grid import tail_programs

    compat.install(["nested_calls"])
    out = torch.zeros(2, dtype=torch.int32)
    with compat.held_language_patch():
        _loop_count[(2,)](out, 10)
        scans.clear()
        with tail_programs(long_loop=100, loop_iterations=4):  # 4 iterations among 2 programs
            _loop_count[(2,)](out, 400)
        assert out.tolist() == [2, 2]
        _loop_count[(2,)](out, 400)
        assert out.tolist() == [400, 400]
        assert not scans


def test_a_held_launch_of_a_function_that_sees_no_language_fails_as_the_interpreter_says():
    from triton.runtime import interpreter

    compat.install(["nested_calls"])

    def sees_no_language():  # this test module's globals hold tl: a bare function's must not
        pass

    bare = type(sees_no_language)(sees_no_language.__code__, {})
    with compat.held_language_patch():
        kernels.nested_calls(torch.randn(2, 8))  # the block now holds a patch covering tl
        with pytest.raises(AssertionError, match="triton.language must be visible"):
            interpreter._patch_lang(bare)
