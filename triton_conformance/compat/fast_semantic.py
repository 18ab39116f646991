"""Fast paths for the interpreter's semantic layer: binary operands checked and broadcast with plain ints.

Every binary ``tl`` operation (and every ``tl.load`` with a mask) goes through
``TritonSemantic.binary_op_type_checking_impl`` and ``broadcast_impl_value``.
Profiles of the battery's kernels (docs/performance.md) put about 30% of an
interpreted kernel's time there, most of it in bookkeeping rather than numpy:
the broadcast walks both shapes through ``tl.tuple.__getitem__`` (a
``constexpr`` per index), compares ``constexpr``s, and compares the result with
``tl.tuple.__eq__`` (which normalises a fresh tuple); the type check asks
``numbers.Number`` (an ABC) of each operand and checks pointers that are not
there.  Here:

- ``broadcast_impl_value`` of two blocks of the same rank whose shapes are
  plain ints compares the ints themselves: equal shapes come back as they
  are, others are broadcast with the same builder calls, shapes and types the
  original makes; incompatible shapes, other ranks and a scalar operand go to
  the original (its errors are unchanged);
- ``binary_op_type_checking_impl`` of two ``tl.tensor``s neither of which is a
  pointer skips the pointer checks (they only act on pointers) and the
  ``Number`` tests (a tensor is none), then casts and broadcasts through the
  same methods; everything else goes to the original.

Both are set on the interpreter's own ``TritonSemantic`` instance, so the
compiler's code generator is untouched.  ``tests/cover/test_compat_fast_semantic.py``
holds them against the originals.
"""

from __future__ import annotations

import types
from typing import Any

from triton_conformance.compat._patch import Patch


def apply(patch: Patch, interpreter: Any, core: Any) -> None:
    semantic = getattr(interpreter, "interpreter_semantic", None)
    if semantic is None:
        return
    broadcast = getattr(type(semantic), "broadcast_impl_value", None)
    if callable(broadcast):
        patch.set(semantic, "broadcast_impl_value", types.MethodType(_broadcast_lean(broadcast, core), semantic))
    checking = getattr(type(semantic), "binary_op_type_checking_impl", None)
    if callable(checking):
        patch.set(semantic, "binary_op_type_checking_impl",
                  types.MethodType(_binary_checking_lean(checking, core), semantic))


def _int_dims(block: Any, block_type: Any, tl_tuple: Any) -> list[int] | None:
    """The list of ints a ``block_type``'s shape holds (its ``tl.tuple``'s own list), else None."""
    if type(block) is not block_type:
        return None
    shape = block.shape
    if type(shape) is not tl_tuple:
        return None
    dims = shape.values
    for d in dims:
        if type(d) is not int:
            return None
    return dims


def _broadcast_lean(original: Any, core: Any) -> Any:
    """``broadcast_impl_value`` for two blocks of one rank with int shapes (see the module's docstring)."""
    block_type, tl_tuple = core.block_type, core.tuple

    def broadcast_impl_value(self: Any, lhs: Any, rhs: Any) -> Any:
        lhs_ty, rhs_ty = lhs.type, rhs.type
        lhs_dims = _int_dims(lhs_ty, block_type, tl_tuple)
        rhs_dims = _int_dims(rhs_ty, block_type, tl_tuple) if lhs_dims is not None else None
        if rhs_dims is None or len(lhs_dims) != len(rhs_dims):
            return original(self, lhs, rhs)
        if lhs_dims == rhs_dims:
            return lhs, rhs
        ret_shape = []
        for left, right in zip(lhs_dims, rhs_dims):
            if left == 1:
                ret_shape.append(right)
            elif right == 1 or right == left:
                ret_shape.append(left)
            else:
                return original(self, lhs, rhs)  # raises the original's error
        if lhs_dims != ret_shape:
            ret_ty = block_type(lhs_ty.scalar, ret_shape)
            lhs = self.make_tensor(self.builder.create_broadcast(lhs.handle, ret_shape), ret_ty)
        if rhs_dims != ret_shape:
            ret_ty = block_type(rhs_ty.scalar, ret_shape)
            rhs = self.make_tensor(self.builder.create_broadcast(rhs.handle, ret_shape), ret_ty)
        return lhs, rhs

    return broadcast_impl_value


def _binary_checking_lean(original: Any, core: Any) -> Any:
    """``binary_op_type_checking_impl`` for two ``tl.tensor``s, neither a pointer (see the module's docstring)."""
    tensor = core.tensor

    def binary_op_type_checking_impl(self: Any, lhs: Any, rhs: Any, allow_lhs_ptr: bool = False,
                                     allow_rhs_ptr: bool = False, arithmetic_check: bool = True,
                                     div_or_mod: bool = False) -> Any:
        if type(lhs) is not tensor or type(rhs) is not tensor:
            return original(self, lhs, rhs, allow_lhs_ptr, allow_rhs_ptr, arithmetic_check, div_or_mod)
        lhs_sca_ty, rhs_sca_ty = lhs.dtype, rhs.dtype
        if lhs_sca_ty.is_ptr() or rhs_sca_ty.is_ptr():
            return original(self, lhs, rhs, allow_lhs_ptr, allow_rhs_ptr, arithmetic_check, div_or_mod)
        if arithmetic_check:
            ret_sca_ty = self.computation_type_impl(lhs_sca_ty, False, rhs_sca_ty, False, div_or_mod)
            lhs = self._cast_to_computation_type(lhs, ret_sca_ty)
            rhs = self._cast_to_computation_type(rhs, ret_sca_ty)
        return self.broadcast_impl_value(lhs, rhs)

    return binary_op_type_checking_impl
