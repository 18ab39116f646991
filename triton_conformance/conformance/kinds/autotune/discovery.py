"""Where a subject's ``@triton.autotune`` kernels are: declared, or revealed by its code.

They are the ones its contract declares (``@subject(autotuned=(kernel, ...))``)
or, by default, the ones its code reveals: the launcher's globals, closure,
default arguments and the helpers (functions, classes, modules) it names, a few
calls deep; behind a library's wrappers too (:mod:`.wrappers`, whose kernel
caches are cleared with the tuner's).
"""

from __future__ import annotations

import inspect
import types
import warnings
from typing import Any, Callable

from triton_conformance.conformance.kinds.autotune.wrappers import tuner_of
from triton_conformance.errors import InvalidArgument, InvalidContract

__all__ = ["autotuned", "reveal", "tuners_for", "triton_kernel_of", "AUTOTUNED_ATTR"]

AUTOTUNED_ATTR = "__conformance_autotuned__"
_FOREIGN = ("torch", "triton", "numpy", "hypothesis", "triton_conformance", "builtins", "typing", "functools")


def autotuned(*kernels: Any) -> Callable[[Any], Any]:
    """Deprecated: declare ``@subject(..., autotuned=(kernel, ...))`` instead.

    Decorator for a launcher (under ``@subject``): the ``@triton.autotune`` kernels it runs.
    """
    warnings.warn("@autotuned(kernel) is deprecated: declare @subject(..., autotuned=(kernel,)) or "
                  "register(..., autotuned=(kernel,))", DeprecationWarning, stacklevel=2)
    if not kernels or any(tuner_of(k) is None for k in kernels):
        raise InvalidArgument(f"autotuned{kernels!r}: expected @triton.autotune kernels")

    def mark(launcher: Any) -> Any:
        setattr(launcher, AUTOTUNED_ATTR, tuple(kernels))
        return launcher

    return mark


def _foreign(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module.split(".")[0] in _FOREIGN


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def triton_kernel_of(obj: Any) -> Any:
    """``obj`` if it is a Triton kernel (``@triton.jit``, interpreted or not, an autotuner, heuristics), else None."""
    from triton.runtime.jit import KernelInterface

    return obj if isinstance(obj, KernelInterface) else None


def reveal(target: Any, depth: int = 4, find: Callable[[Any], Any] = tuner_of) -> tuple:
    """The autotuners ``target``'s code runs: a declared ``@autotuned(...)`` list, else those found
    in its globals, closure and the user helpers it names (``depth`` calls deep; the function under a
    ``functools.wraps`` decorator counts as the same call), in order found.

    ``find``: what an object found there is, or None (default: its autotuner; ``triton_kernel_of``: any
    Triton kernel)."""
    found: list = []
    seen: set[int] = set()

    def add(tuner: Any) -> None:
        if all(t is not tuner for t in found):
            found.append(tuner)

    def visit(obj: Any, depth: int) -> None:
        if id(obj) in seen or depth < 0:
            return
        seen.add(id(obj))
        tuner = find(obj)
        if tuner is not None:
            add(tuner)
            return
        declared = getattr(obj, AUTOTUNED_ATTR, None) if not isinstance(obj, types.ModuleType) else None
        if isinstance(declared, tuple):
            for k in declared:
                add(find(k))
            return
        if isinstance(obj, (staticmethod, classmethod, types.MethodType)):
            obj = obj.__func__
        if inspect.isfunction(obj):
            # A functools.wraps decorator (fla's @input_guard over @dispatch over torch.compiler.disable,
            # liger's @ensure_contiguous) is no call deeper: the function it wraps costs no depth.
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is not None:
                visit(wrapped, depth)
            if _foreign(obj):
                return
            g = obj.__globals__
            names = _names(obj.__code__)
            for name in sorted(names):
                if name in g:
                    value = g[name]
                    if isinstance(value, types.ModuleType):
                        if not _foreign(types.SimpleNamespace(__module__=value.__name__)):
                            for attr in sorted(names):
                                if attr in vars(value):
                                    visit(vars(value)[attr], depth - 1)
                    else:
                        visit(value, depth - 1)
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents, depth - 1)
                except ValueError:  # an empty cell
                    pass
            # A kernel bound as a default argument (``def launch(x, _kernel=_kernel)``) is named as a global is.
            for value in (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
                visit(value, depth - 1)
        elif inspect.isclass(obj):
            if not _foreign(obj):
                # Naming the class was the call (Function.apply runs forward): its methods cost no more depth.
                for value in vars(obj).values():
                    if isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value):
                        visit(value, depth)
        elif not isinstance(obj, (types.ModuleType, type(None), int, float, str, bytes, tuple, list, dict)):
            if not _foreign(type(obj)):
                visit(type(obj), depth)  # an nn.Module instance: its class's methods

    visit(target, depth)
    return tuple(found)


_CACHE: dict[int, tuple[Any, tuple]] = {}


def tuners_for(subject: Any) -> tuple:
    """The autotuners ``subject`` runs: those its contract declares (``autotuned=``), each checked to be
    one; else those its code reveals (:func:`reveal`)."""
    key = id(subject)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is subject:
        return hit[1]
    contract = subject.contract
    if contract.autotuned:
        tuners = tuple(tuner_of(k) for k in contract.autotuned)
        for kernel, tuner in zip(contract.autotuned, tuners):
            if tuner is None:
                what = f"{getattr(kernel, '__name__', '?')} (a {type(kernel).__name__})"
                raise InvalidContract(f"Contract: autotuned={what}, expected @triton.autotune kernels: "
                                      "@triton.autotune(...) above @triton.jit")
    else:
        tuners = reveal(subject.target if subject.target is not None else subject.launcher)
    _CACHE[key] = (subject, tuners)
    return tuners
