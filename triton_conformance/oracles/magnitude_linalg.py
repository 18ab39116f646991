"""The magnitude rule of dense linear algebra (factorizations, solves, inverses, matrix functions).

LAPACK's algorithms are backward stable: the computed result is the exact
result of inputs perturbed by about ``sqrt(n) * u`` of their size (normwise:
each element of a matrix may move by that share of the matrix's own size, not
only of its own), and the error of the result is that perturbation carried
through the op, its condition number in it by construction.  So the magnitude
of a result is the op itself evaluated at its inputs moved by what the kernel
may have moved them by:

- each float input ``x`` (with its magnitude ``m``) may be off by ``unit * w``,
  ``w = m + sqrt(n) * max(|x|, rms(x))``: its own errors and the algorithm's
  backward error (Higham and Mary's probabilistic constant ``sqrt(n)``, as a sum
  of ``n`` terms has, ``n`` the largest matrix dimension);
- the op is evaluated in float64 at ``x + unit * s * w`` and ``x - unit * s * w``
  for :data:`PROBES` random signs ``s``, and the result's magnitude is the largest
  change seen, in units of ``unit``, plus its own rounding.  Random signs give
  each element the 2-norm of its Jacobian row times ``w``, what a backward error
  made of many independent roundings gives (the probabilistic model the sums use).

A secant at the perturbation's own size, not a derivative, is what makes a
result that is not unique comparable: where an input lies within its rounding
of a choice the algorithm makes (a pivot nearly tied with the next one, the
sign of a Householder reflector's leading element near 0), the moved inputs
take the other choice too and the whole jump is in the allowance; elsewhere the
choice is the float64 oracle's, and a kernel that pivots otherwise is wrong.
Where a probe moves an element by more than 2^-6 of the output's scale
(a rank-deficient matrix's null space, which any orthonormal basis spans), the
element is not defined at the kernel's precision and is allowed the output's
scale.  The magnitudes of ops without a forward-mode formula (``geqrf``) come
the same way.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from triton_conformance.oracles.tolerance import SAFETY_FACTOR

__all__ = ["PROBES", "is_dense_linear_algebra", "stable_magnitude"]

PROBES = 8
# Dense factorizations and solves outside the linalg_ namespace (their linalg_ names are found by prefix).
_LEGACY = {"triangular_solve", "cholesky", "cholesky_solve", "cholesky_inverse", "geqrf", "ormqr",
           "_lu_with_info", "lu_solve", "matrix_exp", "inverse", "logdet", "det", "slogdet", "pinverse",
           "_linalg_check_errors"}


def is_dense_linear_algebra(name: str) -> bool:
    """Whether the aten op ``name`` (no overload, no trailing ``_``) is dense linear algebra."""
    return name.startswith(("linalg_", "_linalg_")) or name in _LEGACY


def _float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_floating_point


def _reach(x: torch.Tensor, m: Any, depth: float) -> torch.Tensor:
    """``w``: how far an input may be moved, in units of ``unit`` (its errors and the backward error)."""
    x = x.detach().to(torch.float64)
    size = torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x))
    rms = size.pow(2).mean().sqrt() if size.numel() else size.new_zeros(())
    own = m.to(torch.float64) if _float(m) else torch.zeros_like(size)
    return torch.nan_to_num(own, nan=0.0, posinf=0.0) + depth * torch.maximum(size, rms)


def _depth(values: list) -> float:
    """``n``, the largest matrix dimension among the float inputs (a vector's length)."""
    return float(max((max(v.shape[-2:]) for v in values if _float(v) and v.dim() >= 1), default=1))


def stable_magnitude(func, values: tuple, vkwargs: dict, mags: tuple, mkwargs: dict, out: Any,
                     unit: float) -> Any:
    """The magnitude of ``out = func(*values, **vkwargs)``, a backward-stable op, in units of ``unit``
    (the module's rule); non-float outputs (pivots, an info code) are passed through."""
    vflat, spec = tree_flatten((values, vkwargs))
    mflat, _ = tree_flatten((mags, mkwargs))
    moving = [i for i, v in enumerate(vflat) if _float(v)]
    depth = _depth([vflat[i] for i in moving])
    reach = {i: _reach(vflat[i], mflat[i], depth) for i in moving}
    outs, out_spec = tree_flatten(out)
    largest = [torch.zeros(o.shape, dtype=torch.float64, device=o.device) if _float(o) else None for o in outs]
    generator = torch.Generator(device="cpu").manual_seed(0)  # the same probes at every call: reproducible

    def at(sign: float, signs: dict) -> list:
        items = list(vflat)
        for i in moving:
            items[i] = (vflat[i].to(torch.float64) + sign * unit * signs[i] * reach[i]).to(vflat[i].dtype)
        a, k = tree_unflatten(items, spec)
        return tree_flatten(func(*a, **k))[0]

    for _ in range(PROBES):
        signs = {i: (torch.randint(0, 2, vflat[i].shape, generator=generator) * 2 - 1).to(
            torch.float64).to(vflat[i].device) for i in moving}
        for sign in (1.0, -1.0):
            for k, (o, moved) in enumerate(zip(outs, at(sign, signs))):
                if largest[k] is None or not _float(moved) or moved.shape != o.shape:
                    continue
                change = (moved.to(torch.float64) - o.to(torch.float64)).abs() / unit
                largest[k] = torch.maximum(largest[k], torch.nan_to_num(change, nan=0.0, posinf=0.0))
    total = []
    for o, change in zip(outs, largest):
        if change is None:
            total.append(o)
            continue
        own = torch.where(torch.isfinite(o), o.abs(), torch.zeros_like(o)).to(torch.float64)
        total.append(_undetermined(change, own, unit) + own)
    return tree_unflatten(total, out_spec)


# A probe that moves an element by more than this share of the output's scale: the element keeps fewer
# than 6 bits at the kernel's precision.
UNDETERMINED = 2.0**-6


def _undetermined(change: torch.Tensor, size: torch.Tensor, unit: float) -> torch.Tensor:
    """``change``, raised to an allowance of twice the output's scale where a probe moved an element by
    more than :data:`UNDETERMINED` of that scale: there the op is not smooth at the kernel's precision (the
    trailing columns of Q for a rank-deficient matrix, which any orthonormal basis of its null space may
    fill; a Householder scalar of a column that is zero within rounding), and any value of the output's
    size is as defined as the oracle's.  Random probes see such a jump, not its largest size."""
    scale = float(size.max()) if size.numel() else 0.0
    if scale == 0.0:
        return change
    whole = 2.0 * scale / (SAFETY_FACTOR * unit)  # in units of ``unit``: C * unit * whole = 2 * scale
    return torch.where(change * unit > UNDETERMINED * scale, torch.clamp_min(change, whole), change)
