"""bf16 under the interpreter: decode, compute in fp32, round to nearest even.

triton 3.9's interpreter keeps bf16 values as their uint16 bit patterns and
runs arithmetic, comparisons, ``tl.dot``, reductions and scans on those
integers (1 + 0.5 gives about 8.5e37; upstream #4972, #11584, #11604), and
its fp32 -> bf16 cast truncates.  This shim keeps the storage (loads, stores,
``where``, reshapes and bitcasts move bits, which is right) and wraps every
builder operation that computes: bf16 operands are decoded to fp32, the
operation runs in fp32 and a bf16 result is rounded to nearest even, once per
operation, as the GPU does (sm_90 has bf16 add/mul/fma; older parts promote
to fp32 and round each result).  Reductions of bf16 (``tl.sum`` keeps bf16)
add pairwise with a rounding at each level, like the GPU's tree; scans
accumulate in order with a rounding at each step; min/max are exact.
Known limits: fp64 -> bf16 goes through fp32 (double rounding), and the
directed rounding of ``fp_downcast_rounding="rtz"`` is honoured, others are
round-to-nearest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["apply", "decode", "encode"]


def decode(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> their float32 values (exact)."""
    bits = np.asarray(bits)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def encode(values: np.ndarray, *, toward_zero: bool = False) -> np.ndarray:
    """Float values -> bf16 bit patterns (uint16), rounded to nearest even (or toward zero); NaN stays NaN."""
    f = np.array(values, dtype=np.float32)  # a contiguous copy of the same shape (0-d stays 0-d)
    b = f.view(np.uint32)
    with np.errstate(over="ignore"):
        if toward_zero:
            out = (b >> np.uint32(16)).astype(np.uint16)
        else:
            out = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out = np.where(nan, ((b >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16), out)
    return out


def _round(values: np.ndarray) -> np.ndarray:
    """Values rounded to bf16, kept as float32."""
    return decode(encode(values))


def apply(patch: Patch, target: TargetDevice) -> None:
    import triton.language as tl
    from triton._C.libtriton import ir as _ir
    from triton.runtime import interpreter as interp

    TensorHandle = interp.TensorHandle
    B = interp.InterpreterBuilder
    BF16 = tl.bfloat16

    plain_dtype, bf16_name = type(BF16), BF16.name

    def is_bf16(t: Any) -> bool:
        """``t == tl.bfloat16``: for a plain dtype its name, which is what its ``__eq__`` compares (asked of
        every handle an operation reads)."""
        return t.name == bf16_name if type(t) is plain_dtype else t == BF16

    def is_bf(h: Any) -> bool:
        return isinstance(h, TensorHandle) and is_bf16(h.dtype.scalar)

    def val(h: Any) -> np.ndarray:
        return decode(h.data) if is_bf(h) else h.data

    def bf_handle(values: np.ndarray, *, toward_zero: bool = False) -> Any:
        return TensorHandle(encode(values, toward_zero=toward_zero), BF16)

    orig = {name: getattr(B, name) for name in (
        "binary_op", "ternary_op", "unary_op", "cast_impl", "create_fp_to_fp", "create_fma", "create_erf",
        "create_rsqrt", "create_dot", "create_atomic_rmw")}

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if not (is_bf(lhs) or is_bf(rhs)):
            return orig["binary_op"](self, lhs, rhs, op)
        with np.errstate(all="ignore"):
            out = np.asarray(op(val(lhs), val(rhs)))
        if out.dtype == np.bool_:
            return TensorHandle(out, lhs.dtype.scalar)
        return bf_handle(out)

    def ternary_op(self: Any, lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        if op is np.where or not (is_bf(lhs) or is_bf(rhs) or is_bf(other)):
            return orig["ternary_op"](self, lhs, rhs, other, op)  # select moves bits
        with np.errstate(all="ignore"):
            out = np.asarray(op(val(lhs), val(rhs), val(other)))
        return bf_handle(out) if is_bf(other) else TensorHandle(out.astype(other.data.dtype), other.dtype.scalar)

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if not is_bf(arg):
            return orig["unary_op"](self, arg, op)
        with np.errstate(all="ignore"):
            return bf_handle(op(decode(arg.data)))

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if not is_bf16(s) and not is_bf16(d):
            return orig["cast_impl"](self, src, dst_type)
        if s == BF16 and d == BF16:
            return TensorHandle(src.data.copy(), BF16)
        with np.errstate(all="ignore"):
            if s == BF16:
                f = decode(src.data)
                if d == tl.int1:
                    return TensorHandle(f != 0, d)
                return TensorHandle(f.astype(interp._get_np_dtype(d)), d)
            if s == tl.int1:
                return bf_handle(src.data.astype(np.float32))
            return bf_handle(src.data.astype(np.float32))

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        plain = (tl.float16, tl.float32, tl.float64)
        if s == BF16 and d in plain:
            return TensorHandle(decode(src.data).astype(interp._get_np_dtype(d)), d)
        if d == BF16 and s in plain:
            return bf_handle(src.data.astype(np.float32), toward_zero=rounding_mode == _ir.ROUNDING_MODE.RTZ)
        if s == BF16:  # bf16 -> fp8: through fp32
            return orig["create_fp_to_fp"](self, TensorHandle(decode(src.data), tl.float32), dst_type, rounding_mode)
        return orig["create_fp_to_fp"](self, src, dst_type, rounding_mode)

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if not is_bf(z):
            return orig["create_fma"](self, x, y, z)
        a, b, c = np.broadcast_arrays(val(x).astype(np.float64), val(y).astype(np.float64), val(z).astype(np.float64))
        return bf_handle(a * b + c)

    def create_erf(self: Any, arg: Any) -> Any:
        if not is_bf(arg):
            return orig["create_erf"](self, arg)
        return bf_handle(interp.np_erf_fp32(decode(arg.data)))

    def create_rsqrt(self: Any, arg: Any) -> Any:
        if not is_bf(arg):
            return orig["create_rsqrt"](self, arg)
        with np.errstate(all="ignore"):
            return bf_handle(1 / np.sqrt(decode(arg.data)))

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        if not (is_bf(a) or is_bf(b) or is_bf(d)):
            return orig["create_dot"](self, a, b, d, input_precision, max_num_imprecise_acc)
        out = np.matmul(val(a).astype(np.float32), val(b).astype(np.float32), dtype=np.float32)
        out = out + val(d).astype(np.float32)
        return bf_handle(out) if is_bf(d) else TensorHandle(out.astype(d.data.dtype), d.dtype.scalar)

    def create_atomic_rmw(self: Any, rmw_op: Any, ptr: Any, value: Any, mask: Any, sem: Any, scope: Any) -> Any:
        if not (is_bf(value) and rmw_op in (_ir.ATOMIC_OP.FADD, _ir.ATOMIC_OP.MAX, _ir.ATOMIC_OP.MIN)):
            return orig["create_atomic_rmw"](self, rmw_op, ptr, value, mask, sem, scope)
        # Programs run one at a time: a load, the operation and a masked store are atomic here.
        old = self.create_masked_load(ptr, mask, None, None, True)
        op = {_ir.ATOMIC_OP.FADD: np.add, _ir.ATOMIC_OP.MAX: np.maximum, _ir.ATOMIC_OP.MIN: np.minimum}[rmw_op]
        new = bf_handle(op(decode(old.data), decode(np.broadcast_to(value.data, old.data.shape))))
        self.create_masked_store(ptr, new, mask, None)
        return old

    for name, fn in (("binary_op", binary_op), ("ternary_op", ternary_op), ("unary_op", unary_op),
                     ("cast_impl", cast_impl), ("create_fp_to_fp", create_fp_to_fp), ("create_fma", create_fma),
                     ("create_erf", create_erf), ("create_rsqrt", create_rsqrt), ("create_dot", create_dot),
                     ("create_atomic_rmw", create_atomic_rmw)):
        patch.set(B, name, fn)
    # The lambdas bound at class creation (create_fp_trunc = lambda self, ...: self.cast_impl(...)) look
    # cast_impl up on self at call time, so they follow; nothing else to rebind.

    _patch_reductions(patch, tl, interp, TensorHandle, BF16)
    _refresh_probe()
    patch.on_restore(_refresh_probe)


def _tree_sum(f: np.ndarray, axis: int | None, keep_dims: bool) -> np.ndarray:
    x = f.reshape(-1) if axis is None else f
    ax = 0 if axis is None else axis
    x = np.moveaxis(x, ax, -1)
    if x.shape[-1] == 0:
        res = np.zeros(x.shape[:-1], dtype=np.float32)
    else:
        while x.shape[-1] > 1:
            if x.shape[-1] % 2:
                x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), dtype=np.float32)], axis=-1)
            with np.errstate(all="ignore"):
                x = _round(x[..., 0::2] + x[..., 1::2])
        res = x[..., 0]
    if keep_dims:
        res = np.expand_dims(res, ax) if axis is not None else res.reshape((1,) * f.ndim)
    return res


def _sequential(f: np.ndarray, axis: int, op: Any) -> np.ndarray:
    x = np.moveaxis(f, axis, 0)
    out = np.empty_like(x)
    if x.shape[0]:
        acc = x[0]
        out[0] = acc
        with np.errstate(all="ignore"):
            for i in range(1, x.shape[0]):
                acc = _round(op(acc, x[i]))
                out[i] = acc
    return np.moveaxis(out, 0, axis)


def _patch_reductions(patch: Patch, tl: Any, interp: Any, TensorHandle: Any, BF16: Any) -> None:
    R, S = interp.ReduceOps, interp.ScanOps
    orig_sum, orig_min_max = R.sum, R.min_max
    orig_cumsum, orig_cumprod = S.cumsum, S.cumprod

    def sum_(self: Any, input: Any) -> Any:
        if input.dtype.scalar != BF16:
            return orig_sum(self, input)
        res = _tree_sum(decode(input.handle.data), self.axis, self.keep_dims)
        return self.to_tensor(encode(res) if np.ndim(res) else encode(res).reshape(()), input.dtype)

    def min_max(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        x = input[0] if isinstance(input, tuple) else input
        if x.dtype.scalar != BF16:
            return orig_min_max(self, input, val_reduce_op, idx_reduce_op)
        f = decode(x.handle.data)
        value = index = None
        if val_reduce_op:
            value = self.to_tensor(encode(val_reduce_op(f, axis=self.axis, keepdims=self.keep_dims)), x.dtype)
        if idx_reduce_op:
            index = self.to_tensor(idx_reduce_op(f, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        if value is not None and index is not None:
            return value, index
        return value if value is not None else index

    def cumsum(self: Any, input: Any) -> Any:
        if input.dtype.scalar != BF16:
            return orig_cumsum(self, input)
        return [self.to_tensor(encode(_sequential(decode(input.handle.data), self.axis, np.add)), dtype=input.dtype)]

    def cumprod(self: Any, input: Any) -> Any:
        if input.dtype.scalar != BF16:
            return orig_cumprod(self, input)
        return [self.to_tensor(encode(_sequential(decode(input.handle.data), self.axis, np.multiply)),
                               dtype=input.dtype)]

    patch.set(R, "sum", sum_)
    patch.set(R, "min_max", min_max)
    patch.set(S, "cumsum", cumsum)
    patch.set(S, "cumprod", cumprod)


def _refresh_probe() -> None:
    """The engine caches its bf16 probe; forget the answer it gave before this shim changed it."""
    import sys

    backend = sys.modules.get("triton_conformance.conformance.backend")
    probe = getattr(backend, "probe_interpreter_bf16", None)
    if probe is not None and hasattr(probe, "cache_clear"):
        probe.cache_clear()
