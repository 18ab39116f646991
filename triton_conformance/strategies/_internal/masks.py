"""Attention-style masks: which keys (last dim) each row may attend to."""

from __future__ import annotations

import torch

from triton_conformance.errors import InvalidArgument
import triton_conformance.model.vocabulary as vocabulary

__all__ = ["fill_mask"]


def fill_mask(shape: tuple[int, ...], mask_class: str, seed: int) -> torch.Tensor:
    """A boolean keep-mask of ``shape`` (..., rows, keys) for ``mask_class``, as its row of
    ``vocabulary.MASKS`` says (its ``draw``).

    Every row keeps at least one key, except in a ``dead-rows`` draw (``fully-masked``), where at least
    one row keeps none.
    """
    if mask_class not in vocabulary.MASKS:
        raise InvalidArgument(f"fill_mask: mask_class={mask_class!r}, expected one of {vocabulary.MASKS.names()}")
    fill = vocabulary.MASKS[mask_class].draw
    gen = torch.Generator().manual_seed(seed)
    rows, keys = (shape[-2] if len(shape) >= 2 else 1), shape[-1]
    lead = shape[:-2] if len(shape) >= 2 else ()
    i = torch.arange(rows).view(-1, 1)
    j = torch.arange(keys).view(1, -1)
    if fill == "causal":
        keep = (j <= i).expand(*lead, rows, keys)
    elif fill == "prefix":
        lengths = torch.randint(1, max(keys, 1) + 1, lead + (1, 1), generator=gen)
        keep = (j < lengths).expand(*lead, rows, keys)
    elif fill == "all":
        keep = torch.ones(shape, dtype=torch.bool)
    elif fill in ("random", "dead-rows"):
        keep = torch.rand(shape, generator=gen) < 0.5
        first = torch.randint(0, max(keys, 1), lead + (rows, 1), generator=gen)
        keep = keep | (j == first)  # at least one key per row
        if fill == "dead-rows" and keep.numel():
            dead = torch.rand(lead + (rows, 1), generator=gen) < 0.3
            if not dead.any():
                dead.view(-1)[torch.randint(0, dead.numel(), (1,), generator=gen)] = True
            keep = keep & ~dead
    else:
        raise InvalidArgument(f"fill_mask: the draw {fill!r} of mask class {mask_class!r}, expected one of "
                              f"'causal', 'random', 'prefix', 'all', 'dead-rows'")
    return keep.reshape(shape).clone()
