"""libdevice under the interpreter.

In triton 3.9 ``triton.language.extra.libdevice`` holds stubs (``...``) that
the compiler swaps for the backend's module; the interpreter calls the stub
and gets None.  The backend functions (``triton.language.extra.cuda.libdevice``)
are builtins that dispatch on dtype to a symbol (``__nv_expf``) through
``builder.create_extern_elementwise``, which the interpreter refuses.

This shim (1) implements ``create_extern_elementwise`` with numpy by symbol
name, (2) points every stub at the CUDA builtin with the interpreter's
semantic, and (3) makes the CUDA builtins callable from interpreted kernels.
Names a module bound before the shim (``from ...libdevice import rsqrt``) are
rebound in the kernel's globals when it is launched.  The dtype dispatch,
broadcasting and result type are triton's own; only the arithmetic is numpy's,
in the argument's precision (directed roundings _rz/_ru/_rd of arithmetic are
computed round-to-nearest).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["apply", "numpy_function", "UnsupportedSymbol"]


class UnsupportedSymbol(NotImplementedError):
    """A libdevice symbol this shim has no numpy implementation for."""


def _vectorize(fn: Callable[..., float]) -> Callable[..., np.ndarray]:
    def apply(*args: np.ndarray) -> np.ndarray:
        arrays = np.broadcast_arrays(*[np.asarray(a) for a in args])
        dtype = np.result_type(*arrays)
        out = np.empty(arrays[0].shape, dtype=np.float64)
        flat = [a.astype(np.float64).ravel() for a in arrays]
        res = out.ravel()
        for i in range(res.size):
            try:
                res[i] = fn(*(float(a[i]) for a in flat))
            except (ValueError, OverflowError):
                res[i] = math.nan
        return out.astype(dtype)
    return apply


def _erf(x: np.ndarray) -> np.ndarray:
    try:
        from triton.runtime.interpreter import np_erf_fp32, np_erf_fp64  # the interpreter's own (C) erf

        return np_erf_fp32(x) if x.dtype == np.float32 else np_erf_fp64(x.astype(np.float64)).astype(x.dtype)
    except ImportError:
        return _vectorize(math.erf)(x)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + x.dtype.type(0.5)), x)


def _ilogb(x: np.ndarray) -> np.ndarray:
    _, e = np.frexp(x)
    return (e - 1).astype(np.int32)


_F = np.float64
# base name -> numpy implementation (arrays in, array out; the result is cast to the symbol's return type)
TABLE: dict[str, Callable[..., np.ndarray]] = {
    "abs": np.abs, "fabs": np.abs, "llabs": np.abs,
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "atan2": np.arctan2,
    "cbrt": np.cbrt, "rcbrt": lambda x: 1 / np.cbrt(x),
    "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc,
    "rint": np.rint, "nearbyint": np.rint, "round": _round_half_away,
    "llrint": np.rint, "llround": _round_half_away,
    "cos": np.cos, "sin": np.sin, "tan": np.tan, "cosh": np.cosh, "sinh": np.sinh, "tanh": np.tanh,
    "cospi": lambda x: np.cos(np.pi * x), "sinpi": lambda x: np.sin(np.pi * x),
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "logb": lambda x: np.floor(np.log2(np.abs(x))), "ilogb": _ilogb,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rcp": lambda x: 1 / x,
    "erf": _erf, "erfc": lambda x: 1 - _erf(x),
    "erfinv": _vectorize(lambda v: _erfinv(v)), "erfcinv": _vectorize(lambda v: _erfinv(1 - v)),
    "normcdf": lambda x: (1 + _erf(x / x.dtype.type(math.sqrt(2)))) / 2,
    "lgamma": _vectorize(math.lgamma), "tgamma": _vectorize(math.gamma),
    "saturate": lambda x: np.clip(x, 0, 1),
    "pow": np.power, "powi": np.power, "fmod": np.fmod,
    "remainder": _vectorize(math.remainder),
    "hypot": np.hypot, "rhypot": lambda x, y: 1 / np.hypot(x, y),
    "copysign": np.copysign, "nextafter": np.nextafter, "fdim": lambda x, y: np.maximum(x - y, 0),
    "fmin": np.fmin, "fmax": np.fmax,
    "ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)), "scalbn": lambda x, e: np.ldexp(x, e.astype(np.int32)),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "dividef": np.divide,
    "fdividef": np.divide,
    "fma": lambda a, b, c: (a.astype(_F) * b.astype(_F) + c.astype(_F)).astype(np.result_type(a, b, c)),
    "norm3d": lambda a, b, c: np.sqrt(a * a + b * b + c * c),
    "rnorm3d": lambda a, b, c: 1 / np.sqrt(a * a + b * b + c * c),
    "norm4d": lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d),
    "rnorm4d": lambda a, b, c, d: 1 / np.sqrt(a * a + b * b + c * c + d * d),
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "finite": np.isfinite,
    "signbit": np.signbit,
}
_ALIASES = {"isnand": "isnan", "isinfd": "isinf", "isfinited": "isfinite", "signbitd": "signbit",
            "finitef": "finite", "fdividef": "fdividef", "saturatef": "saturate"}
_ARITH = ("add", "sub", "mul", "div", "rcp", "sqrt", "rsqrt", "fma")
_INT = {"int": np.int32, "uint": np.uint32, "ll": np.int64, "ull": np.uint64}
_ROUND = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil, None: np.trunc}
_BITCASTS = {"float_as_int", "float_as_uint", "int_as_float", "uint_as_float", "double_as_longlong",
             "longlong_as_double"}


def _erfinv(y: float) -> float:
    if y <= -1:
        return -math.inf if y == -1 else math.nan
    if y >= 1:
        return math.inf if y == 1 else math.nan
    x = 0.0  # Newton on erf(x) - y, from a fair start
    a = 0.147
    ln = math.log(1 - y * y)
    t = 2 / (math.pi * a) + ln / 2
    x = math.copysign(math.sqrt(math.sqrt(t * t - ln / a) - t), y)
    for _ in range(3):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def numpy_function(symbol: str) -> Callable[..., np.ndarray] | str:
    """The numpy implementation of a libdevice symbol (``__nv_expf``), or a marker for casts/bitcasts.

    Returns a callable for arithmetic; ``"bitcast"`` or ``"convert:<mode>"`` for the
    conversion symbols. Raises :class:`UnsupportedSymbol` for the rest.
    """
    name = symbol
    for prefix in ("__nv_",):
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name in _BITCASTS:
        return "bitcast"
    mode = None
    m = re.fullmatch(r"(.+)_(rn|rz|ru|rd)", name)
    if m:
        name, mode = m.groups()
    if re.fullmatch(r"(float|double|int|uint|ll|ull)2(float|double|int|uint|ll|ull)", name):
        return f"convert:{mode or 'rn'}"
    if name.startswith("fast_"):
        name = name[len("fast_"):]
    name = _ALIASES.get(name, name)
    if name in TABLE:
        return TABLE[name]
    for candidate in (name[:-1] if name.endswith("f") else None,           # expf -> exp, fmaf -> fma
                      name[1:] if name[:1] in ("f", "d") else None):        # fadd / dsqrt -> add / sqrt
        if candidate and (candidate in TABLE) and (candidate in _ARITH or name.endswith("f")):
            return TABLE[candidate]
        if candidate and candidate.endswith("f") and candidate[:-1] in _ARITH:
            return TABLE[candidate[:-1]]
    raise UnsupportedSymbol(f"libdevice symbol {symbol!r} has no interpreter implementation (compat 'libdevice')")


def _extern_elementwise(self: Any, lib_name: str, lib_path: str, symbol: str, arg_list: list, ret_type: Any,
                        is_pure: bool) -> Any:
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    impl = numpy_function(symbol)
    args = [a.data for a in arg_list]
    out_dtype = _get_np_dtype(ret_type)
    with np.errstate(all="ignore"):
        if impl == "bitcast":
            out = args[0].view(out_dtype)
        elif isinstance(impl, str):
            x = args[0]
            if np.issubdtype(out_dtype, np.integer):
                x = _ROUND[impl.split(":")[1]](x)
                out = np.nan_to_num(x, nan=0).astype(out_dtype)
            else:
                out = x.astype(out_dtype)
        else:
            out = np.asarray(impl(*args))
            if out.dtype != np.bool_:
                out = out.astype(out_dtype)
    scalar = ret_type.scalar if hasattr(ret_type, "scalar") else ret_type
    return TensorHandle(np.ascontiguousarray(out), scalar)


def _with_semantic(builtin: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, _semantic: Any = None, **kwargs: Any) -> Any:
        from triton.runtime.interpreter import interpreter_semantic

        return builtin(*args, _semantic=interpreter_semantic, **kwargs)

    call.__name__ = getattr(builtin, "__name__", "libdevice_fn")
    call.__qualname__ = call.__name__
    call.__doc__ = getattr(builtin, "__doc__", None)
    call._compat_libdevice = builtin  # type: ignore[attr-defined]
    return call


def apply(patch: Patch, target: TargetDevice) -> None:
    import triton.language.extra.cuda.libdevice as cuda_ld
    import triton.language.extra.libdevice as stub_ld
    from triton.runtime import interpreter

    patch.set(interpreter.InterpreterBuilder, "create_extern_elementwise", _extern_elementwise)

    replacements: dict[int, Callable[..., Any]] = {}
    for name in dir(cuda_ld):
        builtin = getattr(cuda_ld, name)
        if not getattr(builtin, "__triton_builtin__", False):
            continue
        wrapper = _with_semantic(builtin)
        replacements[id(builtin)] = wrapper
        patch.set(cuda_ld, name, wrapper)
        stub = getattr(stub_ld, name, None)
        if callable(stub):
            replacements[id(stub)] = wrapper
            patch.set(stub_ld, name, wrapper)

    # Names bound before the shim (``from triton.language.extra.libdevice import rsqrt``): rebind them in
    # each launched kernel's (and device function's) globals.
    original_patch_lang = interpreter._patch_lang
    seen: set[int] = set()

    def _patch_lang(fn: Any) -> Any:
        g = getattr(fn, "__globals__", None)
        if g is not None and id(g) not in seen:
            seen.add(id(g))
            for key, value in list(g.items()):
                new = replacements.get(id(value))
                if new is not None and value is not new:
                    patch.set_item(g, key, new)
        return original_patch_lang(fn)

    patch.set(interpreter, "_patch_lang", _patch_lang)
    patch.on_restore(seen.clear)
