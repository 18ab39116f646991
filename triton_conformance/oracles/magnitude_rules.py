"""How each operation forms the magnitude of its result from those of its arguments.

The rules of :mod:`.magnitude`'s running error analysis.  Each rule takes the
op, its arguments twice (``values``: the float64 values; ``mags``: the same
structure with each float tensor replaced by its magnitude, 0 for a constant)
and the op's result, and returns the result's magnitude (same structure).

Magnitudes are counted in units of ``unit``, the unit roundoff the kernel computes in
(the judge's accumulation dtype): an op whose result the oracle itself holds in a
lower precision (a cast to bf16, a sum of bf16 values) counts its rounding at that
precision, ``u_low / unit`` times its size, and a product adds the second-order
term ``unit * m_a * m_b`` (the product of its factors' errors), which is all that is
left where the float64 value of a factor is exactly zero.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from triton_conformance.oracles.magnitude_linalg import stable_magnitude
from triton_conformance.oracles.magnitude_selections import RULES as _PICKING
from triton_conformance.oracles.magnitude_selections import apply as _picked
from triton_conformance.oracles.magnitude_steps import step_height

__all__ = ["LIBRARY_ULPS", "apply", "is_float", "op_name", "rule_of", "unit_roundoff"]

aten = torch.ops.aten

# Ops that move or copy values (each output element is an input element, or 0): the same op on the
# magnitudes moves them the same way.
_MOVES = {
    "view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "movedim", "slice", "select",
    "unsqueeze", "squeeze", "narrow", "diagonal", "unfold", "split", "split_with_sizes", "unbind", "alias", "detach",
    "lift_fresh", "lift_fresh_copy", "clone", "contiguous", "_to_copy", "copy", "expand_copy", "permute_copy",
    "view_copy", "transpose_copy", "t_copy", "unsqueeze_copy", "squeeze_copy", "slice_copy", "select_copy",
    "alias_copy", "split_copy", "index", "_unsafe_index", "index_select", "gather", "take_along_dim", "cat", "stack",
    "flip", "roll", "repeat", "repeat_interleave", "constant_pad_nd", "tril", "triu", "masked_fill",
    "masked_scatter", "index_put", "index_copy", "scatter", "slice_scatter", "select_scatter", "diagonal_scatter",
    "fill", "zero", "pixel_shuffle", "masked_select", "lu_unpack", "as_strided_scatter",
}
# Views by size: a magnitude need not have its value's strides (the value may be a view where the
# magnitude was computed afresh), so it is reshaped where the value was viewed.
_VIEWS_BY_SIZE = {"view", "_unsafe_view", "view_copy"}
# Sums: each output adds several terms, rounding as it goes.
_SUMS = {"sum", "mean", "nansum", "cumsum", "scatter_add", "index_add"}
# Sums over windows (a pooling's average, the gradient a max pooling routes back to the input): each output
# adds at most the terms of the windows that cover it.
_WINDOW_SUMS = {"avg_pool2d", "avg_pool3d", "avg_pool2d_backward", "avg_pool3d_backward",
                "adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward"}
# Constants made from a tracked tensor's shape: exact.
_CONSTANTS = {"zeros_like", "ones_like", "full_like", "empty_like", "new_zeros", "new_ones", "new_full",
              "new_empty", "new_empty_strided", "empty_strided", "rand_like", "randn_like", "randint_like",
              "scalar_tensor", "bernoulli"}
# Pointwise ops whose textbook formula cancels inside: decomposed (gelu's 1 + erf(x / sqrt 2) at x = -3 loses
# what the result keeps), not judged by their derivative alone.
_COMPOUND = {"gelu", "gelu_backward", "silu", "silu_backward", "mish", "mish_backward", "softplus",
             "softplus_backward", "elu", "elu_backward", "hardswish", "hardswish_backward",
             "log_sigmoid_forward", "log_sigmoid_backward"}
# Pointwise ops that round their exact result once (half an ulp).  Any other pointwise op (a division, a
# square root, exp, erf, tanh, ...) may be off by a few ulps: GPUs divide and take roots approximately
# by default, and vector math libraries promise 1 to 4 ulps (torch's own fp32 gelu on the CPU is off by
# 11 ulps of erf near x = -3).  Its own rounding counts LIBRARY_ULPS times.
_EXACTLY_ROUNDED = {"add", "sub", "rsub", "mul", "neg", "abs", "where", "clamp", "clamp_min", "clamp_max",
                    "maximum", "minimum", "fmax", "fmin", "masked_fill", "relu", "threshold", "hardtanh",
                    "sign", "sgn", "floor", "ceil", "round", "trunc", "copysign", "fill", "lerp"}
LIBRARY_ULPS = 4.0
# Pointwise ops affine in every float argument: no second-order term (their second difference is 0).
_AFFINE = {"add", "sub", "rsub", "neg", "where", "masked_fill", "fill"}
_BILINEAR = {"mm", "bmm", "mv", "dot", "vdot", "addmm", "baddbmm", "addmv", "convolution"}


def is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_floating_point


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the machine epsilon of a float dtype: the largest relative error of rounding to it."""
    return torch.finfo(dtype).eps / 2


def _rounds_at(out: torch.Tensor, unit: float) -> float:
    """How many ``unit``s an op's own rounding counts: 1, or more where its result is held in a
    precision coarser than ``unit`` (an oracle that computes in bf16 says that the kernel does)."""
    return max(unit_roundoff(out.dtype), unit) / unit


def _wide(x: Any) -> Any:
    """A float tensor in float64 (magnitudes, and the derivatives that move them, are never held in a
    narrow dtype: fp16 would overflow at 65504), anything else as it is."""
    return x.to(torch.float64) if is_float(x) and x.dtype != torch.float64 else x


def _name(func) -> str:
    """``add`` for ``aten.add.Tensor`` and for ``aten.add_.Tensor`` (in place: the same rule)."""
    base = func.__name__.split(".")[0]
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


op_name = _name


def rule_of(func) -> str | None:
    """The rule for ``func``, or None (decompose it, or give up)."""
    base = _name(func)
    if base in _MOVES:  # before the pointwise tag: a copy (clone, _to_copy) is tagged pointwise too
        return "move"
    if base in _COMPOUND:
        return None
    if torch.Tag.pointwise in func.tags:
        return "pointwise"
    if base == "as_strided":
        return "strided"
    for rule, names in (("sum", _SUMS | _WINDOW_SUMS), ("constant", _CONSTANTS), ("bilinear", _BILINEAR),
                        *_PICKING.items()):
        if base in names:
            return rule
    return None


def apply(rule: str, func, values: tuple, vkwargs: dict, mags: tuple, mkwargs: dict, out: Any,
          unit: float) -> Any:
    """The magnitude of ``out = func(*values, **vkwargs)`` under ``rule``, in units of ``unit``."""
    if rule == "pointwise":
        return _pointwise(func, values, vkwargs, mags, mkwargs, out, unit)
    if rule == "move":
        return _cast(func, values, out, _moved(func, mags, mkwargs), unit)
    if rule == "sum":
        return _summed(func, values, vkwargs, mags, mkwargs, out, unit)
    if rule == "constant":
        return tree_map(lambda o: torch.zeros_like(o) if is_float(o) else o, out)
    if rule == "stable":
        return stable_magnitude(func, values, vkwargs, mags, mkwargs, out, unit)
    if rule in _PICKING or rule == "strided":
        return _picked(rule, _name(func), values, vkwargs, _wide(mags[0]), out)
    return _bilinear(func, values, vkwargs, mags, out, unit)


# -- helpers -----------------------------------------------------------------------


def _scalars_zeroed(func, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with every Scalar-typed argument (a fill value, a padding value) set to 0:
    a constant carries no rounding."""
    schema = func._schema.arguments
    names = [a.name for a in schema]
    scalar_args = {a.name for a in schema if isinstance(a.type, torch.NumberType)}
    return (tuple(0 if i < len(names) and names[i] in scalar_args else a for i, a in enumerate(args)),
            {k: (0 if k in scalar_args else v) for k, v in kwargs.items()})


def _moved(func, mags: tuple, mkwargs: dict) -> Any:
    """``func`` applied to the magnitudes instead of the values."""
    a, k = _scalars_zeroed(func, mags, mkwargs)
    if "dtype" in k and k["dtype"] is not None and k["dtype"].is_floating_point:
        k = {**k, "dtype": torch.float64}  # a cast moves the magnitude; it stays in float64 (_cast rounds)
    if _name(func) in _VIEWS_BY_SIZE and not func._schema.is_mutable:
        return a[0].reshape(a[1] if len(a) > 1 else k["size"])
    return func(*a, **k)


def finite_abs(x: torch.Tensor) -> torch.Tensor:
    """``|x|``, 0 where x is inf or NaN (those are compared exactly, and carry no rounding)."""
    return torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x))


def _abs(tree: Any) -> Any:
    return tree_map(lambda o: finite_abs(o) if is_float(o) else o, tree)


def _plus(a: Any, b: Any) -> Any:
    if isinstance(a, (tuple, list)):
        return type(a)(_plus(x, y) for x, y in zip(a, b))
    return a + b if is_float(a) else a


# -- the rules -----------------------------------------------------------------------


def _cast(func, values, out, moved, unit):
    """A move that converts to a coarser float dtype rounds: ``|out| * u_out / unit`` added
    (``x.to(torch.bfloat16)``, ``.half()`` in an oracle say that the kernel rounds there)."""
    source = values[0] if values else None
    if not (is_float(source) and is_float(out) and is_float(moved)):
        return moved
    u_out, u_in = unit_roundoff(out.dtype), unit_roundoff(source.dtype)
    if u_out <= u_in:
        return moved
    return moved + (u_out / unit) * finite_abs(_wide(out))


def _summed(func, values, vkwargs, mags, mkwargs, out, unit):
    """The terms' magnitudes summed, plus ``sqrt(n) * sum |terms|``: the partial sums' roundings
    (each at most the sum of the terms' sizes; their errors grow as ``sqrt(n)`` over ``n`` steps,
    Higham and Mary's probabilistic bound)."""
    name = _name(func)
    if name == "cumsum":
        dim = values[1] if len(values) > 1 else vkwargs["dim"]
        n = values[0].shape[dim] if values[0].dim() else 1
    elif name in ("scatter_add", "index_add"):
        n = max(values[-1].numel() // max(out.numel(), 1), 1) + 1
    elif name in _WINDOW_SUMS:
        n = _window_terms(name, values)
    else:
        n = max(values[0].numel() // max(out.numel(), 1), 1)
    terms = _moved(func, tree_map(_wide, _abs(values)), vkwargs)
    return _moved(func, mags, mkwargs) + math.sqrt(n) * _rounds_at(out, unit) * terms


def _window_terms(name: str, values: tuple) -> int:
    """How many terms one output of a window sum adds: an average pooling's window (its kernel's size);
    for a max pooling's backward, the windows that may pick one input (the outputs per input, rounded
    up, times 2 a dim for windows that overlap)."""
    if name.startswith("adaptive_max_pool"):
        spatial = 2 if "2d" in name else 3
        per_input = -(-values[0].numel() // max(values[1].numel(), 1))
        return max(per_input, 1) * 2**spatial
    kernel = values[2] if name.endswith("_backward") else values[1]
    kernel = [kernel] if isinstance(kernel, int) else list(kernel)
    spatial = 2 if "2d" in name else 3
    if len(kernel) == 1:
        kernel = kernel * spatial
    return max(math.prod(kernel), 1)


_JVP_THREAD: list = []


def _jvp(fn: Callable[[torch.Tensor], Any], primal: torch.Tensor, tangent: torch.Tensor) -> Any:
    """``fn``'s forward-mode derivative at ``primal`` along ``tangent``, computed on a thread of its own:
    inside ``__torch_dispatch__`` the autograd keys are excluded from this thread's dispatch."""
    if not _JVP_THREAD:
        from concurrent.futures import ThreadPoolExecutor

        quietly_import_decompositions()
        _JVP_THREAD.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="magnitude-jvp"))
    return _JVP_THREAD[0].submit(torch.func.jvp, fn, (primal,), (tangent,)).result()[1]


def _pointwise(func, values, vkwargs, mags, mkwargs, out, unit):
    """``sum_k |df/da_k| * m_k + r * |f|`` (``r`` the op's own rounding: :func:`_rounds_at`, times
    ``LIBRARY_ULPS`` for an op not rounded exactly), by forward-mode AD one argument at a time: each
    Jacobian is diagonal, so the absolute value of its product with ``m_k >= 0`` is exact.  Plus the
    second-order term (:func:`_second_order`).  Derivatives are taken in float64 whatever dtype the
    oracle holds the values in."""
    vflat, spec = tree_flatten((values, vkwargs))
    vflat = [_wide(v) for v in vflat]
    mflat, _ = tree_flatten((mags, mkwargs))
    own = (1.0 if _name(func) in _EXACTLY_ROUNDED else LIBRARY_ULPS) * _rounds_at(tree_flatten(out)[0][0], unit)
    total = tree_map(lambda t: own * _wide(t) if is_float(t) else t, _abs(out))

    def at(items):
        a, k = tree_unflatten(list(items), spec)
        if func._schema.is_mutable:  # an in-place op: the same op on a copy
            a = (a[0].clone(),) + tuple(a[1:])
        return func(*a, **k)

    moving = [i for i, (v, m) in enumerate(zip(vflat, mflat)) if is_float(v) and is_float(m) and bool(m.any())]
    for i in moving:
        v, m = vflat[i], mflat[i].to(torch.float64)

        def one(primal, i=i):
            return at(vflat[:i] + [primal] + vflat[i + 1:])

        try:
            tangent = _closed_tangent(func, vflat, i, m, out)
            if tangent is None:
                tangent = _jvp(one, v.clone(), m)
        except (RuntimeError, NotImplementedError):  # no forward-mode formula: central differences
            step = 2.0**-20 * v.abs().clamp_min(2.0**-20)  # small against the value: no pole crossed
            tangent = tree_map(lambda hi, lo, step=step, m=m: (hi - lo) / (2 * step) * m if is_float(hi) else hi,
                               one(v + step), one(v - step))
        # 0 * inf (a derivative that is infinite where no term reaches) is 0, not NaN.
        total = _plus(total, tree_map(lambda t: torch.nan_to_num(t.abs(), nan=0.0) if is_float(t) else t, tangent))
    if moving and _name(func) not in _AFFINE:
        second = _product_second_order(func, vflat, mflat, unit)
        total = _plus(total, _second_order(at, vflat, mflat, moving, unit, out) if second is None else second)
    step = step_height(_name(func), vflat, mflat, vkwargs, unit, LIBRARY_ULPS)
    return total if step is None else _plus(total, step)


# The arithmetic most autograd formulas are made of, whose derivatives are closed forms: taken directly,
# they cost a multiplication where forward-mode AD costs about 0.3 ms a call (most of the pass's time).
_CLOSED = {("add", "Tensor"), ("add", "Scalar"), ("sub", "Tensor"), ("sub", "Scalar"), ("mul", "Tensor"),
           ("mul", "Scalar"), ("div", "Tensor"), ("div", "Scalar"), ("neg", "default")}


def _closed_tangent(func, vflat, i, m, out):
    """The derivative of ``func`` along argument ``i`` times ``m``, shaped as ``out``, for an op of
    :data:`_CLOSED` (None for any other: forward-mode AD takes it)."""
    name = _name(func)
    if (name, func._overloadname) not in _CLOSED:
        return None
    if name == "neg":
        tangent = -m
    elif name in ("add", "sub"):
        alpha = vflat[2] if len(vflat) > 2 else 1
        tangent = m if i == 0 else (alpha if name == "add" else -alpha) * m
    elif name == "mul":
        tangent = vflat[1 - i] * m
    elif i == 0:  # a / b along a
        tangent = m / vflat[1]
    else:  # a / b along b: -a / b^2
        tangent = -(vflat[0] / vflat[1]) / vflat[1] * m
    return tangent.to(torch.float64).broadcast_to(tree_flatten(out)[0][0].shape)


def _product_second_order(func, vflat, mflat, unit):
    """A product's second-order term in closed form, ``unit * m_a * m_b`` (what :func:`_second_order`'s
    second difference is for ``a * b``), where both factors are float tensors; None for any other op."""
    if (_name(func), func._overloadname) != ("mul", "Tensor") or not all(is_float(m) for m in mflat[:2]):
        return None
    s = unit * mflat[0].to(torch.float64) * mflat[1].to(torch.float64)
    return torch.where(torch.isfinite(s), s, torch.zeros_like(s))


def _second_order(at, vflat, mflat, moving, unit, out):
    """What the first order misses, in units of ``unit``: half the symmetric second difference of the
    op with every argument moved by its own error ``unit * m`` (``h_a * h_b`` for a product, ``h^2`` for a
    square).  It is negligible wherever the first order is not zero, and all there is where it is: the
    square of ``x - mean`` in the variance of a constant row, 0 in float64, ``(u * m)^2`` in a kernel.
    Where a moved argument leaves the op's domain (a root of a negative) it adds nothing."""
    def moved(sign):
        items = list(vflat)
        for i in moving:
            items[i] = vflat[i] + sign * unit * mflat[i].to(torch.float64)
        return at(items)

    def term(hi, lo, mid):
        if not is_float(hi):
            return mid
        s = (hi + lo - 2 * _wide(mid)).abs() / (2 * unit)
        return torch.where(torch.isfinite(s), s, torch.zeros_like(s))

    # The middle point in float64 too: a result the oracle holds in bf16 must not add its own rounding again.
    mid = out if all(o.dtype == torch.float64 for o in tree_flatten(out)[0] if is_float(o)) else at(vflat)
    return tree_map(term, moved(1.0), moved(-1.0), mid)


def _bilinear(func, values, vkwargs, mags, out, unit):
    """``m_A @ |B| + |A| @ m_B + r * sqrt(K) * |A| @ |B| + unit * m_A @ m_B`` for a product contracting
    K terms (the componentwise bound of a dot product, its partial sums growing as a sum's, ``r`` as
    :func:`_rounds_at`; the last term the products of the factors' errors), and ``|beta| * m_C`` for
    the ``add...`` forms.  In float64, whatever dtype the oracle holds the factors in."""
    name = _name(func)
    scaled = name in ("addmm", "baddbmm", "addmv")
    v, m = [_wide(x) for x in values], [_wide(x) for x in mags]
    if scaled:
        beta, alpha = abs(vkwargs.get("beta", 1)), abs(vkwargs.get("alpha", 1))
        mc, v, m = m[0], v[1:], m[1:]
        func = {"addmm": aten.mm.default, "baddbmm": aten.bmm.default, "addmv": aten.mv.default}[name]
        name = _name(func)
    x, y, rest = v[0], v[1], v[2:]
    if name == "convolution":
        rest = [None] + rest[1:]  # the bias is added below
        k = y.shape[1] * math.prod(y.shape[2:])
    else:
        k = x.shape[-1] if x.dim() else 1
    ax, ay = finite_abs(x), finite_abs(y)
    depth = math.sqrt(max(k, 1)) * _rounds_at(tree_flatten(out)[0][0], unit)
    total = func(m[0], ay, *rest) + func(ax, m[1], *rest) + depth * func(ax, ay, *rest) + unit * func(
        m[0], m[1], *rest)
    if name == "convolution" and values[2] is not None:
        total = total + _wide(mags[2]).reshape([1, -1] + [1] * (total.dim() - 2))
    if scaled:
        total = beta * mc + alpha * total
    return total


def quietly_import_decompositions() -> None:
    """torch's decomposition tables (forward-mode AD loads some on first use): importing them scripts
    a few functions, and torch.jit.script warns that it is deprecated."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import torch._decomp  # noqa: F401
        import torch._decomp.decompositions_for_jvp  # noqa: F401
