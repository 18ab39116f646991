"""The interpreter's patch of ``triton.language``: once a launch, and once for a block of launches.

Each launch under the interpreter patches ``triton.language`` (``interpreter._patch_lang``): every builtin
of ``tl``, ``tl.math``, ``tl.core``, ``tl.tensor`` and the descriptor base is wrapped to take the
interpreter's semantic, ``tl.range``, ``tl.reduce`` and a few more are replaced, and all of it is restored
when the launch ends: a scan of some 500 names and about 200 attribute changes each way, 0.2 ms, a tenth
of a small launch.  The ``nested_calls`` shim (this module) cuts that in two steps:

- a ``@triton.jit`` function called inside a kernel (``tl.max``, ``tl.sum``, a helper) made the
  interpreter patch the language again at every call; the launch has patched it, so a call inside the
  launch patches only a language module the launch had not (``tl.core`` from ``tl.standard``);
- inside :func:`held_language_patch` (a cell's launches: ``conformance/runner.py``) the patch is kept from
  one launch to the next and undone when the block ends.  A launch starts with a check that nothing the
  patch read changed since it was made (the namespaces it scanned or set hold the same names and values);
  if something did, the patch is undone first, leaving whatever someone else bound since, and made afresh.
  A launch that changed them itself is undone in full at its end, as the interpreter's own restore does.
  So every launch sees the builtins the interpreter would give it.  What differs is only between
  launches, where code outside the kernels sees ``tl`` patched: nothing in a cell reads it there.

``_patch_lang`` is still called once a launch and once a call (the cost meter counts the calls), and the
scope a launch gets back still takes and undoes the caller's own changes (``tail_grid`` sets ``tl.range``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["apply_nested_calls", "held_language_patch"]

_MISSING = object()
_state: dict[str, Any] = {"held": None}  # the applied shim's _Held, while nested_calls is installed


def apply_nested_calls(patch: Patch, target: TargetDevice) -> None:
    import triton.language as tl
    from triton.runtime import interpreter

    if not hasattr(interpreter, "_LangPatchScope"):
        return  # a triton whose interpreter patches the language some other way
    held = _Held(interpreter, tl)
    patch.set(interpreter, "_patch_lang", held.patch_lang)
    _state["held"] = held
    patch.on_restore(held.detach)


@contextlib.contextmanager
def held_language_patch() -> Iterator[None]:
    """Inside the block, launches keep ``triton.language`` patched from one to the next (see the module's
    docstring); nested blocks join the outer one.  Without the ``nested_calls`` shim, nothing changes."""
    held = _state["held"]
    if held is None:
        yield
        return
    held.depth += 1
    try:
        yield
    finally:
        held.depth -= 1
        if held.depth == 0:
            held.release(careful=True)
            held.launch = None


class _Held:
    """The language patch of the running launch and, inside :func:`held_language_patch`, of those before."""

    def __init__(self, interpreter: Any, tl: Any) -> None:
        self.interpreter, self.tl = interpreter, tl
        self.original = interpreter._patch_lang
        self.missing = getattr(interpreter, "_MISSING", _MISSING)  # "no attribute", as the interpreter's scopes say
        self.launch: frozenset[int] | None = None  # the language modules the running launch has patched
        self.depth = 0
        self.langs: frozenset[int] = frozenset()  # the language modules the held patch covers
        self.changes: list[tuple[Any, str, Any, Any]] = []  # (object, name, original, the value set), in order
        self.views: list[tuple[Any, tuple, tuple]] = []  # (a namespace, its names, its values) after the patch
        end = self._end_held_launch

        class LaunchScope(interpreter._LangPatchScope):
            """What a held launch gets from ``_patch_lang``: it takes the caller's own changes (``set_attr``) and
            undoes them at the launch's end (``restore``), which then ends the launch; the held patch stays."""

            def restore(scope) -> None:
                super().restore()
                end()

        self.launch_scope = LaunchScope

    def _langs(self, fn: Any) -> frozenset[int]:
        tl = self.tl
        return frozenset(id(v) for v in getattr(fn, "__globals__", {}).values() if v is tl or v is tl.core)

    def patch_lang(self, fn: Any) -> Any:
        langs = self._langs(fn)
        if self.launch is not None:  # a call inside a launch
            if langs <= self.launch:
                return self.interpreter._LangPatchScope()  # nothing to add
            scope = self.original(fn)
            self.launch = self.launch | langs
            if self.depth:
                self._keep(scope, langs)
            return scope  # the interpreter leaves a call's patch in place; a held one is undone with the block
        if not self.depth:
            return self._own_launch(self.original(fn), langs)
        if not self._intact():
            self.release(careful=True)  # changed since the last launch: what the interpreter would patch now
        if not langs or not langs <= self.langs:  # (none: the interpreter's own assertion that tl is visible)
            self._keep(self.original(fn), langs)
        self.launch = self.langs
        return self.launch_scope()

    def _own_launch(self, scope: Any, langs: frozenset[int]) -> Any:
        """Outside a block: the launch's own patch, restored at its end (then calls inside need none)."""
        self.launch = langs
        restore = scope.restore

        def restore_then_end() -> None:
            self.launch = None
            restore()

        scope.restore = restore_then_end
        return scope

    def _end_held_launch(self) -> None:
        self.launch = None
        if not self._intact():  # the launch changed what it patched: undone in full, as the interpreter does
            self.release(careful=False)

    def _keep(self, scope: Any, langs: frozenset[int]) -> None:
        """Hold ``scope``'s changes (recording the value each set) and what the patch now covers."""
        made = list(scope._changes)
        scope._changes.clear()  # the held patch is undone by release(), not by the scope
        later: dict[tuple[int, str], Any] = {}
        values = []
        for obj, name, original in reversed(made):
            key = (id(obj), name)
            values.append(later[key] if key in later else getattr(obj, name, self.missing))
            later[key] = original
        self.changes.extend((obj, name, original, value)
                            for (obj, name, original), value in zip(made, reversed(values)))
        self.langs = self.langs | langs
        self._view()

    def _view(self) -> None:
        """What the held patch read and set, as it is now: each namespace's names and values."""
        tl = self.tl
        spaces: dict[int, Any] = {}
        scanned = [tl.core.tensor_descriptor_base]  # what interpreter._patch_lang scans besides the modules
        for lang in (tl, tl.core):
            if id(lang) in self.langs:
                scanned += [lang, lang.tensor] + ([lang.math] if lang is tl else [])
        for obj in scanned + [obj for obj, _, _, _ in self.changes]:
            for space in getattr(obj, "__mro__", (obj,)):
                spaces.setdefault(id(space), space)
        self.views = []
        for space in spaces.values():
            names = vars(space)
            self.views.append((names, tuple(names), tuple(names.values())))

    def _intact(self) -> bool:
        """Whether each namespace holds the same names and values (a tuple takes identical items as equal
        without asking them; a function, as the builtins are, equals only itself)."""
        for names, keys, values in self.views:
            if len(names) != len(keys) or tuple(names) != keys or tuple(names.values()) != values:
                return False
        return True

    def release(self, *, careful: bool) -> None:
        """Undo the held patch, last change first; ``careful``: an attribute someone rebound since keeps theirs."""
        while self.changes:
            obj, name, original, value = self.changes.pop()
            if careful and getattr(obj, name, self.missing) is not value:
                continue
            if original is self.missing:
                if hasattr(obj, name):
                    delattr(obj, name)
            else:
                setattr(obj, name, original)
        self.langs, self.views = frozenset(), []

    def detach(self) -> None:
        """The shim is removed: undo a held patch (a block still open runs unheld from here)."""
        self.release(careful=True)
        self.launch, self.depth = None, 0
        if _state["held"] is self:
            _state["held"] = None
