"""compat.fast_launch: each launch wraps the builtins the original scan of triton.language finds, in its order,
also after a package gains, loses or rebinds a builtin, and for a module whose members are computed."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import types

import pytest
import triton.language as tl
from triton.language import core
from triton.runtime import interpreter

from triton_conformance import compat

pytestmark = [pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the layer is interpreter-only"),
              pytest.mark.usefixtures("no_shims")]  # tests/cover/conftest.py: each test starts with none

PACKAGES = (tl, tl.tensor, tl.math, core.tensor_descriptor_base)


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


def test_the_kept_scan_wraps_what_the_original_scan_finds_as_packages_change(monkeypatch):
    original = interpreter._patch_builtin
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    kept = interpreter._patch_builtin
    assert kept is not original

    def same(pkg):
        want = _wrapped(original, monkeypatch, pkg)
        assert want and _wrapped(kept, monkeypatch, pkg) == want, pkg
        return want

    for _ in range(2):  # the second time from what the first kept
        for pkg in PACKAGES:
            same(pkg)
    before = same(tl)
    with monkeypatch.context() as m:
        m.setattr(tl, "zz_extra", _extra, raising=False)  # a builtin more
        assert ("zz_extra", _extra) in same(tl)
        m.setattr(tl, "sum", lambda *a, **k: None)  # a builtin rebound to a plain function
        assert "sum" not in dict(same(tl))
        m.setattr(tl.tensor, "zz_extra", _extra, raising=False)  # a class gains one
        assert ("zz_extra", _extra) in same(tl.tensor)
    assert same(tl) == before  # the first state again: its scan kept


def test_a_module_with_computed_members_is_scanned_every_time(monkeypatch):
    original = interpreter._patch_builtin
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    kept = interpreter._patch_builtin
    computed = types.ModuleType("computed")
    names = ["one"]
    computed.__getattr__ = lambda name: _extra if name in names else (_ for _ in ()).throw(AttributeError(name))
    computed.__dir__ = lambda: list(names)
    assert _wrapped(kept, monkeypatch, computed) == _wrapped(original, monkeypatch, computed) == [("one", _extra)]
    names.append("two")
    assert _wrapped(kept, monkeypatch, computed) == [("one", _extra), ("two", _extra)]
