"""compat.fast_paths: the interpreter's dtype, constexpr, block-type and tensor bookkeeping gives the answers
the originals give, for the arguments the fast paths take and for those they hand back (errors included), and a
kernel (whose tl builtins go through the lean wrapper) computes the same bits with them as without."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import pytest
import torch
import triton
import triton.language as tl
from triton.language import core
from triton.runtime import interpreter

from triton_conformance import compat

pytestmark = [pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the layer is interpreter-only"),
              pytest.mark.usefixtures("no_shims")]  # tests/cover/conftest.py: each test starts with none

SCALARS = (tl.int1, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32, tl.uint32, tl.int64, tl.uint64, tl.float16,
           tl.bfloat16, tl.float32, tl.float64, tl.float8e5, tl.float8e4nv, tl.float8e4b15)


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except Exception as error:  # noqa: BLE001 - the kind of error is what is compared
        return ("raises", type(error))


def _both(fn_name, owner):
    """(original, fast) of one patched function."""
    original = getattr(owner, fn_name)
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    fast = getattr(owner, fn_name)
    assert fast is not original
    return original, fast


def test_np_dtype_is_the_originals_for_scalars_pointers_blocks_and_unknown_types():
    original, fast = _both("_get_np_dtype", interpreter)
    cases = [*SCALARS, *(tl.pointer_type(d) for d in SCALARS[:4]), *(tl.block_type(d, [4, 8]) for d in SCALARS),
             tl.block_type(tl.pointer_type(tl.float32), [16]), tl.void, tl.pointer_type(tl.pointer_type(tl.int8))]
    for _ in range(2):  # the second time from what the first kept
        for dtype in cases:
            assert _outcome(fast, dtype) == _outcome(original, dtype), dtype
    assert fast(tl.bfloat16).name == "uint16" and fast(tl.block_type(tl.float8e4nv, [2])).name == "uint8"


def _described(value):
    """A value as type and text, so that tl.tuple and constexpr compare by what they hold."""
    if isinstance(value, (list, tuple)):
        return type(value), [_described(v) for v in value]
    if isinstance(value, core.tuple):
        return type(value), [_described(v) for v in value.values], str(value.type)
    return type(value), repr(value)


def test_unwrap_is_the_originals_for_leaves_constexprs_and_containers():
    original, fast = _both("_unwrap_if_constexpr", core)
    cases = [3, 2.5, True, None, "s", tl.float32, core.constexpr(4), core.constexpr(None), core.constexpr(tl.int8),
             [core.constexpr(1), 2], (core.constexpr(1), 5), core.tuple([core.constexpr(2), 3]),
             [[core.constexpr(7)]], tl.block_type(tl.float16, [2])]
    for value in cases:
        assert _described(fast(value)) == _described(original(value)), value


def _block(element, shape):
    made = tl.block_type(element, shape)
    return (list(vars(made)), type(made.shape), list(vars(made.shape)), type(made.shape.values),
            list(made.shape.values), str(made.shape.type), made.numel, made.name, made.element_ty)


def test_block_type_is_the_originals_first_and_again_and_for_bad_shapes():
    shapes = [[4, 8], core.tuple([core.constexpr(4), core.constexpr(8)]), [core.constexpr(16)], [1, 2, 1],
              [3], [], (4, 8), [core.constexpr(4.0)], [True, 2], [1 << 21]]
    elements = (tl.float32, tl.bfloat16, tl.pointer_type(tl.int8))
    before = {(e.name, i): _outcome(_block, e, s) for e in elements for i, s in enumerate(shapes)}
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    for _ in range(2):  # the second time from what the first kept
        for e in elements:
            for i, shape in enumerate(shapes):
                assert _outcome(_block, e, shape) == before[(e.name, i)], (e, shape)
    first, again = tl.block_type(tl.float32, [4, 8]), tl.block_type(tl.float32, [4, 8])
    assert first.shape is not again.shape  # each its own tuple: one mutated leaves the other alone


def _tensor(tensor_type):
    made = core.tensor("handle", tensor_type)
    return (list(vars(made)), made.handle, type(made.shape), [repr(d) for d in made.shape.values],
            [(list(vars(d)), repr(d.type)) for d in made.shape.values], str(made.shape.type), repr(made.numel),
            repr(made.numel.type), made.type, made.dtype)


def test_tensor_is_the_originals_for_blocks_scalars_and_pointers_first_and_again():
    types = [tl.block_type(tl.float32, [4, 8]), tl.float16, tl.block_type(tl.pointer_type(tl.int8), [16]),
             tl.pointer_type(tl.float32), tl.block_type(tl.int1, [1, 2, 1])]
    before = [_tensor(t) for t in types]
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    for _ in range(2):  # the second time from what the first kept
        assert [_tensor(t) for t in types] == before
    first, again = core.tensor(None, types[0]), core.tensor(None, types[0])
    assert first.shape is not again.shape and first.shape.values[0] is not again.shape.values[0]


@triton.jit
def _rows_softmax(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols[None, :], mask=cols[None, :] < N, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    tl.store(out_ptr + row * N + cols[None, :], (e / tl.sum(e, axis=1)[:, None]).to(out_ptr.dtype.element_ty),
             mask=cols[None, :] < N)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_a_kernel_computes_the_same_bits_with_the_fast_paths(dtype):
    x = torch.randn(5, 37, generator=torch.Generator().manual_seed(3)).to(dtype)

    def run():
        out = torch.empty_like(x)
        _rows_softmax[(5,)](x, out, 37, BLOCK=64)
        return out

    without = run()
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    assert torch.equal(run().view(torch.int16 if dtype == torch.float16 else torch.int32),
                       without.view(torch.int16 if dtype == torch.float16 else torch.int32))


def _wrapped(patch_builtin, monkeypatch, pkg):
    """(name, member) for each builtin ``patch_builtin`` hands to ``_patch_attr`` for ``pkg``, in order."""
    seen = []
    monkeypatch.setattr(interpreter, "_patch_attr", lambda obj, name, member, builder, scope:
                        seen.append((obj, name, member)))
    patch_builtin(pkg, interpreter.interpreter_builder, interpreter._LangPatchScope())
    monkeypatch.undo()
    assert all(obj is pkg for obj, _, _ in seen)
    return [(name, member) for _, name, member in seen]


@core.builtin
def _extra(x, _semantic=None):
    return x


def test_a_launchs_builtins_are_the_original_scans_for_modules_classes_and_computed_modules(monkeypatch):
    import types

    original = interpreter._patch_builtin
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    lean = interpreter._patch_builtin
    assert lean is not original

    def same(pkg):
        want = _wrapped(original, monkeypatch, pkg)
        assert _wrapped(lean, monkeypatch, pkg) == want, pkg
        return want

    for pkg in (tl, tl.math, core, tl.tensor, core.tensor_descriptor_base):
        assert same(pkg)
    with monkeypatch.context() as m:
        m.setattr(tl, "aa_extra", _extra, raising=False)  # a builtin more, first by name
        m.setattr(tl, "sum", lambda *a, **k: None)  # a builtin rebound to a plain function
        names = [name for name, _ in same(tl)]
        assert names[0] == "aa_extra" and "sum" not in names and names == sorted(names)
    computed = types.ModuleType("computed")  # members from __getattr__/__dir__: the original's scan
    computed.__getattr__ = lambda name: _extra if name == "one" else (_ for _ in ()).throw(AttributeError(name))
    computed.__dir__ = lambda: ["one"]
    assert same(computed) == [("one", _extra)]
