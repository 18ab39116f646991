"""Build the exact input tensors a spec describes, embedded in sentinel storage.

Every input is a strided view into a larger buffer.  Everything in the buffer
that is not one of the view's elements (gaps, padding, the storage offset, a
guard band after the end) holds a sentinel, so a read through a wrong stride or
past the end changes the answer.  Building the same spec with the other
sentinel tells such reads apart from honest ones.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from triton_conformance.model.contract import Contract
from triton_conformance.model.scales import Scale, scale_shape
from triton_conformance.model.spec import GUARD_ELEMENTS, Spec, strides_for
from triton_conformance.strategies._internal.masks import fill_mask
from triton_conformance.strategies._internal.values import fill_indices, fill_scales, fill_values

__all__ = ["BuiltInputs", "build_inputs", "torch_dtype", "SENTINELS"]

# Two sentinels: NaN is loud; a large finite number survives max() and where().
SENTINELS = ("nan", "big")


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"torch_dtype: name={name!r}, expected a torch dtype name")
    return dtype


@functools.lru_cache(maxsize=None)
def _sentinel_value(dtype: torch.dtype, which: str) -> float | bool:
    if dtype == torch.bool:
        return which == "big"
    if dtype.is_floating_point:
        return math.nan if which == "nan" else float(torch.finfo(dtype).max) / 8
    return -77 if which == "nan" else 99


@dataclass
class BuiltInputs:
    """The views handed to the launcher, and the buffers they live in."""

    views: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    snapshots: dict[str, torch.Tensor]

    def mutated(self, inplace: tuple[str, ...] = ()) -> list[str]:
        """Inputs whose storage (elements, gaps or guard band) changed since building;
        for an ``inplace`` input, only the storage around its elements counts."""
        return [n for n, b in self.buffers.items()
                if not torch.equal(_bytes_of(b)[self._around(n)] if n in inplace else _bytes_of(b),
                                   self.snapshots[n][self._around(n)] if n in inplace else self.snapshots[n])]

    def _around(self, name: str) -> torch.Tensor:
        """Boolean over input ``name``'s buffer bytes: True outside its view's elements."""
        buffer, view = self.buffers[name], self.views[name]
        outside = torch.ones(buffer.numel(), dtype=torch.bool, device=buffer.device)
        if view.numel():
            at = torch.arange(buffer.numel(), device=buffer.device).as_strided(
                view.shape, view.stride(), view.storage_offset())
            outside[at.reshape(-1)] = False
        return outside.repeat_interleave(buffer.element_size())

    def as_float64(self) -> dict[str, torch.Tensor]:
        return {n: (v.to(torch.float64) if v.dtype != torch.bool else v.clone()) for n, v in self.views.items()}


def _bytes_of(buffer: torch.Tensor) -> torch.Tensor:
    """A buffer's bytes, where it lives (a view, not a copy): compared bit for bit, NaNs included."""
    return buffer.detach().view(torch.uint8)


def input_shape(contract: Contract, name: str, spec: Spec) -> tuple[int, ...]:
    decl = contract.inputs[name]
    if isinstance(decl, Scale):
        return scale_shape(decl, spec.dims)
    return tuple(spec.dims[s] for s in decl.shape)


def build_inputs(contract: Contract, spec: Spec, *, sentinel: str = "nan", device: str = "cpu",
                 contents_of: BuiltInputs | None = None) -> BuiltInputs:
    """Materialise every input of ``spec`` as a view into sentinel-filled storage.

    ``contents_of``: a build of the same spec (in either sentinel), whose elements as built are copied
    instead of drawn again: the same bits, without the draws (the calls of one example share them)."""
    views, buffers, snapshots = {}, {}, {}
    for index, (name, decl) in enumerate(contract.inputs.items()):
        shape = input_shape(contract, name, spec)
        dtype = torch_dtype(spec.dtypes[name])
        layout = spec.layout(name)
        strides, offset, span = strides_for(shape, layout)
        buffer = torch.full((span + GUARD_ELEMENTS,), _sentinel_value(dtype, sentinel), dtype=dtype, device=device)
        # Contents are drawn for the physical shape: a broadcast dim holds one value.
        physical = tuple(1 if d in layout.broadcast else s for d, s in enumerate(shape))
        phys_strides = tuple(0 if d in layout.broadcast else s for d, s in enumerate(strides))
        seed = spec.seed * 7919 + index
        values = None if contents_of is not None else _drawn(decl, spec, physical, dtype, seed, device)
        if buffer.numel() and all(shape):
            if values is None:  # the other build's pristine storage, where its elements lie
                values = contents_of.snapshots[name].view(dtype).as_strided(physical, phys_strides, offset)
            buffer.as_strided(physical, phys_strides, offset).copy_(values.to(device))
        view = buffer.as_strided(shape, strides, offset)
        views[name], buffers[name] = view, buffer
        snapshots[name] = _bytes_of(buffer).clone()
    return BuiltInputs(views=views, buffers=buffers, snapshots=snapshots)


def _drawn(decl, spec: Spec, physical: tuple[int, ...], dtype: torch.dtype, seed: int, device: str) -> torch.Tensor:
    """An input's contents for its physical shape, drawn from ``seed``."""
    if decl.is_mask:
        keep = fill_mask(physical, spec.mask or "all", seed)
        if decl.kind == "bool":
            return keep.to(dtype)
        return torch.where(keep, 0.0, -math.inf).to(dtype)
    if isinstance(decl, Scale):
        return fill_scales(physical, dtype, seed, device=device)
    if decl.index_of is not None:
        return fill_indices(physical, spec.dims[decl.index_of], decl.special, seed, device=device).to(dtype)
    return fill_values(physical, dtype, spec.values, seed, device=device, value_range=decl.value_range).to(dtype)
