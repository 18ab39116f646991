"""Attention-style masks: which keys (last dim) each row may attend to."""

from __future__ import annotations

import torch

from triton_conformance.model.contract import MASK_CLASSES

__all__ = ["fill_mask"]


def fill_mask(shape: tuple[int, ...], mask_class: str, seed: int) -> torch.Tensor:
    """A boolean keep-mask of ``shape`` (..., rows, keys) for ``mask_class``.

    Every row keeps at least one key, except in ``fully-masked``, where at least
    one row keeps none.
    """
    gen = torch.Generator().manual_seed(seed)
    rows, keys = (shape[-2] if len(shape) >= 2 else 1), shape[-1]
    lead = shape[:-2] if len(shape) >= 2 else ()
    i = torch.arange(rows).view(-1, 1)
    j = torch.arange(keys).view(1, -1)
    if mask_class == "causal":
        keep = (j <= i).expand(*lead, rows, keys)
    elif mask_class in ("padding", "broadcast"):
        lengths = torch.randint(1, max(keys, 1) + 1, lead + (1, 1), generator=gen)
        keep = (j < lengths).expand(*lead, rows, keys)
    elif mask_class == "all":
        keep = torch.ones(shape, dtype=torch.bool)
    elif mask_class in ("random", "fully-masked"):
        keep = torch.rand(shape, generator=gen) < 0.5
        first = torch.randint(0, max(keys, 1), lead + (rows, 1), generator=gen)
        keep = keep | (j == first)  # at least one key per row
        if mask_class == "fully-masked" and keep.numel():
            dead = torch.rand(lead + (rows, 1), generator=gen) < 0.3
            if not dead.any():
                dead.view(-1)[torch.randint(0, dead.numel(), (1,), generator=gen)] = True
            keep = keep & ~dead
    else:
        raise ValueError(f"fill_mask: mask_class={mask_class!r}, expected one of {MASK_CLASSES}")
    return keep.reshape(shape).clone()
