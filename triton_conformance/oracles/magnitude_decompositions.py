"""The magnitude pass's own decompositions: ops written as ops that have rules, where torch's own
decomposition (if any) uses a prim without one or returns NotImplemented for the arguments at hand.

Each runs on :mod:`.magnitude`'s tracked tensors, so its value is the op's float64 value (up to its own
float64 rounding) and its magnitude is what the rules of the ops it is made of give.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["OWN", "own_decomposition"]

aten = torch.ops.aten


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


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    dims = list(range(x.dim())) if not dim else dim
    return _variance(x, dim, correction, keepdim), x.mean(dims, keepdim=keepdim)


def _product(x, dims, keepdim=False):
    """The product over ``dims`` as a pairwise tree of multiplications (each a rounding, the relative
    errors adding up to ``(n - 1) u`` as in a sequential product); an empty product is exactly 1."""
    if x.dim() == 0:
        return x * 1.0
    dims = list(range(x.dim())) if dims is None else [dims] if isinstance(dims, int) else list(dims)
    dims = sorted({d % x.dim() for d in dims}) or list(range(x.dim()))
    kept = [d for d in range(x.dim()) if d not in dims]
    t = x.permute(kept + dims).reshape([x.shape[d] for d in kept] + [-1])
    if t.shape[-1] == 0:
        t = torch.ones_like(t[..., :1].expand(*t.shape[:-1], 1))
    while t.shape[-1] > 1:  # an odd one out is carried to the next level as it is
        pairs = t[..., 0:t.shape[-1] - 1:2] * t[..., 1::2]
        t = torch.cat([pairs, t[..., -1:]], -1) if t.shape[-1] % 2 else pairs
    t = t.squeeze(-1)
    if keepdim:
        for d in dims:
            t = t.unsqueeze(d)
    return t


def _addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """``beta * self + alpha * sum_b batch1[b] @ batch2[b]`` (``self`` ignored at ``beta = 0``, NaN included)."""
    total = torch.bmm(batch1, batch2).sum(0)
    total = total if alpha == 1 else alpha * total
    return total if beta == 0 else beta * self + total


def _shrink_backward(grad, x, lambd=0.5):
    """hardshrink's and softshrink's backward: the gradient where ``|x| > lambd``, else 0 (a selection)."""
    return torch.where((x >= -lambd) & (x <= lambd), torch.zeros_like(grad), grad)


def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """``_trilinear`` by its definition: each factor unsqueezed at its ``expand`` dims, the three
    multiplied, the product summed over ``sumdim`` (what ``F.bilinear`` computes as a batched GEMM)."""
    def grown(t, dims):
        for d in sorted(dims):
            t = t.unsqueeze(d)
        return t

    product = grown(i1, expand1) * grown(i2, expand2) * grown(i3, expand3)
    return product.sum(list(sumdim)) if len(sumdim) else product


OWN: dict[Any, Callable[..., Any]] = {
    aten.var.correction: lambda x, dim=None, *, correction=None, keepdim=False: _variance(x, dim, correction,
                                                                                          keepdim),
    aten.std.correction: lambda x, dim=None, *, correction=None, keepdim=False: _variance(
        x, dim, correction, keepdim).sqrt(),
    aten.var_mean.correction: _var_mean,
    aten.std_mean.correction: lambda x, dim=None, *, correction=None, keepdim=False: (lambda vm: (
        vm[0].sqrt(), vm[1]))(_var_mean(x, dim, correction=correction, keepdim=keepdim)),
    # torch's decomposition of a product with keepdim reaches prims.broadcast_in_dim: ours keeps the dims
    aten.prod.default: lambda x, *, dtype=None: _product(x, None),
    aten.prod.dim_int: lambda x, dim, keepdim=False, *, dtype=None: _product(x, dim, keepdim),
    aten.addbmm.default: _addbmm,
    aten.hardshrink_backward.default: _shrink_backward,
    aten.softshrink_backward.default: _shrink_backward,
    aten._trilinear.default: _trilinear,
}
# Prims, by name (torch.ops.prims loads with torch._refs); torch decomposes prod and cumprod into prims.prod.
_PRIMS: dict[str, Callable[..., Any]] = {
    "prims.var.default": lambda x, dims, correction=1, *, output_dtype=None: _variance(x, dims, correction, False),
    "prims.prod.default": lambda x, dims, *, output_dtype=None: _product(x, dims),
}


def own_decomposition(func) -> Callable[..., Any] | None:
    """This module's decomposition of ``func``, or None."""
    return OWN.get(func) or _PRIMS.get(str(func))
