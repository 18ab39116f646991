"""The hardware's rules for a tensor descriptor (a TMA tensor map), as plain data and one check.

A launcher that builds ``triton.tools.tensor_descriptor.TensorDescriptor`` on the host, or a kernel
that calls ``tl.make_tensor_descriptor``, hands the GPU's copy engine a base address, a shape, strides
and a block shape.  Hopper's ``cuTensorMapEncodeTiled`` takes them only if:

- ``base``: the base address is 16-byte aligned;
- ``strides``: every stride but the last is a multiple of 16 bytes;
- ``last-dim``: the last dim is contiguous (stride 1: a tensor map has no innermost stride);
- ``block``: each block dim is at most 256 elements, and the block's last dim spans at least 16 bytes.

A descriptor that breaks one is an illegal instruction, a misaligned-address fault or garbage on the
GPU; triton's own checks are ``assert`` statements (gone under ``python -O``).  The interpreter reads
any address, so the battery checks every descriptor a launch builds against :func:`descriptor_breaches`
(:mod:`triton_conformance.compat.descriptors` records them).  Loads of a block past the tensor's shape
are zero-filled (or NaN-filled) by the hardware: defined, not an out-of-bounds read.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton_conformance.model.vocabulary as vocabulary

__all__ = ["ALIGNMENT", "MAX_BLOCK_DIM", "DESCRIPTOR_RULES", "DESCRIPTOR_LAYOUT_CLASSES", "DescriptorBreach",
           "DescriptorUse", "descriptor_breaches"]

ALIGNMENT = 16  # bytes: the base address, and every stride but the last
MAX_BLOCK_DIM = 256  # elements in each dim of a block (a tensor map's boxDim)
MIN_INNER_BLOCK_BYTES = 16  # the block's last dim spans at least this much

# rule name -> what it says, for messages, the report and the docs.
DESCRIPTOR_RULES = {
    "base": f"the base address is {ALIGNMENT}-byte aligned",
    "strides": f"every stride but the last is a multiple of {ALIGNMENT} bytes",
    "last-dim": "the last dim is contiguous (stride 1)",
    "block": f"each block dim is at most {MAX_BLOCK_DIM} elements, and the block's last dim spans at least "
             f"{MIN_INNER_BLOCK_BYTES} bytes",
}

# The layouts that break one rule each while staying legal torch views: the classes of the ``descriptor``
# cells, rows of the vocabulary table ``vocabulary.DESCRIPTOR_LAYOUTS`` (each with the rule it breaks, its
# draw and its sentence).
DESCRIPTOR_LAYOUT_CLASSES = vocabulary.DESCRIPTOR_LAYOUTS.names()


@dataclass(frozen=True, slots=True)
class DescriptorBreach:
    """One rule a descriptor breaks (a key of :data:`DESCRIPTOR_RULES`), and the numbers that break it."""

    rule: str
    detail: str


@dataclass(frozen=True, slots=True)
class DescriptorUse:
    """A descriptor a launch built that breaks the hardware's rules: where it was built (``"host
    TensorDescriptor"`` or ``"tl.make_tensor_descriptor"``), what it was built on, and each breach."""

    where: str
    address: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    breaches: tuple[DescriptorBreach, ...]

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(b.rule for b in self.breaches)

    def describe(self) -> str:
        broken = "; ".join(f"{DESCRIPTOR_RULES[b.rule]}, but {b.detail}" for b in self.breaches)
        return (f"{self.where} on a {self.shape} {self.dtype} tensor (strides {self.strides}, block "
                f"{self.block_shape}) breaks the hardware's rules: {broken}")

    def to_dict(self) -> dict:
        return {"where": self.where, "dtype": self.dtype, "shape": list(self.shape), "strides": list(self.strides),
                "block_shape": list(self.block_shape), "rules": list(self.rules),
                "address_mod_16": self.address % ALIGNMENT}


def descriptor_breaches(address: int, itemsize: int, strides: tuple[int, ...],
                        block_shape: tuple[int, ...] | None = None) -> tuple[DescriptorBreach, ...]:
    """The rules a descriptor at byte ``address`` over elements of ``itemsize`` bytes with ``strides`` (in
    elements) and ``block_shape`` breaks; ``block_shape=None``: the block is not known (a drawn layout)."""
    found = []
    if address % ALIGNMENT:
        found.append(DescriptorBreach("base", f"it is {address % ALIGNMENT} bytes past a {ALIGNMENT}-byte boundary"))
    odd = [(d, s) for d, s in enumerate(strides[:-1]) if (s * itemsize) % ALIGNMENT]
    if odd:
        d, s = odd[0]
        found.append(DescriptorBreach("strides", f"dim {d}'s stride is {s} elements = {s * itemsize} bytes"))
    if strides and strides[-1] != 1:
        found.append(DescriptorBreach("last-dim", f"the last stride is {strides[-1]}"))
    if block_shape:
        big = [(d, b) for d, b in enumerate(block_shape) if b > MAX_BLOCK_DIM]
        if big:
            found.append(DescriptorBreach("block", f"block dim {big[0][0]} is {big[0][1]} elements"))
        elif block_shape[-1] * itemsize < MIN_INNER_BLOCK_BYTES:
            found.append(DescriptorBreach("block", f"the block's last dim is {block_shape[-1]} elements = "
                                          f"{block_shape[-1] * itemsize} bytes"))
    return tuple(found)
