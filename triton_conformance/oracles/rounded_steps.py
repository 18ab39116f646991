"""The oracle's own steps, each result rounded to a narrow float dtype, range included: where its infinities
and NaNs are.

A kernel that computes in its input dtype overflows (past fp16's 65504) and underflows (below its
smallest subnormal) where float64 does not: torch's fp16 ``addcdiv`` backward forms ``t2 * t2``, 0 in fp16
for ``|t2| < 1.7e-4``, and returns -inf where float64 gives -10139.  Such an inf is no rounding error the
magnitudes can allow for, so :func:`.comparison.compare` asks instead whether the oracle's computation,
every aten op's float result rounded to the input dtype (computed in float64, then rounded: overflow to
inf, underflow to 0), makes the same inf or NaN there.  Where it does, the precision verdict explains it
("where float16 intermediates overflow, underflow or cancel"); an inf that no such evaluation makes is worse.

A composite op that the oracle calls as one aten op (``addcdiv`` itself, ``softmax``) rounds once, at its
result: fewer roundings than a kernel may do, so the verdict errs towards "worse", never towards an
explanation.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from triton_conformance.oracles.magnitude import Unavailable

__all__ = ["CLASSES", "rounded_gradients", "rounded_outputs", "special_class"]

# special_class's codes, as a finding names them.
CLASSES = ("finite", "NaN", "+inf", "-inf")


def special_class(t: torch.Tensor) -> torch.Tensor:
    """Each element's class: 0 finite, 1 NaN, 2 +inf, 3 -inf (the indices of :data:`CLASSES`)."""
    code = torch.zeros(t.shape, dtype=torch.int8, device=t.device)
    code = torch.where(torch.isnan(t), torch.ones_like(code), code)
    code = torch.where(t == float("inf"), torch.full_like(code, 2), code)
    return torch.where(t == float("-inf"), torch.full_like(code, 3), code)


class _RoundedSteps(TorchDispatchMode):
    """Every aten op as it is, its float results then rounded to ``dtype`` and held in float64; a view or
    an in-place op's result aliases a tensor already rounded (in place: rounded where it is)."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def _round(self, t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.dtype != self.dtype:
            return t.to(self.dtype).to(t.dtype)
        return t

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(r.alias_info is not None for r in func._schema.returns):
            if func._schema.is_mutable:
                tree_map(lambda t: t.copy_(self._round(t)) if isinstance(t, torch.Tensor) else t, out)
            return out
        return tree_map(self._round, out)


def _run(evaluate: Callable[[], Any], dtype: torch.dtype) -> tuple | Unavailable:
    try:
        with _RoundedSteps(dtype):
            out = evaluate()
    except Exception as exc:  # noqa: BLE001 - the oracle in narrow steps: no verdict, and the finding says why
        return Unavailable(f"the oracle failed with its steps rounded to {str(dtype)[6:]}: "
                           f"{type(exc).__name__}: {exc}"[:300])
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if not all(o is None or isinstance(o, torch.Tensor) for o in outs):
        return Unavailable("the oracle returned something other than tensors with its steps rounded")
    return tuple(None if o is None else o.detach() for o in outs)


def _narrowed(inputs: Mapping[str, Any], dtype: torch.dtype) -> dict:
    """Float64 copies of ``inputs``, each float tensor first rounded to ``dtype`` (a kernel reads them so)."""
    return {n: (v.detach().to(dtype).to(torch.float64) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point
                else v) for n, v in inputs.items()}


def rounded_outputs(oracle: Callable[..., Any], inputs: Mapping[str, Any], scalars: Mapping[str, Any],
                    dtype: torch.dtype) -> tuple | Unavailable:
    """``oracle``'s outputs with every intermediate rounded to ``dtype`` (float64 tensors)."""
    def evaluate():
        with torch.no_grad():
            return oracle(**_narrowed(inputs, dtype), **scalars)

    return _run(evaluate, dtype)


def rounded_gradients(oracle: Callable[..., Any], inputs: Mapping[str, Any], scalars: Mapping[str, Any],
                      grads: Sequence[str], grad_output: Mapping[int, torch.Tensor],
                      dtype: torch.dtype) -> tuple | Unavailable:
    """The gradients with respect to ``grads`` of ``oracle``'s outputs (backpropagating ``grad_output``:
    {output position: its grad_output}), forward and backward steps all rounded to ``dtype``."""
    def evaluate():
        with torch.enable_grad():
            leaves = _narrowed(inputs, dtype)
            for n in grads:
                leaves[n] = leaves[n].clone().requires_grad_(True)
            out = oracle(**leaves, **scalars)
            outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            pairs = [(outs[p], g) for p, g in grad_output.items() if outs[p].requires_grad]
            got = torch.autograd.grad([o for o, _ in pairs], [leaves[n] for n in grads],
                                      grad_outputs=[g.detach().to(dtype).to(torch.float64) for _, g in pairs],
                                      allow_unused=True)
            return tuple(torch.zeros_like(leaves[n]) if g is None else g for n, g in zip(grads, got))

    return _run(evaluate, dtype)
