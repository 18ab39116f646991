"""The contract model: what a subject claims about its inputs.

Plain frozen, slotted value objects with no torch import, so that declaring a
subject costs nothing until the battery runs.  Each validator raises
:class:`InvalidContract` naming the field, the value and what was expected.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from triton_conformance.errors import InvalidContract

__all__ = [
    "FLOAT_DTYPES",
    "LAYOUT_CLAIMS",
    "VALUE_CLASSES",
    "MASK_POLICIES",
    "MASK_CLASSES",
    "DOT_PRECISIONS",
    "Dim",
    "Tensor",
    "Mask",
    "Scalar",
    "Tolerance",
    "Contract",
]

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
OTHER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "bool")
LAYOUT_CLAIMS = ("contiguous", "any")
# Adversarial value classes a subject may claim; "ordinary" is always claimed.
VALUE_CLASSES = ("huge", "inf", "nan", "denormal", "ties")
MASK_KINDS = ("bool", "additive")
# "broadcast" is padding-shaped content given as a stride-0 view over rows.
MASK_CLASSES = ("causal", "random", "padding", "all", "fully-masked", "broadcast")
MASK_POLICIES = ("zeros", "nan", "reject")
# tl.dot's input_precision for fp32 inputs; None: the subject has no such dot.
DOT_PRECISIONS = ("tf32", "ieee", None)


def _fail(owner: str, name: str, value: Any, expected: str) -> InvalidContract:
    return InvalidContract(f"{owner}: {name}={value!r}, expected {expected}")


def _dtype_tuple(owner: str, dtypes: Any) -> tuple[str, ...]:
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    dtypes = tuple(str(d).replace("torch.", "") for d in dtypes)
    if not dtypes:
        raise _fail(owner, "dtypes", dtypes, "at least one dtype name, e.g. ('float16', 'float32')")
    for d in dtypes:
        if d not in FLOAT_DTYPES + OTHER_DTYPES:
            raise _fail(owner, "dtypes", d, f"one of {FLOAT_DTYPES + OTHER_DTYPES}")
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


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor input: its symbolic shape, the dtypes and layouts it claims.

    ``layouts="contiguous"`` claims only row-major contiguous inputs that start
    their storage (offset 0, as fresh from ``torch.empty``); the launcher must
    reject anything else, though size-1 dims may carry any stride.
    ``layouts="any"`` claims any strides, storage offsets and stride-0 broadcasts.
    """

    shape: tuple[str, ...]
    dtypes: tuple[str, ...] = ("float32",)
    layouts: str = "contiguous"
    # The shape:large-index cell: True, split into rows along the leading (huge) dim; False, a
    # parameter broadcast over the rows (a weight, a bias), built whole; None: inferred (a
    # parameter when the shape lacks the rows' dim).
    rows: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _shape_tuple("Tensor", self.shape))
        if self.rows not in (None, True, False) or (self.rows is True and not self.shape):
            raise _fail("Tensor", "rows", self.rows, "None (inferred), False, or True for a tensor of rank >= 1")
        object.__setattr__(self, "dtypes", _dtype_tuple("Tensor", self.dtypes))
        if self.layouts not in LAYOUT_CLAIMS:
            raise _fail("Tensor", "layouts", self.layouts, f"one of {LAYOUT_CLAIMS}")

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
    """A scalar parameter drawn from ``[low, high]``; ``kind`` is "float" or "int"."""

    low: float
    high: float
    kind: str = "float"

    def __post_init__(self) -> None:
        if self.kind not in ("float", "int"):
            raise _fail("Scalar", "kind", self.kind, "'float' or 'int'")
        for name in ("low", "high"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise _fail("Scalar", name, v, "a finite number")
        if self.high < self.low:
            raise InvalidContract(f"Scalar: cannot have high={self.high!r} < low={self.low!r}")


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


@dataclass(frozen=True, slots=True)
class Contract:
    """Everything a subject claims.  Built by :func:`triton_conformance.subject`."""

    inputs: Mapping[str, Tensor | Mask]
    dims: Mapping[str, Dim]
    oracle: Callable[..., Any]
    scalars: Mapping[str, Scalar] = field(default_factory=dict)
    deterministic: bool = True
    reduces: str | None = None
    tolerance: Tolerance | None = None
    values: tuple[str, ...] = ()
    accumulate: str = "float32"
    max_elements: int | None = None
    model: Any = None  # a StochasticModel: the oracle is then the deterministic part f of a random output
    error_scale: Callable[..., Any] | None = None  # elementwise magnitude rounding errors scale with
    performance: Any = None  # a performance.Performance: bytes moved / flops done for given dims (nightly, CUDA)
    # What tl.dot does with fp32 inputs on the GPU: "tf32" (Triton's default there:
    # inputs rounded to a 10-bit mantissa, so the tolerance widens on CUDA),
    # "ieee" (full fp32), or None (no tl.dot on fp32 inputs).  No effect on the interpreter.
    dot_precision: str | None = None
    # Inputs outside the claims must be refused, in words: returning a result, even
    # the right one, fails the cell (accepted-out-of-contract), and so does a refusal
    # without a message or from inside triton.  Off: refusing and answering right both pass.
    strict: bool = False
    # Inputs the launcher writes into: they may change, and their contents after the
    # call are judged as outputs (after the returned ones) against the oracle's.
    inplace: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        owner = "Contract"
        if not isinstance(self.inputs, Mapping) or not self.inputs:
            raise _fail(owner, "inputs", self.inputs, "a non-empty mapping of name -> Tensor(...) or Mask(...)")
        for name, spec in self.inputs.items():
            if not (isinstance(name, str) and name.isidentifier()):
                raise _fail(owner, "inputs", name, "identifier names")
            if not isinstance(spec, (Tensor, Mask)):
                raise _fail(owner, f"inputs[{name!r}]", spec, "Tensor(...) or Mask(...)")
        if not isinstance(self.dims, Mapping):
            raise _fail(owner, "dims", self.dims, "a mapping of symbol -> Dim(...)")
        for sym, d in self.dims.items():
            if not isinstance(d, Dim):
                raise _fail(owner, f"dims[{sym!r}]", d, "Dim(min, max)")
        for name, spec in self.inputs.items():
            for sym in spec.shape:
                if sym not in self.dims:
                    raise _fail(owner, f"inputs[{name!r}].shape", sym,
                                f"a dim declared in dims={sorted(self.dims)}")
        used = {s for spec in self.inputs.values() for s in spec.shape}
        unused = sorted(set(self.dims) - used)
        if unused:
            raise _fail(owner, "dims", unused, "every declared dim to appear in some input's shape")
        for name, s in self.scalars.items():
            if not isinstance(s, Scalar):
                raise _fail(owner, f"scalars[{name!r}]", s, "Scalar(low, high)")
            if name in self.inputs:
                raise _fail(owner, "scalars", name, "names distinct from the tensor inputs")
        if self.reduces is not None and self.reduces not in self.dims:
            raise _fail(owner, "reduces", self.reduces, f"one of dims={sorted(self.dims)}")
        if self.tolerance is not None and not isinstance(self.tolerance, Tolerance):
            raise _fail(owner, "tolerance", self.tolerance, "Tolerance(...) or None")
        values = (self.values,) if isinstance(self.values, str) else tuple(self.values)
        for v in values:
            if v not in VALUE_CLASSES:
                raise _fail(owner, "values", v, f"value classes from {VALUE_CLASSES}")
        object.__setattr__(self, "values", values)
        if not isinstance(self.strict, bool):
            raise _fail(owner, "strict", self.strict, "True or False")
        if self.dot_precision not in DOT_PRECISIONS:
            raise _fail(owner, "dot_precision", self.dot_precision, f"one of {DOT_PRECISIONS}")
        if self.accumulate not in FLOAT_DTYPES:
            raise _fail(owner, "accumulate", self.accumulate, f"one of {FLOAT_DTYPES}")
        if self.max_elements is not None and (not isinstance(self.max_elements, int) or self.max_elements < 1):
            raise _fail(owner, "max_elements", self.max_elements, "a positive int or None")
        if sum(1 for s in self.inputs.values() if s.is_mask) > 1:
            raise _fail(owner, "inputs", list(self.inputs), "at most one Mask input")
        self._check_inplace()
        self._check_callable("oracle", self.oracle)
        if self.model is not None:
            self._check_model()
        if self.error_scale is not None:
            self._check_callable("error_scale", self.error_scale)

    def _check_inplace(self) -> None:
        inplace = (self.inplace,) if isinstance(self.inplace, str) else tuple(self.inplace)
        for name in inplace:
            if name not in self.inputs or self.inputs[name].is_mask:
                raise _fail("Contract", "inplace", name, f"names of Tensor inputs from {self.tensor_names}")
        if len(set(inplace)) != len(inplace):
            raise _fail("Contract", "inplace", inplace, "each input named once")
        object.__setattr__(self, "inplace", inplace)

    def _check_model(self) -> None:
        from triton_conformance.model.stochastic import StochasticModel

        if not isinstance(self.model, StochasticModel):
            raise _fail("Contract", "model", self.model, "a StochasticModel such as Dropout(p='p', seed='seed')")
        for name in self.model.scalar_names():
            if name not in self.scalars:
                raise _fail("Contract", "model", self.model.describe(),
                            f"its argument {name!r} declared in scalars={sorted(self.scalars)}")
        if self.model.seed is not None and self.scalars[self.model.seed].kind != "int":
            raise _fail("Contract", f"scalars[{self.model.seed!r}]", self.scalars[self.model.seed],
                        "an int Scalar for the model's seed")

    def _check_callable(self, name: str, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise _fail("Contract", name, fn, "a callable taking the declared inputs by keyword")
        check_accepts(f"Contract: {name}", fn, list(self.inputs) + list(self.scalars))

    # -- derived views -------------------------------------------------
    @property
    def mask_name(self) -> str | None:
        return next((n for n, s in self.inputs.items() if s.is_mask), None)

    @property
    def tensor_names(self) -> list[str]:
        return [n for n, s in self.inputs.items() if not s.is_mask]

    def float_dtypes(self) -> tuple[str, ...]:
        """Float dtypes claimed by any non-mask input, in declaration order."""
        seen: list[str] = []
        for n in self.tensor_names:
            for d in self.inputs[n].dtypes:
                if d in FLOAT_DTYPES and d not in seen:
                    seen.append(d)
        return tuple(seen)


def check_accepts(owner: str, fn: Callable[..., Any], names: list[str]) -> None:
    """Raise InvalidContract unless ``fn(**{n: ... for n in names})`` binds."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without signatures: nothing to check
    try:
        sig.bind(**{n: None for n in names})
    except TypeError as exc:
        raise InvalidContract(
            f"{owner}={getattr(fn, '__qualname__', fn)!r} does not accept the declared inputs "
            f"{names}: {exc}"
        ) from None
