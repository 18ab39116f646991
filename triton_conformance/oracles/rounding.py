"""Roundings a kernel does, said in its oracle.

The oracle runs in float64 on copies of the kernel's inputs.  Where the kernel
rounds an intermediate to a lower precision on purpose (FlashAttention rounds
the probabilities P to the input dtype before the P @ V dot, as ``tl.dot``
requires), its oracle says so::

    p = rounded_to(attention_weights(q, k, sm_scale), input_dtype(v))
    return p @ v

The oracle's value is then rounded as the kernel's is, and the magnitude pass
(:mod:`.magnitude`) adds that precision's rounding to the bound: a cast to a
coarser dtype inside an oracle is never taken as exact.
"""

from __future__ import annotations

import torch

__all__ = ["input_dtype", "rounded_to", "widened"]

HELD_AS = "_triton_conformance_held_as"  # the dtype a kernel held an oracle's float64 input in


def widened(x: torch.Tensor) -> torch.Tensor:
    """A float64 copy of the kernel's float tensor ``x`` that remembers ``x``'s dtype (:func:`input_dtype`)."""
    wide = x.to(torch.float64)
    if wide is x:
        wide = x.detach().clone()
    setattr(wide, HELD_AS, x.dtype)
    return wide


def input_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype the kernel held an oracle input ``x`` in: the oracle sees float64 copies of the kernel's
    inputs, and a step the kernel takes in its input dtype (P rounded before the second dot of an
    attention) is said as ``rounded_to(p, input_dtype(v))``.  ``x``'s own dtype for any other tensor
    (the oracle run in the input dtype gets the inputs as they are)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"input_dtype: x is a {type(x).__name__}, expected one of the oracle's input tensors")
    return getattr(x, HELD_AS, None) or x.dtype


def rounded_to(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` rounded to ``dtype`` and held in its own dtype again: a rounding the kernel does, said in
    the oracle (the magnitudes then carry it; a cast to ``x``'s own dtype or a finer one is exact)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"rounded_to: dtype={dtype!r}, expected a torch float dtype such as torch.bfloat16")
    return x.to(dtype).to(x.dtype)
