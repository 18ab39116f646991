"""The magnitude rules of ops that pick elements: maxima, sorts, medians, poolings, strided views.

Each output element is an input element (the one the op picked), so its magnitude is that element's
(:mod:`.magnitude_rules` dispatches here; ``mag`` is the input's magnitude in float64).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["RULES", "apply"]

_SELECTIONS = {"amax", "amin", "max", "min"}
_SORTS = {"sort", "topk"}
# Selections that return (values, indices along a dim): the magnitudes gathered with the indices.
_INDEXED = {"cummax", "cummin", "kthvalue", "median", "nanmedian", "mode"}
# Max poolings: (values, indices into the flattened trailing 2 or 3 dims).
_POOLED = {"adaptive_max_pool2d": 2, "adaptive_max_pool3d": 3, "max_pool2d_with_indices": 2,
           "max_pool3d_with_indices": 3}
# Distinct values (sorted): each is every element equal to it.
_DISTINCT = {"_unique2", "unique_dim", "unique_consecutive"}
RULES = {"selection": _SELECTIONS, "sort": _SORTS, "indexed": _INDEXED, "pooled": _POOLED, "distinct": _DISTINCT}


def apply(rule: str, name: str, values: tuple, vkwargs: dict, mag: torch.Tensor, out: Any) -> Any:
    """The magnitude of ``out``, the result of the op ``name`` on ``values``, under ``rule``."""
    return _BY_RULE[rule](name, values, vkwargs, mag, out)


def _selection(name, values, vkwargs, mag, out):
    """The magnitude of the element a max or min picked (the largest, on ties)."""
    x = values[0]
    picked = out[0] if isinstance(out, (tuple, list)) else out
    if name in ("max", "min") and len(values) == 1 and not vkwargs:  # over everything
        return torch.where(x == picked, mag, torch.zeros_like(mag)).max()
    dims = values[1] if len(values) > 1 else vkwargs.get("dim", None)
    keepdim = bool(values[2] if len(values) > 2 else vkwargs.get("keepdim", False))
    dims = [dims] if isinstance(dims, int) else list(dims) if dims else list(range(x.dim()))
    broad = picked
    if not keepdim:
        for d in sorted(dd % max(x.dim(), 1) for dd in dims):
            broad = broad.unsqueeze(d)
    chosen = torch.where(x == broad, mag, torch.zeros_like(mag)).amax(dim=dims, keepdim=keepdim)
    if isinstance(out, (tuple, list)):  # (values, indices)
        return (chosen,) + tuple(out[1:])
    return chosen


def _sorted(name, values, vkwargs, mag, out):
    """Sorts and top-k: the magnitudes gathered with the indices."""
    indices = out[1]
    if name == "topk":
        dim = values[2] if len(values) > 2 else vkwargs.get("dim", -1)
    else:
        dim = values[1] if len(values) > 1 and isinstance(values[1], int) else vkwargs.get("dim", -1)
    return (torch.gather(mag, dim, indices),) + tuple(out[1:])


def _indexed(name, values, vkwargs, mag, out):
    """A median, mode, k-th value or running max/min: the magnitude of the element it picked (gathered
    with its indices; over a whole tensor, the largest among the elements equal to the value)."""
    x = values[0]
    if not isinstance(out, (tuple, list)):  # median or nanmedian of everything
        return torch.where(x == out, mag, torch.zeros_like(mag)).max() if x.numel() else torch.zeros_like(out)
    if x.dim() == 0:
        return (mag.clone(),) + tuple(out[1:])

    def arg(i, key, default):
        return values[i] if len(values) > i else vkwargs.get(key, default)

    if name == "kthvalue":
        dim, keepdim = arg(2, "dim", -1), bool(arg(3, "keepdim", False))
    elif name in ("cummax", "cummin"):
        dim, keepdim = arg(1, "dim", 0), True
    else:
        dim, keepdim = arg(1, "dim", -1), bool(arg(2, "keepdim", False))
    indices = out[1] if keepdim else out[1].unsqueeze(dim)
    picked = torch.gather(mag, dim, indices)
    return (picked if keepdim else picked.squeeze(dim),) + tuple(out[1:])


def _pooled(name, values, vkwargs, mag, out):
    """A max pooling: the magnitudes gathered with its indices into the flattened trailing dims."""
    spatial = _POOLED[name]
    picked, indices = out[0], out[1]
    gathered = mag.flatten(-spatial).gather(-1, indices.flatten(-spatial))
    return (gathered.reshape(picked.shape),) + tuple(out[1:])


def _strided(name, values, vkwargs, mag, out):
    """``as_strided``: a view of the storage, so the magnitudes are laid out in the storage as the
    values are (an element outside the tracked view carries its own size) and viewed the same way."""
    x = values[0]
    n = x.untyped_storage().nbytes() // x.element_size()
    flat = x.as_strided((n,), (1,), 0).abs().to(torch.float64)
    at = torch.arange(n, device=x.device)
    flat[at.as_strided(x.shape, x.stride(), x.storage_offset()).reshape(-1)] = mag.to(torch.float64).reshape(-1)
    size, stride = values[1], values[2]
    offset = values[3] if len(values) > 3 else vkwargs.get("storage_offset")
    return flat[at.as_strided(size, stride, x.storage_offset() if offset is None else offset)]


def _distinct(name, values, vkwargs, mag, out):
    """``torch.unique`` (sorted): each distinct value carries the largest magnitude among the elements equal
    to it (NaNs, each distinct, carry none: they are compared exactly)."""
    x, picked = values[0], out[0]
    if name == "unique_consecutive":
        return _runs(x, values, vkwargs, mag, out)
    if name == "unique_dim" or x.numel() == 0:
        dim = values[1] if len(values) > 1 else vkwargs["dim"]
        if x.numel() == 0:
            return (torch.zeros_like(picked, dtype=mag.dtype),) + tuple(out[1:])
        # whole slices along dim: the slice equal to each distinct one, elementwise the largest
        slices = x.movedim(dim, 0).reshape(x.shape[dim], -1)
        found = picked.movedim(dim, 0).reshape(picked.shape[dim], -1)
        same = (slices[None] == found[:, None]).all(-1)  # [distinct, slice]
        m = mag.movedim(dim, 0).reshape(x.shape[dim], -1)
        best = torch.where(same[..., None], m[None], torch.zeros_like(m[None])).amax(1)
        return (best.reshape(picked.movedim(dim, 0).shape).movedim(0, dim),) + tuple(out[1:])
    where = torch.searchsorted(picked, x.reshape(-1)).clamp_max(max(picked.numel() - 1, 0))
    hit = picked[where] == x.reshape(-1)
    best = torch.zeros(picked.shape, dtype=mag.dtype, device=mag.device)
    best = best.scatter_reduce(0, where[hit], mag.reshape(-1)[hit], "amax")
    return (best,) + tuple(out[1:])


def _runs(x, values, vkwargs, mag, out):
    """``torch.unique_consecutive``: each output is one run of equal neighbours (whole slices along ``dim``
    where one is given), and carries the largest magnitude in its run."""
    dim = values[3] if len(values) > 3 else vkwargs.get("dim")
    if dim is None:
        rows, m = x.reshape(-1, 1), mag.reshape(-1, 1)
    else:
        rows, m = x.movedim(dim, 0).reshape(x.shape[dim], -1), mag.movedim(dim, 0).reshape(x.shape[dim], -1)
    if rows.shape[0] == 0:
        return (torch.zeros_like(out[0], dtype=mag.dtype),) + tuple(out[1:])
    new_run = torch.ones(rows.shape[0], dtype=torch.long, device=x.device)
    new_run[1:] = (rows[1:] != rows[:-1]).any(-1).long()  # NaN != NaN: a NaN starts a run of its own
    run = new_run.cumsum(0) - 1
    best = torch.zeros((int(run[-1]) + 1, rows.shape[1]), dtype=mag.dtype, device=mag.device)
    best = best.scatter_reduce(0, run[:, None].expand_as(m), m, "amax")
    shape = out[0].shape if dim is None else out[0].movedim(dim, 0).shape
    best = best.reshape(shape)
    return (best if dim is None else best.movedim(0, dim),) + tuple(out[1:])


_BY_RULE = {"selection": _selection, "distinct": _distinct, "sort": _sorted, "indexed": _indexed, "pooled": _pooled, "strided": _strided}
