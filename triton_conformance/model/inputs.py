"""The value objects a contract is made of: dims, tensor and mask inputs, scalars and a tolerance.

Plain frozen, slotted value objects with no torch import.  Each validator
raises :class:`InvalidContract` naming the field, the value and what was
expected.  :mod:`.contract` re-exports them beside :class:`Contract`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from triton_conformance.errors import InvalidContract
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.per_device import PerDevice, is_per_device

# Views of the vocabulary tables (``model/vocabulary.py``: what each class draws and the sentence the
# report shows), named for the contract's validators.
FLOAT_DTYPES = vocabulary.DTYPES.names(draw="float")
OTHER_DTYPES = vocabulary.DTYPES.names(draw=("int", "bool"))
# 8-bit floats: subject dtypes, and e8m0 for scales.  Not in FLOAT_DTYPES: nothing accumulates in them, and
# they are probed only where claimed.
FP8_DTYPES = vocabulary.DTYPES.names(draw="fp8")
SCALE_DTYPES = vocabulary.DTYPES.names(draw="scale")
INTEGER_DTYPES = vocabulary.DTYPES.names(draw="int")
# Bytes per element of each dtype: the descriptor rules and the specialization classes count in bytes.
DTYPE_BYTES = {r.name: r.bytes for r in vocabulary.DTYPES.rows}
LAYOUT_CLAIMS = ("contiguous", "any")
# Adversarial value classes a subject may claim; "ordinary" is always claimed.
VALUE_CLASSES = vocabulary.VALUES.names(claim="claimed")
# Value classes that apply, unclaimed, to every subject with an input that declares a
# value_range: "extreme" fills such inputs out to the ends of their range.
RANGED_VALUE_CLASSES = vocabulary.VALUES.names(claim="ranged")
_INTEGER_LIMITS = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
                   "int64": (-2**63, 2**63 - 1), "uint8": (0, 255)}
# What accumulate= may say besides a float dtype: "input" (the kernel accumulates in its input dtype).
ACCUMULATE_INPUT = "input"
MASK_KINDS = ("bool", "additive")
MASK_CLASSES = vocabulary.MASKS.names()
MASK_POLICIES = ("zeros", "nan", "reject")
# tl.dot's input_precision for fp32 inputs; None: the subject has no such dot.  "fp8-fast-accumulate": a dot of
# fp8 inputs whose tensor-core accumulator keeps fewer bits than fp32 on CUDA (Hopper's, without promotion).
DOT_PRECISIONS = ("tf32", "ieee", "fp8-fast-accumulate", None)
SCALAR_KINDS = ("float", "int", "bool")


def _fail(owner: str, name: str, value: Any, expected: str) -> InvalidContract:
    return InvalidContract(f"{owner}: {name}={value!r}, expected {expected}")


def _dtype_tuple(owner: str, dtypes: Any) -> tuple[str, ...]:
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    dtypes = tuple(str(d).replace("torch.", "") for d in dtypes)
    if not dtypes:
        raise _fail(owner, "dtypes", dtypes, "at least one dtype name, e.g. ('float16', 'float32')")
    for d in dtypes:
        if d not in vocabulary.DTYPES:
            raise _fail(owner, "dtypes", d, f"one of {vocabulary.DTYPES.names()}")
    return dtypes


def _shape_tuple(owner: str, shape: Any) -> tuple[str, ...]:
    if isinstance(shape, str):
        shape = tuple(s.strip() for s in shape.replace("(", "").replace(")", "").split(",") if s.strip())
    shape = tuple(shape)
    for s in shape:
        if not (isinstance(s, str) and s.isidentifier()):
            raise _fail(owner, "shape", shape, "a tuple of dim symbols such as ('M', 'N')")
    return shape


@dataclass(frozen=True, slots=True)
class Dim:
    """A symbolic dimension's supported range, inclusive at both ends."""

    min: int = 1
    max: int = 4096

    def __post_init__(self) -> None:
        for name in ("min", "max"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise _fail("Dim", name, v, "a non-negative int")
        if self.max < self.min:
            raise InvalidContract(f"Dim: cannot have max={self.max!r} < min={self.min!r}")

    def admits(self, n: int) -> bool:
        return self.min <= n <= self.max


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor input: its symbolic shape, the dtypes and layouts it claims, and the values it takes.

    ``layouts="contiguous"`` claims the inputs torch's ``is_contiguous()`` accepts:
    row-major strides, wherever the view starts in its storage (a storage offset
    is inside the claim).  Anything strided otherwise (a transpose, a slice with a
    step, padded rows, a stride-0 broadcast) is outside it: the launcher may refuse
    it or compute it right, never get it wrong.  Size-1 dims may carry any stride
    (such an input may be honoured or refused).
    ``layouts="any"`` claims any strides, storage offsets and stride-0 broadcasts.

    - ``value_range=(low, high)``: the finite values the input may hold.  Ordinary
      values are drawn inside it, and the ``values:extreme`` cell fills the input
      out to its ends (default: none declared, ordinary values are N(0, 1)).
    - ``index_of="V"``: an integer input that indexes dim ``V``: its values are drawn
      in ``[0, V)``; ``special=(-100,)`` adds values outside that (an ignore index)
      at some positions.
    - ``same_dtype_as="x"``: this input always has ``x``'s dtype (its ``dtypes``
      default to ``x``'s; the dtype cells change both together).
    - ``dtypes={"cpu": ("float16", "float32"), "cuda": ("float16", "bfloat16", "float32")}``:
      dtypes that differ by device (:class:`~.per_device.PerDevice`, as a tolerance or an
      accumulation may): ``dtypes`` holds them all, in order, and ``device_dtypes`` the
      claim per device, which :meth:`~.contract.Contract.on_device` resolves.
    - ``descriptor=True``: the launcher reads this input through a tensor descriptor (TMA), whose
      rules the hardware enforces (:mod:`.descriptors`): the ``descriptor`` cells hand it views that
      break them, which it must copy or refuse in words.
    """

    shape: tuple[str, ...]
    dtypes: tuple[str, ...] | None = None  # None: ("float32",), or the dtypes of same_dtype_as
    layouts: str = "contiguous"
    value_range: tuple[float, float] | None = None
    index_of: str | None = None
    special: tuple[int, ...] = ()
    same_dtype_as: str | None = None
    # The shape:large-index cell: True, split into rows along the leading (huge) dim; False, a
    # parameter broadcast over the rows (a weight, a bias), built whole; None: inferred (a
    # parameter when the shape lacks the rows' dim).
    rows: bool | None = None
    descriptor: bool = False
    device_dtypes: PerDevice | None = None  # set from a per-device ``dtypes``; ``dtypes`` is then their union

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _shape_tuple("Tensor", self.shape))
        if is_per_device(self.dtypes):
            self._split_device_dtypes()
        if not isinstance(self.descriptor, bool) or (self.descriptor and not 1 <= len(self.shape) <= 5):
            raise _fail("Tensor", "descriptor", self.descriptor, "True (read through a tensor descriptor, which "
                        "needs a rank from 1 to 5) or False")
        if self.rows not in (None, True, False) or (self.rows is True and not self.shape):
            raise _fail("Tensor", "rows", self.rows, "None (inferred), False, or True for a tensor of rank >= 1")
        if self.same_dtype_as is not None:
            if not (isinstance(self.same_dtype_as, str) and self.same_dtype_as.isidentifier()):
                raise _fail("Tensor", "same_dtype_as", self.same_dtype_as, "the name of another input")
            # The dtypes are the other input's, filled in by the Contract.
            object.__setattr__(self, "dtypes", () if self.dtypes is None else _dtype_tuple("Tensor", self.dtypes))
        else:
            object.__setattr__(self, "dtypes", _dtype_tuple("Tensor", ("float32",) if self.dtypes is None
                                                            else self.dtypes))
        if self.layouts not in LAYOUT_CLAIMS:
            raise _fail("Tensor", "layouts", self.layouts, f"one of {LAYOUT_CLAIMS}")
        if self.value_range is not None:
            r = self.value_range
            if (not isinstance(r, (tuple, list)) or len(r) != 2 or not all(_is_number(v) for v in r)
                    or not all(math.isfinite(v) for v in r)):
                raise _fail("Tensor", "value_range", r, "(low, high): two finite numbers")
            if not r[0] < r[1]:
                raise _fail("Tensor", "value_range", tuple(r), "low < high")
            object.__setattr__(self, "value_range", (r[0], r[1]))
            if self.index_of is not None:
                raise _fail("Tensor", "value_range", tuple(r), "None for an index_of= input (its range is [0, dim))")
        if self.index_of is not None:
            if not (isinstance(self.index_of, str) and self.index_of.isidentifier()):
                raise _fail("Tensor", "index_of", self.index_of, "a dim symbol such as 'V'")
            floats = [d for d in self.dtypes if d not in INTEGER_DTYPES]
            if floats:
                raise _fail("Tensor", "dtypes", self.dtypes, f"integer dtypes {INTEGER_DTYPES} for an index_of= input")
        special = (self.special,) if _is_number(self.special) else tuple(self.special)
        for v in special:
            if not isinstance(v, int) or isinstance(v, bool):
                raise _fail("Tensor", "special", v, "integers (such as an ignore index, -100)")
        if special:
            if self.index_of is None:
                raise _fail("Tensor", "special", special, "index_of= set as well (special values of an index input)")
            for d in self.dtypes:
                lo, hi = _INTEGER_LIMITS[d]
                bad = [v for v in special if not lo <= v <= hi]
                if bad:
                    raise _fail("Tensor", "special", bad[0], f"a value representable in {d}, [{lo}, {hi}]")
        object.__setattr__(self, "special", special)

    def _split_device_dtypes(self) -> None:
        if self.same_dtype_as is not None:
            raise _fail("Tensor", "dtypes", self.dtypes, f"none per device with same_dtype_as={self.same_dtype_as!r} "
                        "(it follows that input's dtypes on every device)")
        per = self.dtypes if isinstance(self.dtypes, PerDevice) else \
            PerDevice.of("dtypes", self.dtypes, lambda where, v: _dtype_tuple("Tensor", v), owner="Tensor")
        union = tuple(dict.fromkeys(d for _, ds in per.claims for d in ds))
        object.__setattr__(self, "device_dtypes", per)
        object.__setattr__(self, "dtypes", union)

    def __repr__(self) -> str:
        dtypes = self.device_dtypes if self.device_dtypes is not None else self.dtypes
        fields = [f"{self.shape!r}", f"dtypes={dtypes!r}", f"layouts={self.layouts!r}"]
        for name in ("value_range", "index_of", "special", "same_dtype_as", "descriptor"):
            value = getattr(self, name)
            if value not in (None, (), False):
                fields.append(f"{name}={value!r}")
        return f"Tensor({', '.join(fields)})"

    @property
    def is_mask(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class Mask:
    """A mask input: ``kind="bool"`` (True keeps) or ``"additive"`` (0 or -inf).

    ``fully_masked`` is the subject's policy for an output row whose mask row
    keeps nothing: ``"zeros"``, ``"nan"``, or ``"reject"`` (the launcher raises).
    The mask is applied along its last dim; its leading dims index output rows.
    """

    shape: tuple[str, ...]
    kind: str = "bool"
    fully_masked: str = "zeros"
    layouts: str = "any"
    dtypes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _shape_tuple("Mask", self.shape))
        if self.kind not in MASK_KINDS:
            raise _fail("Mask", "kind", self.kind, f"one of {MASK_KINDS}")
        if self.fully_masked not in MASK_POLICIES:
            raise _fail("Mask", "fully_masked", self.fully_masked, f"one of {MASK_POLICIES}")
        if self.layouts not in LAYOUT_CLAIMS:
            raise _fail("Mask", "layouts", self.layouts, f"one of {LAYOUT_CLAIMS}")
        default = ("bool",) if self.kind == "bool" else ("float32",)
        object.__setattr__(self, "dtypes", _dtype_tuple("Mask", self.dtypes or default))
        if len(self.shape) < 1:
            raise _fail("Mask", "shape", self.shape, "at least one dim")

    @property
    def is_mask(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Scalar:
    """A scalar parameter: ``kind="float"`` or ``"int"`` drawn from ``[low, high]``, or a
    ``kind="bool"`` flag drawn as True or False (it takes no bounds)."""

    low: float | None = None
    high: float | None = None
    kind: str = "float"

    def __post_init__(self) -> None:
        if self.kind not in SCALAR_KINDS:
            raise _fail("Scalar", "kind", self.kind, f"one of {SCALAR_KINDS}")
        if self.kind == "bool":
            for name, default in (("low", False), ("high", True)):
                v = getattr(self, name)
                if v is not None and v is not default:
                    raise _fail("Scalar", name, v, f"no {name} for a bool flag (it is drawn as False and True)")
                object.__setattr__(self, name, default)
            return
        for name in ("low", "high"):
            v = getattr(self, name)
            if not _is_number(v) or not math.isfinite(v):
                raise _fail("Scalar", name, v, "a finite number")
        if self.high < self.low:
            raise InvalidContract(f"Scalar: cannot have high={self.high!r} < low={self.low!r}")

    def representative(self) -> float | int | bool:
        """The one value a cell that runs at a fixed size passes: False for a flag, the lower
        end for an int (a seed, a count), the middle of the range for a float."""
        if self.kind == "bool":
            return False
        return int(self.low) if self.kind == "int" else (self.low + self.high) / 2


@dataclass(frozen=True, slots=True)
class Tolerance:
    """A tolerance override.

    ``rtol``/``atol`` replace the dtype-derived bounds.  With ``reference_k``
    set, the FlashAttention rule applies instead: the kernel's largest error may
    be at most ``reference_k`` times the largest error of the oracle run in the
    input dtype, plus ``floor``.
    """

    rtol: float | None = None
    atol: float | None = None
    reference_k: float | None = None
    floor: float = 0.0

    def __post_init__(self) -> None:
        for name in ("rtol", "atol", "reference_k", "floor"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or v < 0):
                raise _fail("Tolerance", name, v, "a non-negative number or None")
