"""Fast paths for the interpreter's type bookkeeping: the same answers, without recomputing them per operation.

The interpreter runs a kernel's Python once per program, and every ``tl``
operation goes through Triton's semantic layer, which rebuilds types as it
goes.  Profiles of the battery on the CPU (docs/performance.md) put most of an
example's time there, in a few small functions called hundreds of thousands
of times a cell:

- ``interpreter._get_np_dtype`` builds a 20-entry dict of dtypes (hashing each)
  on every call; here a scalar dtype's answer is looked up once and kept, and a
  block type asks for its element's;
- ``core._unwrap_if_constexpr`` walks four ``isinstance`` checks for the common
  leaves (ints, tensors, ``None``); here an exact-type test answers those and
  hands everything else to the original;
- ``block_type.__init__`` unwraps and validates its shape each time, and
  ``tensor.__init__`` rebuilds its shape's tuple type and element count; here
  a shape of plain ints seen before reuses what was computed for it, and the
  fresh ``constexpr``s and ``tl.tuple`` are filled in without their
  constructors (which rebuilt each ``constexpr_type``: 0.61 of a tensor's
  construction, 0.78 of a block type's).

The interpreter's wrapper of each ``tl`` builtin also stops copying its
keywords per call, its scan of a module for builtins (each launch) reads the
module's globals instead of ``inspect.getmembers``, and
``compat/fast_semantic.py`` answers the binary operations' type checks and
broadcasts.

Each answer is what the original gives for the same argument (the originals
run for anything the fast path does not recognise, so their errors are
unchanged); ``tests/cover/test_compat_fast_paths.py`` holds them side by side.
"""

from __future__ import annotations

import operator
import types
from typing import Any

from triton_conformance.compat import fast_semantic
from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice


def apply(patch: Patch, target: TargetDevice) -> None:
    import triton.language as tl
    from triton.language import core
    from triton.runtime import interpreter

    np_dtype = getattr(interpreter, "_get_np_dtype", None)
    if callable(np_dtype):
        patch.set(interpreter, "_get_np_dtype", _np_dtype_lookup(np_dtype, tl))
    unwrap = getattr(core, "_unwrap_if_constexpr", None)
    if callable(unwrap):
        patch.set(core, "_unwrap_if_constexpr", _unwrap_fast(unwrap, core))
    init = vars(core.block_type).get("__init__")
    if callable(init):
        patch.set(core.block_type, "__init__", _block_type_init(init, core))
    patch_attr = getattr(interpreter, "_patch_attr", None)
    if callable(patch_attr) and hasattr(interpreter, "interpreter_semantic"):
        patch.set(interpreter, "_patch_attr", _patch_attr_lean(interpreter))
    init = vars(core.tensor).get("__init__")
    if callable(init):
        patch.set(core.tensor, "__init__", _tensor_init(init, core))
    patch_builtin = getattr(interpreter, "_patch_builtin", None)
    if callable(patch_builtin) and callable(getattr(interpreter, "_patch_attr", None)):
        patch.set(interpreter, "_patch_builtin", _patch_builtin_lean(patch_builtin, interpreter, core))
    fast_semantic.apply(patch, interpreter, core)


def _np_dtype_lookup(original: Any, tl: Any) -> Any:
    """``_get_np_dtype``: pointers (and blocks of them) are uint64; a block is its element's dtype; a scalar
    dtype's answer is kept (dtypes hash and compare by name)."""
    pointer_type, block_type = tl.pointer_type, tl.block_type
    known: dict[Any, Any] = {}

    def _get_np_dtype(tt_dtype: Any) -> Any:
        if isinstance(tt_dtype, block_type):
            element = tt_dtype.element_ty
            if isinstance(element, (pointer_type, block_type)):
                return original(tt_dtype)
            tt_dtype = element
        elif isinstance(tt_dtype, pointer_type):
            return original(tt_dtype)
        try:
            return known[tt_dtype]
        except KeyError:
            found = known[tt_dtype] = original(tt_dtype)  # an unknown dtype raises here, as it did
            return found
        except TypeError:  # an unhashable dtype of some other kind
            return original(tt_dtype)

    return _get_np_dtype


def _unwrap_fast(original: Any, core: Any) -> Any:
    """``_unwrap_if_constexpr``: a leaf of one of these exact types is itself, an exact ``constexpr`` its value;
    the original for the rest (lists, tuples, subclasses)."""
    leaves = frozenset((int, float, bool, str, type(None), core.tensor, core.dtype, core.block_type,
                        core.pointer_type))
    constexpr = core.constexpr

    def _unwrap_if_constexpr(o: Any) -> Any:
        kind = type(o)
        if kind in leaves:
            return o
        if kind is constexpr:
            return o.value
        return original(o)

    return _unwrap_if_constexpr


def _plain_dims(shape: Any, tl_tuple: Any, constexpr: Any) -> tuple[int, ...] | None:
    """The ints of a shape given as a list or a ``tl.tuple`` of ints and exact ``constexpr`` ints, else None."""
    kind = type(shape)
    if kind is tl_tuple:
        shape = shape.values
    elif kind is not list:
        return None
    dims = []
    for d in shape:
        if type(d) is constexpr:
            d = d.value
        if type(d) is not int:
            return None
        dims.append(d)
    return tuple(dims)


def _block_type_init(original: Any, core: Any) -> Any:
    """``block_type.__init__``: a shape of ints (see :func:`_plain_dims`) that was validated before gets a
    fresh ``tl.tuple`` of the same ints, with the type, element count and text the original computed for it;
    the original runs for any other shape and for a shape's first time."""
    tl_tuple, constexpr = core.tuple, core.constexpr
    new = object.__new__
    validated: dict[tuple[int, ...], tuple[Any, int, str]] = {}

    def __init__(self: Any, element_ty: Any, shape: Any) -> None:
        key = _plain_dims(shape, tl_tuple, constexpr)
        seen = validated.get(key) if key is not None else None
        if seen is None:
            original(self, element_ty, shape)
            if key is not None:
                validated[key] = (self.shape.type, self.numel, str(self.shape))
            return
        shape_type, numel, text = seen
        self.element_ty = element_ty
        dims = new(tl_tuple)  # what tl.tuple(list(key), shape_type) sets, without its checks
        dims.values, dims.type = list(key), shape_type
        self.shape = dims
        self.numel = numel
        self.name = f'<{text}, {self.element_ty}>'

    return __init__


def _tensor_init(original: Any, core: Any) -> Any:
    """``tensor.__init__`` (of a ``tl.tensor`` itself, not a subclass): for a type whose shape's ints were seen
    before, the element count and shape the original computed, as fresh ``constexpr``s in a fresh ``tl.tuple``
    built without their constructors; each takes the ``constexpr_type`` the original made for the same int
    (the shape's tuple type lists them: they are only read)."""
    tensor, tl_tuple, constexpr = core.tensor, core.tuple, core.constexpr
    new = object.__new__
    seen: dict[tuple[int, ...], tuple[int, Any, Any]] = {}

    def __init__(self: Any, handle: Any, type: Any) -> None:  # noqa: A002 - the original's name
        key = _plain_dims(type.shape, tl_tuple, constexpr) if type.is_block() else ()
        own = key is not None and self.__class__ is tensor
        known = seen.get(key) if own else None
        if known is None:
            original(self, handle, type)
            if own:
                seen[key] = (self.numel.value, self.numel.type, self.shape.type)
            return
        numel_value, numel_type, shape_type = known
        self.handle = handle
        self.shape = ()
        self.numel = numel = new(constexpr)
        numel.value, numel.type = numel_value, numel_type
        self.type = type
        self.dtype = type.scalar
        dims = []
        for d, d_type in zip(key, shape_type.types):
            dim = new(constexpr)
            dim.value, dim.type = d, d_type
            dims.append(dim)
        shape = new(tl_tuple)
        shape.values, shape.type = dims, shape_type
        self.shape = shape

    return __init__



def _patch_builtin_lean(original: Any, interpreter: Any, core: Any) -> Any:
    """``interpreter._patch_builtin``, which every launch calls for ``tl``, ``tl.math`` and ``tl.core``: a plain
    module's builtins are its globals' in name order (what ``inspect.getmembers`` lists for one, sorted, without
    fetching each again); a class, or a module that computes its members, is scanned by the original."""
    module = types.ModuleType
    by_name = operator.itemgetter(0)

    def _patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        names = vars(pkg) if type(pkg) is module else None
        if names is None or "__dir__" in names or "__getattr__" in names:
            return original(pkg, builder, scope)
        is_builtin = core.is_builtin
        for name, member in [item for item in sorted(names.items(), key=by_name) if is_builtin(item[1])]:
            interpreter._patch_attr(pkg, name, member, builder, scope)

    return _patch_builtin


def _patch_attr_lean(interpreter: Any) -> Any:
    """``interpreter._patch_attr``: a patched ``tl`` builtin is called with the caller's keywords and the
    interpreter's semantic in place of any ``_semantic`` given, as the original's lambda does, without
    building a filtered copy of the keywords on every call (``kwargs`` is the call's own dict)."""

    def _patch_attr(obj: Any, name: str, member: Any, builder: Any, scope: Any) -> None:
        def new_member(*args: Any, **kwargs: Any) -> Any:
            kwargs["_semantic"] = interpreter.interpreter_semantic
            return member(*args, **kwargs)

        scope.set_attr(obj, name, new_member)

    return _patch_attr
