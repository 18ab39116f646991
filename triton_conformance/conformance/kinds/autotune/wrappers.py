"""Where a subject's tuner sits: the ``.fn`` layers from a kernel object down to its ``Autotuner``, and the
kernel caches of a library's wrappers above it.

Triton's own layers (``@triton.heuristics``) and a library's runtime (FlagGems'
``@libentry()`` over its ``@libtuner``, an ``Autotuner`` subclass) wrap the
tuner; :func:`tuner_of` walks them, :data:`MAX_LAYERS` deep, reading ``.fn``
of a library's object from its own instance attributes only.  A caching
wrapper launches what it cached for an argument specialization without asking
the tuner again, so :func:`clear_tuning` clears its caches with the tuner's.
"""

from __future__ import annotations

import types
from typing import Any

from triton.runtime.autotuner import Autotuner

__all__ = ["tuner_of", "kernel_caches", "clear_tuning", "MAX_LAYERS"]

# .fn layers walked from a kernel to its tuner: heuristics, a library's caching wrapper, its tuner subclass.
MAX_LAYERS = 8


def _wrapped(obj: Any) -> Any:
    """What ``obj`` wraps, one layer down, or None: ``.fn`` of triton's own wrappers (``@triton.heuristics``)
    and of a library's caching wrapper (FlagGems' ``LibEntry``), read from the instance's own attributes only
    (no property runs), never of a function, class or module."""
    if obj is None or isinstance(obj, (types.FunctionType, types.MethodType, type, types.ModuleType)):
        return None
    if type(obj).__module__.startswith("triton."):
        return getattr(obj, "fn", None)
    return getattr(obj, "__dict__", {}).get("fn")


def _chain(obj: Any) -> tuple[Any, tuple]:
    """The ``Autotuner`` (any subclass: FlagGems' ``LibTuner``) behind ``obj``, a few ``.fn`` layers down,
    and the library wrappers above it (not triton's own), or (None, ())."""
    k, above = obj, []
    for _ in range(MAX_LAYERS):
        if isinstance(k, Autotuner):
            return k, tuple(above)
        if k is not None and not type(k).__module__.startswith("triton."):
            above.append(k)
        k = _wrapped(k)
        if k is None:
            break
    return None, ()


def tuner_of(obj: Any) -> Any:
    """The ``triton.runtime.autotuner.Autotuner`` behind ``obj`` (through ``@triton.heuristics`` and a library's
    caching wrapper that exposes ``.fn``), or None."""
    tuner, above = _chain(obj)
    if above:
        _wrappers_above.setdefault(id(tuner), (tuner, []))
        known = _wrappers_above[id(tuner)][1]
        known.extend(w for w in above if all(w is not v for v in known))
    return tuner


# id(tuner) -> (tuner, the library wrappers found above it): their kernel caches are cleared with its cache.
_wrappers_above: dict[int, tuple[Any, list]] = {}


def kernel_caches(tuner: Any) -> list[dict]:
    """The kernel caches of the library wrappers found above ``tuner`` (their ``*cache*`` attributes holding a
    dict, or a tuple or list of dicts: FlagGems' ``LibEntry.kernel_cache``, one dict a device).  Such a wrapper
    launches what it cached for the arguments' specialization without asking the tuner again, so a config
    pinned after its first launch would never run unless these are cleared with the tuner's own cache."""
    hit = _wrappers_above.get(id(tuner))
    if hit is None or hit[0] is not tuner:
        return []
    caches = []
    for wrapper in hit[1]:
        for name, value in vars(wrapper).items():
            if "cache" not in name.lower():
                continue
            for d in (value if isinstance(value, (tuple, list)) else (value,)):
                if isinstance(d, dict):
                    caches.append(d)
    return caches


def clear_tuning(tuner: Any) -> None:
    """Forget ``tuner``'s choices: its cache, and the kernels the wrappers above it cached."""
    tuner.cache.clear()
    for cache in kernel_caches(tuner):
        cache.clear()
