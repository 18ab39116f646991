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
  (forward-mode AD, one input at a time), the ``|f|`` being the op's own
  rounding (counted :data:`~.magnitude_rules.LIBRARY_ULPS` times for a
  library function: exp, erf, a division);
- a sum over ``n`` terms gives ``sum m_i + sqrt(n) * sum |x_i|`` (the partial
  sums' roundings);
- a product of matrices contracting ``K`` gives
  ``m_A @ |B| + |A| @ m_B + sqrt(K) * |A| @ |B|``;
- copies, views, selections and concatenations move magnitudes as they move
  values; a max picks the magnitude of the element it picked;
- dense linear algebra (factorizations, solves, matrix functions: LAPACK's
  backward-stable algorithms) gives the change of the op at its inputs moved by
  their backward error (:mod:`.magnitude_linalg`);
- composite ops (softmax, layer norm, cross entropy, gelu, their backwards)
  are decomposed with torch's own decompositions into the ops above.

Magnitudes are counted in units of the unit roundoff the kernel computes in
(``unit``, the judge's accumulation dtype), so that the roundings the oracle
names at a fixed precision weigh what they weigh:

- a float scalar reaches the kernel as fp32: it enters as a tracked 0-d input
  whose magnitude is ``|s| * u_fp32 / unit``, so a kernel that forms
  ``1 - beta2`` on the host in float64 and one that forms it from the fp32
  ``beta2`` on the device are both inside the bound;
- a cast to a coarser dtype inside the oracle (``p.to(torch.bfloat16)``,
  ``.half()``) adds ``|p| * u_bf16 / unit``, and an op whose result the oracle
  holds in bf16 rounds at bf16 (:func:`.rounding.rounded_to` says it in one call);
- a product adds its second-order term, ``unit * m_a * m_b``, so a factor whose
  float64 value is exactly zero (``x - mean`` of a constant row) still allows
  the kernel's rounding.

So ``m`` is Higham's ``sum |x_i|`` for a sum, ``|A| |B|`` for a product, and
grows where an intermediate cancels: ``u * m`` is what a kernel that follows
the oracle's steps in precision ``u`` may be off by.  The rules are in
:mod:`.magnitude_rules`.  An op with no rule and no decomposition makes the
whole pass give :class:`Unavailable`, naming the op: the tolerance then falls
back to its plain rule, and the finding says why.

The pass costs about two evaluations of the oracle; the judge runs it only
for an example whose output fails the plain bound.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.utils._pytree import tree_flatten, tree_map

from triton_conformance.oracles.magnitude_rules import (
    apply,
    is_float,
    op_name,
    quietly_import_decompositions,
    rule_of,
    unit_roundoff,
)
from triton_conformance.oracles.magnitude_decompositions import own_decomposition
from triton_conformance.oracles.magnitude_linalg import is_dense_linear_algebra
from triton_conformance.oracles.rounding import HELD_AS as _HELD_AS

__all__ = ["FP32_UNIT", "Unavailable", "gradient_magnitudes", "import_before_shims", "output_magnitudes"]

aten = torch.ops.aten
FP32_UNIT = unit_roundoff(torch.float32)
# The unit roundoff the magnitudes of the pass in progress are counted in (set by the entry points).
_UNIT = [FP32_UNIT]


class Unsupported(Exception):
    """An op the pass has no rule for."""


# While :mod:`.magnitude_coverage` surveys an oracle, an op with no rule is recorded here instead of ending
# the pass, and passes on its own ``|value|`` as its magnitude: one pass then names every op that lacks one.
_SURVEY: list[set] = []


def _missing(func, out: Any) -> Any:
    """``func`` has no rule: end the pass, or, in a survey, record it and go on."""
    if not _SURVEY:
        raise Unsupported(func)
    _SURVEY[-1].add(str(func))
    return _wrap(out, tree_map(lambda o: o.detach().abs().to(torch.float64) if is_float(o) else o, out))


@dataclass(frozen=True)
class Unavailable:
    """Why the magnitudes could not be computed (the plain bound judges alone)."""

    reason: str


def _unavailable(exc: Exception) -> Unavailable:
    if isinstance(exc, Unsupported):
        return Unavailable(f"no magnitude rule for {exc.args[0]}")
    return Unavailable(f"the oracle failed under magnitude tracking: {type(exc).__name__}: {exc}"[:300])


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


def _value(x: Any) -> Any:
    return x.value if isinstance(x, _Tracked) else x


def _magnitude(x: Any) -> Any:
    """A tracked tensor's magnitude; an untracked float tensor is a constant, exact: 0."""
    if isinstance(x, _Tracked):
        return x.magnitude
    return torch.zeros_like(x) if is_float(x) else x


def _wrap(out: Any, mags: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return type(out)(_wrap(o, m) for o, m in zip(out, mags))
    if is_float(out) and isinstance(mags, torch.Tensor):
        return _Tracked(out, mags)
    return out


def _dispatch(func, args: tuple, kwargs: dict):
    rule = rule_of(func)
    values, vkwargs = tree_map(_value, (args, kwargs))
    if rule is None:
        decomposition = _decomposition(func)
        if decomposition is not None:
            out = decomposition(*args, **kwargs)
            if out is not NotImplemented:  # torch's decompositions decline some arguments
                return out
        if not (is_dense_linear_algebra(op_name(func)) and not func._schema.is_mutable):
            out = func(*values, **vkwargs)
            if any(is_float(o) for o in tree_flatten(out)[0]):
                return _missing(func, out)
            return out  # a query (a size, an item, a comparison): no magnitudes needed
        rule = "stable"  # a factorization or solve: its backward error, carried through it
    mags, mkwargs = tree_map(_magnitude, (args, kwargs))
    if func._schema.is_mutable:
        return _in_place(func, rule, args, values, vkwargs, mags, mkwargs)
    out = func(*values, **vkwargs)
    if not any(is_float(o) for o in tree_flatten(out)[0]):
        return out
    return _wrap(out, apply(rule, func, values, vkwargs, mags, mkwargs, out, _UNIT[-1]))


# In-place ops that change their target's shape by dims (quantile squeezes its result in place): done to
# the value, to the magnitude and to the wrapper's own sizes.  Those that set strides or storage directly
# (as_strided_, resize_, set_) have no rule (a magnitude need not be laid out as its value): named.
_RESHAPED_IN_PLACE = {"squeeze", "unsqueeze", "transpose", "t", "swapdims", "swapaxes"}


def _reshaped_in_place(func, target, values, vkwargs):
    func(*values, **vkwargs)
    func(target.magnitude, *values[1:], **vkwargs)
    with torch._C._DisableTorchDispatch():  # the wrapper's sizes and strides only: it holds no data
        func(target, *values[1:], **vkwargs)
    return target


def _in_place(func, rule: str, args, values, vkwargs, mags, mkwargs):
    """An op that writes into its first argument: the target's value and magnitude change in place
    (so views of it see both)."""
    target = args[0]
    if op_name(func) in _RESHAPED_IN_PLACE and isinstance(target, _Tracked):
        return _reshaped_in_place(func, target, values, vkwargs)
    written = func._schema.arguments[0].alias_info
    if not isinstance(target, _Tracked) or written is None or not written.is_write or rule not in (
            "pointwise", "move", "sum"):
        if not _SURVEY or not isinstance(target, _Tracked):
            raise Unsupported(func)
        _missing(func, None)
        func(*values, **vkwargs)
        return target
    out = func(*((values[0].clone(),) + tuple(values[1:])), **vkwargs)  # on a copy: the inputs stay as they were
    if rule == "move":  # the same op on the target's magnitude, in place
        apply(rule, func, values, vkwargs, mags, mkwargs, out, _UNIT[-1])
    else:  # a sum adds into the target's magnitude in place, then its roundings are added to that
        target.magnitude.copy_(apply(rule, func, values, vkwargs, mags, mkwargs, out, _UNIT[-1]))
    func(*values, **vkwargs)
    return target


# -- decompositions ------------------------------------------------------------------


def _decomposition(func) -> Callable[..., Any] | None:
    """How to run ``func`` as ops with rules: ours, its CompositeImplicitAutograd kernel, or torch's."""
    own = own_decomposition(func)
    if own is not None:
        return own
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
        return func.decompose
    quietly_import_decompositions()
    from torch._decomp import decomposition_table

    return decomposition_table.get(func)


# -- entry points --------------------------------------------------------------------


def import_before_shims() -> None:
    """What the pass imports lazily, imported now: the interpreter's compat shims, installed after this,
    must not change what it sees (the jvp decompositions script torch functions as they import)."""
    quietly_import_decompositions()
    import torch.func  # noqa: F401
    import torch.nn.attention  # noqa: F401


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
    tracked = {}
    for n, v in inputs.items():
        if is_float(v):
            tracked[n] = _Tracked(v, v.abs().to(torch.float64), requires_grad=n in grads)
            if hasattr(v, _HELD_AS):
                setattr(tracked[n], _HELD_AS, getattr(v, _HELD_AS))
        else:
            tracked[n] = v
    return tracked


def _tracked_scalars(scalars: Mapping[str, Any], inputs: Mapping[str, Any], unit: float) -> dict[str, Any]:
    """The float scalars as 0-d inputs carrying their rounding to fp32 (``|s| * u_fp32``, in ``unit``s):
    the kernel receives fp32, and the host may have formed it in float64 (``1 - beta2``)."""
    device = next((v.device for v in inputs.values() if isinstance(v, torch.Tensor)), None)
    out = {}
    for n, s in scalars.items():
        if isinstance(s, float):
            value = torch.tensor(s, dtype=torch.float64, device=device)
            out[n] = _Tracked(value, value.abs() * (FP32_UNIT / unit))
        else:
            out[n] = s
    return out


@contextlib.contextmanager
def _counted_in(unit: float):
    if not (isinstance(unit, float) and 0 < unit < 1):
        raise ValueError(f"unit={unit!r}, expected the unit roundoff of a float dtype (0 < unit < 1)")
    _UNIT.append(unit)
    try:
        yield
    finally:
        _UNIT.pop()


def _with_scalars(run: Callable[[Mapping[str, Any]], Any], inputs, scalars, unit: float) -> Any:
    """``run`` on the tracked scalars; on plain floats where the oracle needs a Python float (passes one to
    an argument typed float): those scalars then carry no rounding of their own."""
    tracked = _tracked_scalars(scalars, inputs, unit)
    if all(tracked[n] is s for n, s in scalars.items()):
        return run(scalars)
    try:
        return run(tracked)
    except Unsupported:
        raise
    except Exception:  # noqa: BLE001 - the oracle wants floats: run it as the judge does
        return run(scalars)


def _magnitudes_of(outs: Sequence[Any]) -> tuple | Unavailable:
    mags = []
    for o in outs:
        if isinstance(o, _Tracked):
            mags.append(o.magnitude)
        elif is_float(o):  # an output that does not depend on any input: a constant
            mags.append(torch.zeros_like(o))
        else:
            return Unavailable(f"the oracle returned a {type(o).__name__} under magnitude tracking, not a tensor")
    return tuple(mags)


def output_magnitudes(oracle: Callable[..., Any], inputs: Mapping[str, Any], scalars: Mapping[str, Any],
                      unit: float = FP32_UNIT) -> tuple | Unavailable:
    """The magnitude of the terms behind each output of ``oracle`` on ``inputs`` (float64 tensors), in units
    of ``unit`` (the unit roundoff the kernel computes in), or :class:`Unavailable` where the oracle uses an
    op this module has no rule for (or fails under tracking)."""
    def run(s):
        with _composable_attention(), torch.no_grad():
            return oracle(**_tracked_inputs(inputs), **s)

    try:
        with _counted_in(unit):
            out = _with_scalars(run, inputs, scalars, unit)
    except Exception as exc:  # noqa: BLE001 - no magnitudes: the plain rule judges, and the finding says why
        return _unavailable(exc)
    return _magnitudes_of(out if isinstance(out, (tuple, list)) else (out,))


def gradient_magnitudes(oracle: Callable[..., Any], inputs: Mapping[str, Any], scalars: Mapping[str, Any],
                        grads: Sequence[str], grad_output: Any, unit: float = FP32_UNIT) -> tuple | Unavailable:
    """The magnitude of the terms behind each gradient with respect to ``grads`` (of the oracle's outputs,
    backpropagating ``grad_output``: {output position: its grad_output}, or output 0's alone), or
    :class:`Unavailable` as :func:`output_magnitudes`."""
    gos = dict(grad_output) if isinstance(grad_output, Mapping) else {0: grad_output}

    def run(s):
        with _composable_attention(), torch.enable_grad():
            tracked = _tracked_inputs(inputs, grads)
            out = oracle(**tracked, **s)
            outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            return torch.autograd.grad([outs[p] for p in gos], [tracked[n] for n in grads],
                                       grad_outputs=[_Tracked(g, g.abs()) for g in gos.values()], allow_unused=True)

    try:
        with _counted_in(unit):
            got = _with_scalars(run, inputs, scalars, unit)
    except Exception as exc:  # noqa: BLE001
        return _unavailable(exc)
    return tuple(None if g is None else g.magnitude if isinstance(g, _Tracked) else torch.zeros_like(g)
                 for g in got)
