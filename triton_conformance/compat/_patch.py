"""Recorded monkeypatches: each shim's changes, undone in reverse order."""

from __future__ import annotations

from typing import Any, Callable

_MISSING = object()


class Patch:
    """The attribute and item changes one shim made, so that :meth:`restore` can undo them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._changes: list[tuple[str, Any, Any, Any, Any]] = []
        self._undo: list[Callable[[], None]] = []

    def set(self, obj: Any, attr: str, value: Any) -> None:
        """``setattr(obj, attr, value)``; restore puts back what ``obj`` itself held (or deletes it)."""
        own = vars(obj) if hasattr(obj, "__dict__") else {}
        original = own.get(attr, _MISSING)
        self._changes.append(("attr", obj, attr, original, value))
        setattr(obj, attr, value)

    def set_item(self, mapping: dict, key: str, value: Any) -> None:
        """``mapping[key] = value`` (a module's globals); restore puts the old value back."""
        original = mapping.get(key, _MISSING)
        self._changes.append(("item", mapping, key, original, value))
        mapping[key] = value

    def on_restore(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the shim is removed (after its attributes are restored)."""
        self._undo.append(fn)

    def restore(self) -> None:
        while self._changes:
            kind, obj, key, original, value = self._changes.pop()
            if kind == "attr":
                if original is _MISSING:
                    if key in (vars(obj) if hasattr(obj, "__dict__") else {}):
                        delattr(obj, key)
                else:
                    setattr(obj, key, original)
            else:
                if obj.get(key, _MISSING) is not value:
                    continue  # someone rebound it since: leave theirs
                if original is _MISSING:
                    obj.pop(key, None)
                else:
                    obj[key] = original
        while self._undo:
            self._undo.pop()()
