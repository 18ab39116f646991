"""Performance contracts: the bytes a subject must move or the FLOPs it must do.

A subject declares them with ``@subject(..., performance=Performance(...))``::

    Performance(
        dims={"N": 1 << 20},                               # the measured problem size
        dtype="float16",                                  # every tensor input's dtype there
        bytes=lambda dims, dtypes: 3 * dims["N"] * dtypes["x"].itemsize,
        baseline=lambda x, y: x + y,                      # torch doing the same job
    )

``bytes`` and ``flops`` take ``dims`` (symbol -> int) and ``dtypes`` (input
name -> dtype name, a ``str`` with an ``itemsize``).  With both given the
kernel is judged against whichever its roofline says binds.  The ``performance``
cell (CUDA only) checks the subject once at that size, times it and the
baseline (see :mod:`triton_conformance.conformance.kinds.performance.peaks`), and reports the
achieved GB/s or TFLOP/s as a fraction of the device's measured peak.

Declaring imports neither torch nor triton; measuring does.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from triton_conformance.errors import InvalidContract
from triton_conformance.model.contract import (
    FLOAT_DTYPES,
    OTHER_DTYPES,
    Contract,
    check_accepts,
)

__all__ = [
    "FIGURE_KEYS",
    "ITEMSIZE",
    "DtypeName",
    "Performance",
    "check_performance",
    "figures_line",
    "junit_properties",
]

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
            "int64": 8, "uint8": 1, "bool": 1}
# The figures a measured cell carries in CellResult.details, in report order.
FIGURE_KEYS = ("achieved", "unit", "peak", "fraction", "kernel_ms", "baseline_ms", "speedup", "bound")


class DtypeName(str):
    """A dtype name (``"float16"``) that also knows its size in bytes: ``DtypeName("float16").itemsize == 2``."""

    __slots__ = ()

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[str(self)]


def _fail(name: str, value: Any, expected: str) -> InvalidContract:
    return InvalidContract(f"Performance: {name}={value!r}, expected {expected}")


def _takes_two(name: str, fn: Any) -> None:
    if not callable(fn):
        raise _fail(name, fn, "a callable (dims, dtypes) -> number")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without signatures: nothing to check
    try:
        sig.bind(None, None)
    except TypeError as exc:
        raise _fail(name, getattr(fn, "__qualname__", fn), f"a callable taking (dims, dtypes): {exc}") from None


@dataclass(frozen=True, slots=True)
class Performance:
    """A performance contract: work per call at a measured size, and what to compare against.

    - ``dims``: symbol -> size, the problem measured; every contract dim, inside its range.
    - ``dtype``: a dtype name for every tensor input, or input name -> dtype name.
    - ``bytes``: ``(dims, dtypes) -> int``, the bytes one call must move at least.
    - ``flops``: ``(dims, dtypes) -> int``, the floating-point operations one call must do.
    - ``baseline``: a torch function of the same keywords as the launcher, timed beside it.
    - ``scalars``: values for the contract's scalars (default: the middle of each range).
    """

    dims: Mapping[str, int]
    dtype: str | Mapping[str, str] = "float32"
    bytes: Callable[[Mapping[str, int], Mapping[str, DtypeName]], float] | None = None
    flops: Callable[[Mapping[str, int], Mapping[str, DtypeName]], float] | None = None
    baseline: Callable[..., Any] | None = None
    scalars: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.dims, Mapping) or not self.dims:
            raise _fail("dims", self.dims, "a non-empty mapping of dim symbol -> size, e.g. {'N': 1 << 20}")
        for sym, n in self.dims.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise _fail(f"dims[{sym!r}]", n, "a positive int")
        object.__setattr__(self, "dims", dict(self.dims))
        dtypes = self.dtype.values() if isinstance(self.dtype, Mapping) else [self.dtype]
        for d in dtypes:
            if str(d).replace("torch.", "") not in ITEMSIZE:
                raise _fail("dtype", d, f"a dtype name from {FLOAT_DTYPES + OTHER_DTYPES}, or a mapping "
                                        "input name -> dtype name")
        if isinstance(self.dtype, Mapping):
            object.__setattr__(self, "dtype", {k: str(v).replace("torch.", "") for k, v in self.dtype.items()})
        else:
            object.__setattr__(self, "dtype", str(self.dtype).replace("torch.", ""))
        if self.bytes is None and self.flops is None:
            raise InvalidContract("Performance: bytes=None and flops=None, expected at least one of them: "
                                  "bytes=lambda dims, dtypes: ... or flops=lambda dims, dtypes: ...")
        for name in ("bytes", "flops"):
            if getattr(self, name) is not None:
                _takes_two(name, getattr(self, name))
        if self.baseline is not None and not callable(self.baseline):
            raise _fail("baseline", self.baseline, "a torch callable taking the launcher's keywords, or None")
        if not isinstance(self.scalars, Mapping):
            raise _fail("scalars", self.scalars, "a mapping of scalar name -> number")
        for name, v in self.scalars.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise _fail(f"scalars[{name!r}]", v, "a finite number")
        object.__setattr__(self, "scalars", dict(self.scalars))

    # -- resolved against a contract ------------------------------------
    def dtypes_for(self, contract: Contract) -> dict[str, DtypeName]:
        """Input name -> dtype at the measured size (masks keep their first declared dtype)."""
        out = {}
        for name, spec in contract.inputs.items():
            if isinstance(self.dtype, Mapping):
                d = self.dtype.get(name, spec.dtypes[0])
            else:
                d = spec.dtypes[0] if spec.is_mask else self.dtype
            out[name] = DtypeName(d)
        return out

    def scalars_for(self, contract: Contract) -> dict[str, float]:
        """Scalar values at the measured size: the declared ones, else each scalar's representative value."""
        return {name: self.scalars.get(name, s.representative()) for name, s in contract.scalars.items()}

    def work(self, contract: Contract) -> tuple[float | None, float | None]:
        """``(bytes, flops)`` for the measured size; None for what is not declared."""
        dims, dtypes = dict(self.dims), self.dtypes_for(contract)
        return (None if self.bytes is None else float(self.bytes(dims, dtypes)),
                None if self.flops is None else float(self.flops(dims, dtypes)))

    @property
    def main_dtype(self) -> str:
        """The dtype whose matmul rate bounds ``flops``: the dtype, or the first one named."""
        return self.dtype if isinstance(self.dtype, str) else next(iter(self.dtype.values()))


def check_performance(contract: Contract) -> None:
    """Raise InvalidContract unless ``contract.performance`` is None or fits the contract."""
    perf = contract.performance
    if perf is None:
        return
    if not isinstance(perf, Performance):
        raise InvalidContract(f"Contract: performance={perf!r}, expected Performance(...) or None")
    if set(perf.dims) != set(contract.dims):
        raise _fail("dims", sorted(perf.dims), f"a size for every contract dim and no other: {sorted(contract.dims)}")
    for sym, n in perf.dims.items():
        d = contract.dims[sym]
        if not d.admits(n):
            raise _fail(f"dims[{sym!r}]", n, f"a size inside the contract's Dim({d.min}, {d.max})")
    if isinstance(perf.dtype, Mapping):
        unknown = sorted(set(perf.dtype) - set(contract.inputs))
        if unknown:
            raise _fail("dtype", unknown, f"input names from {list(contract.inputs)}")
    for name, d in perf.dtypes_for(contract).items():
        if d not in contract.inputs[name].dtypes:
            raise _fail("dtype", str(d), f"a dtype input {name!r} claims: {contract.inputs[name].dtypes}")
    unknown = sorted(set(perf.scalars) - set(contract.scalars))
    if unknown:
        raise _fail("scalars", unknown, f"scalar names from {sorted(contract.scalars)}")
    for name, v in perf.scalars_for(contract).items():
        s = contract.scalars[name]
        if not s.low <= v <= s.high:
            raise _fail(f"scalars[{name!r}]", v, f"a value inside Scalar({s.low}, {s.high})")
    for name in ("bytes", "flops"):
        fn = getattr(perf, name)
        if fn is None:
            continue
        try:
            value = fn(dict(perf.dims), perf.dtypes_for(contract))
        except Exception as exc:  # noqa: BLE001 - any error in the user's formula is a bad declaration
            raise _fail(name, getattr(fn, "__qualname__", fn),
                        f"a formula of dims {sorted(perf.dims)} and dtypes; it raised {exc!r}") from None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not (value > 0) \
                or not math.isfinite(value):
            raise _fail(f"{name}(dims, dtypes)", value, "a positive finite number")
    if perf.baseline is not None:
        check_accepts("Performance: baseline", perf.baseline,
                      list(contract.inputs) + list(contract.scalars) + list(contract.keyword_dims))


def figures_line(details: Mapping[str, Any]) -> str:
    """One line of a measured cell's figures: ``3120 GB/s = 73.1% of 4265 GB/s; 1.12x torch``."""
    if details.get("fraction") is None:
        return ""
    unit = details.get("unit", "")
    line = (f"{details['achieved']:.4g} {unit} = {100 * details['fraction']:.1f}% of {details['peak']:.4g} {unit}"
            f"; {details['kernel_ms']:.4g} ms")
    if details.get("speedup") is not None:
        line += f"; {details['speedup']:.3g}x torch ({details['baseline_ms']:.4g} ms)"
    return line


def junit_properties(result: Any) -> list[tuple[str, str]]:
    """``conformance_perf_*`` string properties of a measured performance cell, for --junitxml."""
    details = getattr(result, "details", None) or {}
    if getattr(result, "cell", None) != "performance" or details.get("fraction") is None:
        return []
    return [(f"conformance_perf_{k}", str(details[k])) for k in FIGURE_KEYS if details.get(k) is not None]
