"""Where the interpreter does what compiled code does not: Python values for tensors, and dead checks.

- ``float_scalars``: a Python float argument is specialized by the compiler to an fp32
  scalar; the interpreter passes the bare float, so ``eps.to(tl.float32)`` or
  ``scale.dtype`` fail ("'float' object has no attribute 'to'", liger's norms).
- ``loop_vars``: in ``for i in range(n)`` (or ``tl.range``) the compiled loop variable is an
  int32 tensor; the interpreter's is a Python int, so ``i.to(tl.int64)`` fails (fla's chunk
  kernels).  ``tl.static_range`` loops keep their Python ints, as the compiler's are constexprs.
- ``overflow_checks``: every integer ``+``, ``-`` and ``*`` of a kernel builds an int64 overflow
  check for a ``device_assert`` that is only emitted with ``debug=True``; compiled code drops the
  unused check, the interpreter computed it (about half of an index-heavy kernel's interpreted
  work).  Without ``debug`` it is not built; the kernel's values are the same.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["apply_float_scalars", "apply_loop_vars", "apply_overflow_checks"]


def apply_float_scalars(patch: Patch, target: TargetDevice) -> None:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._implicit_cvt

    def _implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            with np.errstate(over="ignore"):
                handle = interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return original(arg)

    patch.set(interpreter, "_implicit_cvt", _implicit_cvt)


def _is_dynamic_range(node: ast.expr) -> bool:
    """``range(...)``, ``tl.range(...)``, ``triton.language.range(...)``: not ``static_range``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "range"
    return isinstance(func, ast.Attribute) and func.attr == "range"


def apply_loop_vars(patch: Patch, target: TargetDevice) -> None:
    from triton.runtime import interpreter

    base = interpreter.FunctionRewriter.ast_transformer.__class__

    class LoopVarsAsTensors(base):  # type: ignore[misc, valid-type]
        def visit_For(self, node: ast.For) -> ast.AST:
            node = self.generic_visit(node)
            if isinstance(node.target, ast.Name) and _is_dynamic_range(node.iter):
                name = node.target.id
                convert = ast.Assign(
                    targets=[ast.Name(id=name, ctx=ast.Store())],
                    value=ast.Call(func=ast.Attribute(value=ast.Name(id="interpreter_semantic", ctx=ast.Load()),
                                                      attr="to_tensor", ctx=ast.Load()),
                                   args=[ast.Name(id=name, ctx=ast.Load()), ast.Constant(value=False)],
                                   keywords=[]))
                ast.copy_location(convert, node)
                ast.fix_missing_locations(convert)
                node.body.insert(0, convert)
            return node

    patch.set(interpreter.FunctionRewriter, "ast_transformer", LoopVarsAsTensors())
    # Kernels rewritten before (or with) the shim are cached by function: rewrite them again.
    cache = interpreter.InterpretedFunction.rewritten_fn
    cache.clear()
    patch.on_restore(cache.clear)


def apply_overflow_checks(patch: Patch, target: TargetDevice) -> None:
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    options = getattr(builder, "options", None)
    if options is None or not getattr(options, "sanitize_overflow", False) or getattr(options, "debug", False):
        return  # a triton without the option, or one asked to debug: its checks are raised there
    patch.set(builder, "options", dataclasses.replace(options, sanitize_overflow=False))
