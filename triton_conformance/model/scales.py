"""Scales as part of a tensor: ``Scale(...)`` declares an input that dequantizes another.

A quantized input ``a`` (fp8, say) comes with a scale tensor; the pair means ``a * scale``
(or ``a / scale``), broadcast over blocks of ``a``.  ``block`` gives each of ``a``'s dims
the run of elements one scale covers: ``None`` for the whole dim, so

- per tensor: ``block=(None, None)``; per row or token: ``(1, None)``;
- per group of G along the last dim: ``(1, G)``; per 128 x 128 block: ``(128, 128)``.

The scale's shape is tied to ``a``'s dims (``cdiv(dim, block)``, 1 for ``None``), so the
strategies draw the pair consistently, with a layout for each, and the oracle sees ``a``
dequantized in float64.  Plain data: no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from triton_conformance.errors import InvalidContract
from triton_conformance.model.inputs import FP8_DTYPES, Tensor, _fail

__all__ = ["SCALE_APPLIES", "SCALE_DTYPES_ALLOWED", "Scale", "check_scales", "scale_shape"]

SCALE_APPLIES = ("multiply", "divide")
SCALE_DTYPES_ALLOWED = ("float32", "float8_e8m0fnu")


@dataclass(frozen=True, slots=True)
class Scale(Tensor):
    """The scale tensor of input ``of``, whose dims it shares (``shape`` names them, as ``of`` does)."""

    of: str = ""
    block: tuple[Any, ...] = ()
    applies: str = "multiply"

    def __post_init__(self) -> None:
        Tensor.__post_init__(self)
        if not (isinstance(self.of, str) and self.of.isidentifier()):
            raise _fail("Scale", "of", self.of, "the name of the quantized input it scales")
        block = tuple(self.block) if isinstance(self.block, (tuple, list)) else self.block
        if (not isinstance(block, tuple) or len(block) != len(self.shape) or
                any(b is not None and (not isinstance(b, int) or isinstance(b, bool) or b < 1) for b in block)):
            raise _fail("Scale", "block", self.block, f"one entry per dim of {self.shape}: a positive int (the "
                        "elements one scale covers) or None (the whole dim)")
        object.__setattr__(self, "block", block)
        if self.applies not in SCALE_APPLIES:
            raise _fail("Scale", "applies", self.applies, f"one of {SCALE_APPLIES}")
        bad = [d for d in self.dtypes if d not in SCALE_DTYPES_ALLOWED]
        if bad:
            raise _fail("Scale", "dtypes", bad[0], f"scale dtypes from {SCALE_DTYPES_ALLOWED}")


def check_scales(inputs: Mapping[str, Any]) -> None:
    """Raise InvalidContract unless each Scale names a Tensor input (not a scale) with the same dims."""
    for name, spec in inputs.items():
        if not isinstance(spec, Scale):
            continue
        owner = inputs.get(spec.of)
        if not isinstance(owner, Tensor) or isinstance(owner, Scale) or owner.is_mask:
            raise _fail("Contract", f"inputs[{name!r}].of", spec.of, "the name of a Tensor input it scales, one of "
                        f"{[n for n, s in inputs.items() if isinstance(s, Tensor) and not isinstance(s, Scale)]}")
        if tuple(owner.shape) != tuple(spec.shape):
            raise InvalidContract(f"Contract: inputs[{name!r}].shape={spec.shape!r}, expected the dims of "
                                  f"{spec.of!r}, {owner.shape!r}")
        if not set(owner.dtypes) & set(FP8_DTYPES + ("float16", "bfloat16", "float32")):
            raise _fail("Contract", f"inputs[{spec.of!r}].dtypes", owner.dtypes, "a float dtype for a scaled input")


def scale_shape(spec: Scale, dims: Mapping[str, int]) -> tuple[int, ...]:
    """The scale tensor's shape at ``dims``: ``cdiv(dim, block)`` per dim, 1 where the block is the whole dim."""
    return tuple(1 if b is None else -(-int(dims[s]) // b) for s, b in zip(spec.shape, spec.block))
