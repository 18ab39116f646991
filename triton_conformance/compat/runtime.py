"""Library runtimes over ``@triton.jit`` under the interpreter: what they ask of a ``JITFunction``.

Libraries wrap their kernels in runtimes of their own (FlagGems' ``libentry``
and ``LibTuner``, its ``pointwise_dynamic`` code generator, the softmax
tutorial's occupancy query).  Under ``TRITON_INTERPRET=1`` ``@triton.jit``
makes an ``InterpretedFunction`` instead, which none of them expects:

- ``jit_function``: ``isinstance(fn, JITFunction)`` holds for interpreted kernels
  (``triton.JITFunction``, ``triton.runtime.JITFunction`` and
  ``triton.runtime.jit.JITFunction`` accept both), so a walk down ``.fn`` stops
  at the kernel and an ``assert isinstance(...)`` passes; the kernel has the
  ``JITFunction`` attributes such runtimes read: ``params``, ``signature``,
  ``constexprs``, ``src`` and a ``cache_key`` (a hash of its source).
- ``compiled_kernel``: ``kernel.run(...)`` and ``kernel.warmup(...)`` return a
  kernel handle instead of None, as a compiled kernel is returned: it launches
  with ``handle[grid](*args)``, reading its arguments the way triton 3.9's
  launcher does (one per parameter, in order; a constexpr's slot is skipped and
  its value is the one it was specialized with), and answers ``_init_handles()``,
  ``n_regs``, ``n_spills`` and ``metadata`` (see :class:`InterpretedKernel`).
- ``tensor_wrappers``: an argument that is not a tensor but has ``data_ptr()``
  and ``dtype`` (FlagGems' ``StridedBuffer``, ``TypedPtr``) reaches the kernel as
  its pointer; the interpreter's host copy would call ``new_empty`` on it.
- ``lang_globals``: a ``@triton.jit`` function in a module that never imports
  ``triton.language`` (code generated at import, helpers reached through
  ``import triton``) runs; the interpreter asserts "triton.language must be
  visible from within jit'd function".  The module gets a hidden name bound to
  ``triton.language`` when the function is decorated (so: after the shim), and
  a parameter annotated ``triton.language.constexpr`` is a constexpr, as
  ``tl.constexpr`` is.  Names bound early (``from triton.language import load``)
  are not served: the interpreter patches the module's attributes, not them.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import textwrap
from collections import namedtuple
from typing import Any, TypeVar

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["apply_jit_function", "apply_compiled_kernel", "apply_tensor_wrappers", "apply_lang_globals",
           "InterpretedKernel"]


# ---------------------------------------------------------------------------- jit_function
def _params(self: Any) -> list:
    from triton.runtime.jit import KernelParam

    cached = self.__dict__.get("_compat_params")
    if cached is None:
        dns = self.kwargs.get("do_not_specialize") or ()
        dns_oa = self.kwargs.get("do_not_specialize_on_alignment") or ()
        cached = [KernelParam(i, p, i in dns or p.name in dns, i in dns_oa or p.name in dns_oa)
                  for i, p in enumerate(inspect.signature(self.fn).parameters.values())]
        self.__dict__["_compat_params"] = cached
    return cached


def _signature(self: Any) -> inspect.Signature:
    """``inspect.signature(self.fn)``, kept for the function it was taken of (each launch asks)."""
    kept = self.__dict__.get("_compat_signature")
    if kept is None or kept[0] is not self.fn:
        kept = self.__dict__["_compat_signature"] = (self.fn, inspect.signature(self.fn))
    return kept[1]


def _cache_key(self: Any) -> str:
    cached = self.__dict__.get("_compat_cache_key")
    if cached is None:
        text = f"{self.fn.__module__}:{self.fn.__qualname__}\n{_source(self)}"
        cached = self.__dict__["_compat_cache_key"] = hashlib.sha256(text.encode()).hexdigest()
    return cached


def _source(self: Any) -> str:
    """The function's source from its ``def`` on (decorators dropped), dedented: ``JITFunction.src``."""
    try:
        text = textwrap.dedent(inspect.getsource(self.fn))
    except (OSError, TypeError):
        return ""
    start = re.search(r"^def\s+\w+\s*\(", text, re.MULTILINE)
    return text[start.start():] if start else text


def apply_jit_function(patch: Patch, target: TargetDevice) -> None:
    import triton
    from triton.runtime import interpreter, jit

    real = jit.JITFunction
    interpreted = interpreter.InterpretedFunction

    class _AcceptsInterpreted(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            if cls is JITFunction:
                return isinstance(obj, (real, interpreted))
            return type.__instancecheck__(cls, obj)  # a subclass (gluon's, imported later) checks as usual

        def __subclasscheck__(cls, sub: type) -> bool:
            if cls is JITFunction:
                return issubclass(sub, (real, interpreted))
            return type.__subclasscheck__(cls, sub)

    T = TypeVar("T")

    class JITFunction(real[T], metaclass=_AcceptsInterpreted):  # type: ignore[misc, valid-type]
        """triton's JITFunction, as ``isinstance`` sees it under the compat layer: interpreted kernels count."""

    JITFunction.__module__ = real.__module__
    for module in (triton, triton.runtime, jit):
        if getattr(module, "JITFunction", None) is real:
            patch.set(module, "JITFunction", JITFunction)
    patch.set(interpreted, "params", property(_params))
    patch.set(interpreted, "signature", property(_signature))
    patch.set(interpreted, "constexprs", property(lambda self: [p.num for p in self.params if p.is_constexpr]))
    patch.set(interpreted, "src", property(_source))
    patch.set(interpreted, "cache_key", property(_cache_key))
    patch.set(interpreted, "__globals__", property(lambda self: self.fn.__globals__))


# ---------------------------------------------------------------------------- compiled_kernel
_OPTIONS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
_Metadata = namedtuple("KernelMetadata", ["name", "num_warps", "num_stages", "num_ctas", "shared", "warp_size",
                                          "target"])


class InterpretedKernel:
    """What ``run``/``warmup`` of an interpreted kernel return: a compiled kernel's face, launching through the
    interpreter.

    - ``handle[grid](*args)`` reads one argument per kernel parameter, in order, as
      triton 3.9's launcher does: a constexpr's slot is read past (its value is the
      one the kernel was specialized with); a parameter with no argument left is a
      ``TypeError`` (the GPU launcher would read past the end of its arguments);
    - ``metadata`` has the compile options (``num_warps``, ``num_stages``,
      ``num_ctas``), ``name`` and ``shared``; ``n_regs``, ``n_spills`` and
      ``n_max_threads`` are set by ``_init_handles()``.  Nothing is compiled, so
      the resource figures are those of a kernel that fits the declared target
      at full occupancy: ``n_regs`` = registers per SM / threads per SM, no
      spills, ``shared`` = one fp32 word per thread.  They are here so that a
      launcher that sizes a persistent grid from them gets a grid; the cells
      judge the kernel at whatever grid results.
    """

    def __init__(self, fn: Any, constants: dict[str, Any], options: dict[str, Any], target: TargetDevice) -> None:
        self.fn = fn
        self.constants = constants
        self.options = options
        self.target = target
        self.name = fn.fn.__name__
        num_warps = options.get("num_warps", _OPTIONS["num_warps"])
        self.metadata = _Metadata(self.name, num_warps, options.get("num_stages", _OPTIONS["num_stages"]),
                                  options.get("num_ctas", _OPTIONS["num_ctas"]), num_warps * target.warp_size * 4,
                                  target.warp_size, ("cuda", target.arch, target.warp_size))
        self.n_regs: int | None = None
        self.n_spills: int | None = None
        self.n_max_threads: int | None = None

    def _init_handles(self) -> None:
        t = self.target
        self.n_regs = t.regs_per_multiprocessor // t.max_threads_per_multiprocessor
        self.n_spills = 0
        self.n_max_threads = min(1024, t.max_threads_per_multiprocessor)

    def __getitem__(self, grid: Any) -> Any:
        self._init_handles()

        def runner(*args: Any, stream: Any = None) -> None:
            bound = []
            for i, param in enumerate(_params(self.fn)):
                if param.is_constexpr:
                    bound.append(self.constants[param.name])
                elif i < len(args):
                    bound.append(args[i])
                else:
                    raise TypeError(f"{self.name}[grid](...) got {len(args)} argument(s) but parameter "
                                    f"{param.name!r} is #{i} (triton's launcher reads one argument per parameter, "
                                    f"constexprs included, and would read past the end)")
            self.fn._compat_launch(*bound, grid=grid, warmup=False, **self.options)

        return runner

    def __repr__(self) -> str:
        return f"InterpretedKernel({self.name}, {self.constants})"


def apply_compiled_kernel(patch: Patch, target: TargetDevice) -> None:
    from triton.runtime import interpreter

    cls = interpreter.InterpretedFunction
    original_run = cls.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> InterpretedKernel:
        signature = _signature(self)
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
        bound.apply_defaults()
        constexprs = {p.name for p in _params(self) if p.is_constexpr}
        constants = {name: value for name, value in bound.arguments.items() if name in constexprs}
        options = {k: v for k, v in kwargs.items() if k not in signature.parameters}
        if not warmup:
            original_run(self, *args, grid=grid, warmup=False, **kwargs)
        return InterpretedKernel(self, constants, options, target)

    patch.set(cls, "_compat_launch", original_run)
    patch.set(cls, "run", run)


# ---------------------------------------------------------------------------- tensor_wrappers
_PLAIN = (int, float, bool, type(None))  # each launch asks of every argument: these are answered first


def _is_wrapper(arg: Any) -> bool:
    """A tensor-like argument that is not a tensor: ``data_ptr()`` and a dtype, in CPU memory."""
    if type(arg) in _PLAIN:
        return False
    import torch
    from triton.runtime.jit import TensorWrapper

    if isinstance(arg, (torch.Tensor, TensorWrapper)) or not hasattr(arg, "data_ptr") or not hasattr(arg, "dtype"):
        return False
    device = getattr(arg, "device", None)
    return device is None or torch.device(device).type == "cpu"


def apply_tensor_wrappers(patch: Patch, target: TargetDevice) -> None:
    from triton.runtime import interpreter

    cls = interpreter.GridExecutor
    init_args, restore_args = cls._init_args_hst, cls._restore_args_dev

    def split(args: Any, kwargs: dict) -> tuple[list, dict, dict]:
        """The arguments with each wrapper replaced by None, and where the wrappers were."""
        kept = {("arg", i): a for i, a in enumerate(args) if _is_wrapper(a)}
        kept.update({("kw", k): v for k, v in kwargs.items() if _is_wrapper(v)})
        return ([None if ("arg", i) in kept else a for i, a in enumerate(args)],
                {k: None if ("kw", k) in kept else v for k, v in kwargs.items()}, kept)

    def _init_args_hst(self: Any, args_dev: Any, kwargs: dict) -> tuple[list, dict]:
        args, kw, kept = split(args_dev, kwargs)
        args_hst, kwargs_hst = init_args(self, args, kw)
        for (where, key), wrapper in kept.items():  # CPU memory already: the kernel reads it in place
            (args_hst if where == "arg" else kwargs_hst)[key] = wrapper
        return args_hst, kwargs_hst

    def _restore_args_dev(self: Any, args_dev: Any, args_hst: Any, kwargs: dict, kwargs_hst: dict) -> None:
        args, kw, _ = split(args_dev, kwargs)
        hst, kw_hst, _ = split(args_hst, kwargs_hst)
        restore_args(self, args, hst, kw, kw_hst)

    patch.set(cls, "_init_args_hst", _init_args_hst)
    patch.set(cls, "_restore_args_dev", _restore_args_dev)


# ---------------------------------------------------------------------------- lang_globals
_LANG_KEY = "_triton_conformance_language"


def apply_lang_globals(patch: Patch, target: TargetDevice) -> None:
    import triton.language as tl
    from triton.runtime import interpreter

    cls = interpreter.InterpretedFunction
    original_init = cls.__init__

    def __init__(self: Any, fn: Any, **kwargs: Any) -> None:
        original_init(self, fn, **kwargs)
        g = getattr(fn, "__globals__", None)
        if g is not None and not any(inspect.ismodule(v) and v in (tl, tl.core) for v in g.values()):
            patch.set_item(g, _LANG_KEY, tl)  # the module the interpreter patches for this function's builtins

    patch.set(cls, "__init__", __init__)

    # The interpreter reads a kernel's annotations as the source wrote them; "triton.language.constexpr"
    # is then not a constexpr (only "tl.constexpr" is), and the parameter arrives as a tensor.
    from triton.runtime import jit

    normalize = jit._normalize_ty

    def _normalize_ty(ty: Any) -> str:
        if isinstance(ty, str) and ty.strip().startswith("triton.language."):
            ty = "tl." + ty.strip().removeprefix("triton.language.")
        return normalize(ty)

    patch.set(jit, "_normalize_ty", _normalize_ty)
