"""The magnitude of the terms behind each value of an oracle: what rounding errors scale with.

A kernel that computes ``y = sum(x)`` in fp32 is off by about ``u * sum|x|``
(Higham's bound for sums), not ``u * |y|``: when the terms cancel, the
result is small but its error is not.  The same holds inside any
computation: ``x - mean`` in a layer norm, the two terms of an RMSNorm
backward, the logits of a softmax.  This module runs the subject's own
float64 oracle (and, for gradients, its float64 autograd) once more on
tensors that carry, beside each value, the magnitude ``m`` of the terms it
was formed from, a first-order running error analysis:

- an input starts with ``m = |x|``;
- a pointwise op ``f(a, b, ...)`` gives ``sum_k |df/da_k| * m_k + |f|``
  (forward-mode AD, one input at a time: each is a diagonal Jacobian, so the
  absolute value of its product with ``m_k >= 0`` is exact), the ``|f|``
  being the op's own rounding;
- a sum, mean or cumulative sum sums the magnitudes (plus ``|out|``);
- a product of matrices gives ``|A| @ m_B + m_A @ |B|`` (the classic
  componentwise bound of a dot product);
- copies, views, selections and concatenations move magnitudes as they move
  values; a max picks the magnitude of the element it picked;
- composite ops (softmax, layer norm, cross entropy, their backwards) are
  decomposed with torch's own decompositions into the ops above.

``sum(m)`` is Higham's ``sum |x_i|`` for a sum, ``|A| |B|`` for a product,
and grows where an intermediate cancels, so ``u * m`` is what a kernel that
follows the oracle's steps in precision ``u`` may be off by (times the depth
of its reductions, which the tolerance adds).  An op with no rule makes the
whole pass give None: the tolerance then falls back to its plain rule.

The pass costs about two evaluations of the oracle; the judge runs it only
for an example whose output fails the plain bound.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["gradient_magnitudes", "output_magnitudes"]

aten = torch.ops.aten


class Unsupported(Exception):
    """An op the pass has no rule for."""


class _Tracked(torch.Tensor):
    """A float64 value and the magnitude of the terms behind it (a wrapper tensor: autograd sees one tensor)."""

    value: torch.Tensor
    magnitude: torch.Tensor

    @staticmethod
    def __new__(cls, value: torch.Tensor, magnitude: torch.Tensor, requires_grad: bool = False):
        out = torch.Tensor._make_wrapper_subclass(
            cls, value.shape, strides=value.stride(), storage_offset=value.storage_offset(), dtype=value.dtype,
            device=value.device, requires_grad=requires_grad)
        out.value = value
        out.magnitude = magnitude
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self) -> str:  # noqa: D105
        return f"_Tracked(value={self.value!r}, magnitude={self.magnitude!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_floating_point


def _value(x: Any) -> Any:
    return x.value if isinstance(x, _Tracked) else x


def _magnitude(x: Any) -> Any:
    """A tracked tensor's magnitude; an untracked float tensor is a constant, exact: 0."""
    if isinstance(x, _Tracked):
        return x.magnitude
    if _is_float(x):
        return torch.zeros_like(x)
    return x


def _wrap(out: Any, mags: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return type(out)(_wrap(o, m) for o, m in zip(out, mags))
    if _is_float(out) and isinstance(mags, torch.Tensor):
        return _Tracked(out, mags)
    return out


# -- rules -----------------------------------------------------------------

# Ops that move or copy values (each output element is an input element, or 0): the same op on the
# magnitudes moves them the same way.
_MOVES = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "expand", "permute", "transpose", "t", "movedim", "slice",
    "select", "unsqueeze", "squeeze", "narrow", "diagonal", "as_strided", "unfold", "split", "split_with_sizes",
    "unbind", "alias", "detach", "lift_fresh", "lift_fresh_copy", "clone", "contiguous", "_to_copy", "copy",
    "expand_copy", "permute_copy", "view_copy", "transpose_copy", "t_copy", "unsqueeze_copy", "squeeze_copy",
    "slice_copy", "select_copy", "alias_copy", "split_copy", "index", "_unsafe_index", "index_select", "gather",
    "take_along_dim", "cat", "stack", "flip", "roll", "repeat", "repeat_interleave", "constant_pad_nd", "tril",
    "triu", "masked_fill", "masked_scatter", "index_put", "index_copy", "scatter", "slice_scatter",
    "select_scatter", "diagonal_scatter", "fill", "zero", "pixel_shuffle",
}
# Sums: each output adds several terms, rounding as it goes.
_SUMS = {"sum", "mean", "nansum", "cumsum", "scatter_add", "index_add"}
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
_SELECTIONS = {"amax", "amin", "max", "min"}
_SORTS = {"sort", "topk"}
_BILINEAR = {"mm", "bmm", "mv", "dot", "vdot", "addmm", "baddbmm", "addmv", "convolution"}


def _substituted(func, args: tuple, kwargs: dict, swap: Callable[[Any], Any]) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with every float tensor through ``swap`` and every Scalar-typed argument (a
    fill value, a padding value) set to 0: a constant carries no rounding."""
    schema = func._schema.arguments
    names = [a.name for a in schema]
    scalar_args = {a.name for a in schema if isinstance(a.type, torch.NumberType)}

    def each(x):
        return swap(x) if _is_float(x) else x

    new_args = tuple(0 if i < len(names) and names[i] in scalar_args else tree_map(each, a)
                     for i, a in enumerate(args))
    new_kwargs = {k: (0 if k in scalar_args else tree_map(each, v)) for k, v in kwargs.items()}
    return new_args, new_kwargs


def _moved(func, args, kwargs):
    """``func`` applied to the magnitudes instead of the values."""
    a, k = _substituted(func, args, kwargs, _magnitude)
    return func(*a, **k)


def _on_abs(func, args, kwargs):
    """``func`` applied to the absolute values: for a sum, the sum of the terms' sizes."""
    a, k = _substituted(func, args, kwargs, lambda x: _finite_abs(_value(x)))
    return func(*a, **k)


def _finite_abs(x: torch.Tensor) -> torch.Tensor:
    """``|x|``, 0 where x is inf or NaN (those are compared exactly, and carry no rounding)."""
    return torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x))


def _abs_out(out: Any) -> Any:
    return tree_map(lambda o: _finite_abs(o) if _is_float(o) else o, out)


def _plus(a: Any, b: Any) -> Any:
    if isinstance(a, (tuple, list)):
        return type(a)(_plus(x, y) for x, y in zip(a, b))
    return a + b if _is_float(a) else a


def _terms(inp: torch.Tensor, out: torch.Tensor) -> int:
    """How many terms each output element of a sum adds (at least 1)."""
    return max(inp.numel() // max(out.numel(), 1), 1)


def _summed(func, args, kwargs, values, out):
    """The terms' magnitudes summed, plus ``sqrt(n) * sum |terms|``: the partial sums' roundings
    (each at most the sum of the terms' sizes; their errors grow as ``sqrt(n)`` over ``n`` steps,
    Higham and Mary's probabilistic bound)."""
    name = func.__name__.split(".")[0].rstrip("_")
    if name == "cumsum":
        dim = values[1] if len(values) > 1 else kwargs["dim"]
        n = values[0].shape[dim] if values[0].dim() else 1
    elif name in ("scatter_add", "index_add"):
        n = _terms(values[-1], out) + 1
    else:
        n = _terms(values[0], out)
    return _moved(func, args, kwargs) + math.sqrt(n) * _on_abs(func, args, kwargs)


def _pointwise(func, args, kwargs, values, vkwargs, out):
    """``sum_k |df/da_k| * m_k + |f|`` (``LIBRARY_ULPS * |f|`` for an op not rounded exactly), by
    forward-mode AD one tracked input at a time."""
    flat, spec = tree_flatten((args, kwargs))
    positions = [i for i, x in enumerate(flat) if isinstance(x, _Tracked)]
    vflat, _ = tree_flatten((values, vkwargs))
    base = func.__name__.split(".")[0].rstrip("_")
    total = _abs_out(out)
    if base not in _EXACTLY_ROUNDED:
        total = tree_map(lambda t: LIBRARY_ULPS * t if _is_float(t) else t, total)
    for i in positions:
        def at(primal, i=i):
            items = list(vflat)
            items[i] = primal
            a, k = tree_unflatten(items, spec)
            if func._schema.is_mutable:  # an in-place op: its out-of-place twin on a copy
                a = (a[0].clone(),) + tuple(a[1:])
            return func(*a, **k)

        m = flat[i].magnitude.to(vflat[i].dtype)
        try:
            tangent = _jvp(at, vflat[i].clone(), m)
        except (RuntimeError, NotImplementedError):  # no forward-mode formula: central differences
            step = 2.0**-20 * vflat[i].abs().clamp_min(2.0**-20)  # small against the value: no pole crossed
            tangent = tree_map(lambda hi, lo: (hi - lo) / (2 * step) * m if _is_float(hi) else hi,
                               at(vflat[i] + step), at(vflat[i] - step))
        # 0 * inf (a derivative that is infinite where no term reaches) is 0, not NaN.
        total = _plus(total, tree_map(lambda t: torch.nan_to_num(t.abs(), nan=0.0) if _is_float(t) else t, tangent))
    return total


_JVP_THREAD: list = []


def _jvp(fn: Callable[[torch.Tensor], Any], primal: torch.Tensor, tangent: torch.Tensor) -> Any:
    """``fn``'s forward-mode derivative at ``primal`` along ``tangent``, computed on a thread of its own:
    inside ``__torch_dispatch__`` the autograd keys are excluded from this thread's dispatch."""
    if not _JVP_THREAD:
        from concurrent.futures import ThreadPoolExecutor

        _quietly_import_decompositions()
        _JVP_THREAD.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="magnitude-jvp"))
    return _JVP_THREAD[0].submit(torch.func.jvp, fn, (primal,), (tangent,)).result()[1]


def _bilinear(func, args, kwargs, values, out):
    """``m_A @ |B| + |A| @ m_B + sqrt(K) * |A| @ |B|`` for a product contracting K terms (the
    componentwise bound of a dot product, its partial sums growing as a sum's), and ``|beta| * m_C``
    for the ``add...`` forms."""
    name = func.__name__.split(".")[0]
    a = list(args)
    scaled = name in ("addmm", "baddbmm", "addmv")
    if scaled:
        beta, alpha = abs(kwargs.get("beta", 1)), abs(kwargs.get("alpha", 1))
        c, a = a[0], a[1:]
        func = {"addmm": aten.mm.default, "baddbmm": aten.bmm.default, "addmv": aten.mv.default}[name]
        name = func.__name__.split(".")[0]
    x, y, rest = a[0], a[1], a[2:]
    if name == "convolution":
        rest = [None] + rest[1:]  # the bias is added below
        k = _value(y).shape[1] * math.prod(_value(y).shape[2:])
    else:
        k = _value(x).shape[-1] if _value(x).dim() else 1
    mx, my = _magnitude(x), _magnitude(y)
    ax, ay = _finite_abs(_value(x)), _finite_abs(_value(y))
    total = func(mx, ay, *rest) + func(ax, my, *rest) + math.sqrt(max(k, 1)) * func(ax, ay, *rest)
    if name == "convolution" and args[2] is not None:
        total = total + _magnitude(args[2]).reshape([1, -1] + [1] * (total.dim() - 2))
    if scaled:
        total = beta * _magnitude(c) + alpha * total
    return total


def _selection(func, args, kwargs, values, out):
    """The magnitude of the element a max or min picked (the largest, on ties)."""
    name = func.__name__.split(".")[0]
    x = values[0]
    mag = _magnitude(args[0])
    picked = out[0] if isinstance(out, (tuple, list)) else out
    if name in ("max", "min") and len(values) == 1:  # over everything
        hit = x == picked
        return torch.where(hit, mag, torch.zeros_like(mag)).max()
    dims = values[1] if len(values) > 1 else kwargs.get("dim", None)
    keepdim = (values[2] if len(values) > 2 else kwargs.get("keepdim", False))
    if isinstance(dims, int):
        dims = [dims]
    dims = list(dims) if dims else list(range(x.dim()))
    broad = picked
    if not keepdim:
        for d in sorted(dd % max(x.dim(), 1) for dd in dims):
            broad = broad.unsqueeze(d)
    chosen = torch.where(x == broad, mag, torch.zeros_like(mag)).amax(dim=dims, keepdim=bool(keepdim))
    if isinstance(out, (tuple, list)):  # (values, indices)
        return (chosen,) + tuple(out[1:])
    return chosen


def _sorted(func, args, kwargs, out):
    """Sorts and top-k: the magnitudes gathered with the indices."""
    values, indices = out[0], out[1]
    dim = args[2] if func.__name__.startswith("topk") and len(args) > 2 else kwargs.get("dim", -1)
    if func.__name__.startswith("sort") and len(args) > 1 and isinstance(args[1], int):
        dim = args[1]
    mag = _magnitude(args[0])
    if indices.dim() != mag.dim():
        raise Unsupported(func)
    return (torch.gather(mag, dim, indices),) + tuple(out[1:])


def _variance(x, dims, correction, keepdim):
    """The two-pass variance, through ops with rules (torch's own decomposition uses a prim)."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(x.dim()))
    dims = [dims] if isinstance(dims, int) else list(dims)
    count = 1
    for d in dims:
        count *= x.shape[d]
    correction = 1 if correction is None else correction
    d = x - x.mean(dims, keepdim=True)
    return (d * d).sum(dims, keepdim=keepdim) / max(count - correction, 0)


def _var(x, dim=None, *, correction=None, keepdim=False):
    return _variance(x, dim, correction, keepdim)


def _std(x, dim=None, *, correction=None, keepdim=False):
    return _variance(x, dim, correction, keepdim).sqrt()


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    dims = list(range(x.dim())) if not dim else dim
    return _variance(x, dim, correction, keepdim), x.mean(dims, keepdim=keepdim)


def _std_mean(x, dim=None, *, correction=None, keepdim=False):
    var, mean = _var_mean(x, dim, correction=correction, keepdim=keepdim)
    return var.sqrt(), mean


def _prims_var(x, dims, correction=1, *, output_dtype=None):
    return _variance(x, dims, correction, False)


_OWN = {
    aten.var.correction: _var,
    aten.std.correction: _std,
    aten.var_mean.correction: _var_mean,
    aten.std_mean.correction: _std_mean,
}


def _quietly_import_decompositions() -> None:
    """torch's decomposition tables (forward-mode AD loads some on first use): importing them scripts
    a few functions, and torch.jit.script warns that it is deprecated."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import torch._decomp  # noqa: F401
        import torch._decomp.decompositions_for_jvp  # noqa: F401


def _decomposition(func) -> Callable[..., Any] | None:
    """How to run ``func`` as ops with rules: ours, its CompositeImplicitAutograd kernel, or torch's."""
    if func in _OWN:
        return _OWN[func]
    if func is getattr(getattr(torch.ops, "prims", None), "var", None) or str(func) == "prims.var.default":
        return _prims_var
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
        return func.decompose
    _quietly_import_decompositions()
    from torch._decomp import decomposition_table

    return decomposition_table.get(func)


def _rule(func) -> str | None:
    base = func.__name__.split(".")[0]
    if base.endswith("_") and not base.endswith("__"):
        base = base[:-1]  # add_ -> add: in place, the same rule
    if base in _MOVES:  # before the pointwise tag: a copy (clone, _to_copy) is tagged pointwise too
        return "move"
    if base in _COMPOUND:
        return None  # decomposed
    if torch.Tag.pointwise in func.tags:
        return "pointwise"
    for rule, names in (("sum", _SUMS), ("constant", _CONSTANTS), ("selection", _SELECTIONS),
                        ("sort", _SORTS), ("bilinear", _BILINEAR)):
        if base in names:
            return rule
    return None


def _magnitudes(rule: str, func, args, kwargs, values, vkwargs, out):
    if rule == "pointwise":
        return _pointwise(func, args, kwargs, values, vkwargs, out)
    if rule == "move":
        return _moved(func, args, kwargs)
    if rule == "sum":
        return _summed(func, args, kwargs, values, out)
    if rule == "constant":
        return tree_map(lambda o: torch.zeros_like(o) if _is_float(o) else o, out)
    if rule == "selection":
        return _selection(func, args, kwargs, values, out)
    if rule == "sort":
        return _sorted(func, args, kwargs, out)
    return _bilinear(func, args, kwargs, values, out)


def _in_place(func, rule: str, args, kwargs, values, vkwargs):
    """An op that writes into its first argument: the target's value and magnitude change in place
    (so views of it see both)."""
    target = args[0]
    written = func._schema.arguments[0].alias_info
    if not isinstance(target, _Tracked) or written is None or not written.is_write or rule not in (
            "pointwise", "move", "sum"):
        raise Unsupported(func)
    copies = (values[0].clone(),) + tuple(values[1:])
    out = func(*copies, **vkwargs)  # the result, on a copy: the inputs are still as they were
    if rule == "pointwise":
        mags = _pointwise(func, args, kwargs, values, vkwargs, out)
        target.magnitude.copy_(mags)
    elif rule == "sum":  # _moved inside adds the terms' magnitudes into the target's, in place
        target.magnitude.copy_(_summed(func, args, kwargs, values, out))
    else:  # the same op on the target's magnitude, in place
        _moved(func, args, kwargs)
    func(*values, **vkwargs)
    return target


def _dispatch(func, args: tuple, kwargs: dict):
    rule = _rule(func)
    values, vkwargs = tree_map(_value, (args, kwargs))
    if rule is None:
        decomposition = _decomposition(func)
        if decomposition is not None:
            return decomposition(*args, **kwargs)
        out = func(*values, **vkwargs)
        if any(_is_float(o) for o in tree_flatten(out)[0]):
            raise Unsupported(func)
        return out  # a query (a size, an item, a comparison): no magnitudes needed
    if func._schema.is_mutable:
        return _in_place(func, rule, args, kwargs, values, vkwargs)
    out = func(*values, **vkwargs)
    if not any(_is_float(o) for o in tree_flatten(out)[0]):
        return out
    return _wrap(out, _magnitudes(rule, func, args, kwargs, values, vkwargs, out))


# -- entry points ------------------------------------------------------------

@contextlib.contextmanager
def _composable_attention():
    """scaled_dot_product_attention through its math path, so autograd records ops with rules."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # pragma: no cover - older torch
        yield
        return
    with sdpa_kernel([SDPBackend.MATH]):
        yield


def _tracked_inputs(inputs: Mapping[str, Any], grads: Sequence[str] = ()) -> dict[str, Any]:
    return {n: (_Tracked(v, v.abs(), requires_grad=n in grads) if _is_float(v) else v) for n, v in inputs.items()}


def _magnitudes_of(outs: Sequence[Any]) -> tuple | None:
    mags = []
    for o in outs:
        if isinstance(o, _Tracked):
            mags.append(o.magnitude)
        elif _is_float(o):  # an output that does not depend on any input: a constant
            mags.append(torch.zeros_like(o))
        else:
            return None
    return tuple(mags)


def output_magnitudes(oracle: Callable[..., Any], inputs: Mapping[str, Any], scalars: Mapping[str, Any]
                      ) -> tuple | None:
    """The magnitude of the terms behind each output of ``oracle`` on ``inputs`` (float64 tensors), or
    None where the oracle uses an op this module has no rule for (or fails under tracking)."""
    try:
        with _composable_attention(), torch.no_grad():
            out = oracle(**_tracked_inputs(inputs), **scalars)
    except Exception:  # noqa: BLE001 - no magnitudes: the plain rule judges
        return None
    return _magnitudes_of(out if isinstance(out, (tuple, list)) else (out,))


def gradient_magnitudes(oracle: Callable[..., Any], inputs: Mapping[str, Any], scalars: Mapping[str, Any],
                        grads: Sequence[str], grad_output: torch.Tensor) -> tuple | None:
    """The magnitude of the terms behind each gradient (of the oracle's first output, backpropagating
    ``grad_output``) with respect to ``grads``, or None as :func:`output_magnitudes`."""
    try:
        with _composable_attention(), torch.enable_grad():
            tracked = _tracked_inputs(inputs, grads)
            out = oracle(**tracked, **scalars)
            first = out[0] if isinstance(out, (tuple, list)) else out
            go = _Tracked(grad_output, grad_output.abs())
            got = torch.autograd.grad(first, [tracked[n] for n in grads], grad_outputs=go, allow_unused=True)
    except Exception:  # noqa: BLE001
        return None
    return tuple(None if g is None else g.magnitude if isinstance(g, _Tracked) else torch.zeros_like(g)
                 for g in got)
