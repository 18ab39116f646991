"""A fast path for the interpreter's per-launch patching of ``triton.language``: the scan for builtins kept.

Every launch (``interpreter._patch_lang``) walks ``tl``, ``tl.tensor``,
``tl.math`` and the descriptor base with ``inspect.getmembers`` (sorting and
fetching some 160 members each) to find the builtins it wraps, then wraps
them.  The wrapping must happen per launch (it is undone after); the scan
gives the same list whenever the package holds the same objects.  Here
``_patch_builtin`` keeps the list its scan found for each state of a package
(a module's globals, or the ``__dict__`` of each class in a class's MRO, keys
and values, compared by identity and kept alive so that no identity is
reused), and scans again for a state not seen before.  A module with its own
``__dir__`` or ``__getattr__``, or a class with a metaclass, is scanned as
the original does, every time.
"""

from __future__ import annotations

import inspect
from typing import Any

from triton_conformance.compat._patch import Patch

_KEPT = 64  # states kept; more (a package rebound on every launch) starts afresh


def apply(patch: Patch, interpreter: Any, core: Any) -> None:
    original = getattr(interpreter, "_patch_builtin", None)
    if callable(original) and callable(getattr(interpreter, "_patch_attr", None)):
        patch.set(interpreter, "_patch_builtin", _patch_builtin_kept(original, interpreter, core))


def _state(pkg: Any) -> tuple | None:
    """What the scan of ``pkg`` depends on: its namespaces' keys and values, or None where that is not all."""
    if inspect.ismodule(pkg):
        names = vars(pkg)
        if "__dir__" in names or "__getattr__" in names:
            return None
        spaces = (names,)
    elif type(pkg) is type:
        spaces = tuple(vars(cls) for cls in pkg.__mro__)
    else:
        return None
    return (pkg, *getattr(pkg, "__mro__", ()), *(item for space in spaces for pair in space.items() for item in pair))


def _patch_builtin_kept(original: Any, interpreter: Any, core: Any) -> Any:
    """``interpreter._patch_builtin``: the builtins of ``pkg`` from the scan of the same state, wrapped by the
    interpreter's ``_patch_attr`` in the scan's order, as the original does."""
    is_builtin = core.is_builtin
    scans: dict[tuple, tuple[tuple, list[tuple[str, Any]]]] = {}

    def _patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        state = _state(pkg)
        if state is None:
            return original(pkg, builder, scope)
        key = tuple(map(id, state))
        found = scans.get(key)
        if found is None:
            if len(scans) >= _KEPT:
                scans.clear()
            found = scans[key] = (state, [(n, m) for n, m in inspect.getmembers(pkg) if is_builtin(m)])
        for name, member in found[1]:
            interpreter._patch_attr(pkg, name, member, builder, scope)

    return _patch_builtin
