"""The contract model: what a subject claims about its inputs.

A plain frozen value object with no torch import, so that declaring a subject
costs nothing until the battery runs; the objects it is made of (``Dim``,
``Tensor``, ``Mask``, ``Scalar``, ``Tolerance``) live in :mod:`.inputs`, and
``Backward`` in :mod:`.backward`; they are re-exported here.  Each validator raises :class:`InvalidContract` naming the
field, the value and what was expected.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from triton_conformance.errors import InvalidContract
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.inputs import (  # noqa: F401 - re-exported
    FLOAT_DTYPES,
    OTHER_DTYPES,
    LAYOUT_CLAIMS,
    VALUE_CLASSES,
    RANGED_VALUE_CLASSES,
    INTEGER_DTYPES,
    ACCUMULATE_INPUT,
    MASK_CLASSES,
    MASK_POLICIES,
    DOT_PRECISIONS,
    _fail,
    Dim,
    Tensor,
    Mask,
    Scalar,
    Tolerance,
)
from triton_conformance.model.backward import Backward, resolve_backward
from triton_conformance.model.claims import DEVICE_KEYS, PerDevice, accumulate_value, on_device  # noqa: F401 - PerDevice re-exported
from triton_conformance.model.relations import Divisible, Product, check_relations
from triton_conformance.model.scales import check_scales
from triton_conformance.model.stochastic import StochasticModel

__all__ = [
    "FLOAT_DTYPES",
    "LAYOUT_CLAIMS",
    "VALUE_CLASSES",
    "RANGED_VALUE_CLASSES",
    "INTEGER_DTYPES",
    "MASK_POLICIES",
    "MASK_CLASSES",
    "DOT_PRECISIONS",
    "Dim",
    "Tensor",
    "Mask",
    "Scalar",
    "Tolerance",
    "Contract",
    "Backward",
    "PerDevice",
    "DEVICE_KEYS",
    "Product",
    "Divisible",
]


@dataclass(frozen=True, slots=True)
class Contract:
    """Everything a subject claims.  Built by :func:`triton_conformance.subject`."""

    inputs: Mapping[str, Tensor | Mask]
    dims: Mapping[str, Dim]
    oracle: Callable[..., Any] | None = None  # None only beside a model: a stochastic subject needs no oracle
    scalars: Mapping[str, Scalar] | None = field(default_factory=dict)
    deterministic: bool = True
    reduces: str | None = None
    # A Tolerance, or one per device ({"cpu": Tolerance(...), "cuda": Tolerance(...)}; see claims.DEVICE_KEYS).
    tolerance: Tolerance | Mapping[str, Tolerance | None] | None = None
    values: tuple[str, ...] = ()
    # The dtype the kernel accumulates in, which sets the tolerance: a float dtype, "input"
    # (the example's input dtype), or a mapping from input dtype to accumulation dtype
    # ({"float16": "float16", "float32": "float32"}; dtypes it leaves out accumulate in float32),
    # or one of those per device ({"cpu": "input", "cuda": "float32"}; see claims.DEVICE_KEYS).
    accumulate: str | Mapping[str, str] = "float32"
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
    # The subject's backward (a Backward; True, or the names that get gradients, as shorthand): its
    # gradients are judged against float64 autograd of the oracle (the ``grad`` cells).  None: no backward.
    backward: Any = None
    # The @triton.autotune kernels the launcher runs, where its code does not show them (a kernel
    # picked from a table at run time, a launcher in a compiled extension).  Held as given: the
    # engine checks that each is an autotuner (conformance/autotune.py::tuners_for).
    autotuned: tuple[Any, ...] = ()
    # Relations between dims (model/relations.py): Product("C", ("G", "Cg")) for C = G x Cg,
    # Divisible("C", by="G") for C % G == 0.  A dim in no input's shape but in a relation is handed to the
    # launcher and the oracle by keyword (``keyword_dims``).
    relations: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        owner = "Contract"
        if not isinstance(self.inputs, Mapping) or not self.inputs:
            raise _fail(owner, "inputs", self.inputs, "a non-empty mapping of name -> Tensor(...) or Mask(...)")
        for name, spec in self.inputs.items():
            if not (isinstance(name, str) and name.isidentifier()):
                raise _fail(owner, "inputs", name, "identifier names")
            if not isinstance(spec, (Tensor, Mask)):
                raise _fail(owner, f"inputs[{name!r}]", spec, "Tensor(...) or Mask(...)")
        check_scales(self.inputs)
        self._resolve_same_dtype()
        if not isinstance(self.dims, Mapping):
            raise _fail(owner, "dims", self.dims, "a mapping of symbol -> Dim(...)")
        for sym, d in self.dims.items():
            if not isinstance(d, Dim):
                raise _fail(owner, f"dims[{sym!r}]", d, "Dim(min, max)")
        object.__setattr__(self, "dims", dict(self.dims))
        for name, spec in self.inputs.items():
            for sym in spec.shape:
                if sym not in self.dims:
                    raise _fail(owner, f"inputs[{name!r}].shape", sym,
                                f"a dim declared in dims={sorted(self.dims)}")
        for name, spec in self.inputs.items():
            if getattr(spec, "index_of", None) is not None and spec.index_of not in self.dims:
                raise _fail(owner, f"inputs[{name!r}].index_of", spec.index_of,
                            f"a dim declared in dims={sorted(self.dims)}")
        object.__setattr__(self, "relations", check_relations(self.relations, self.dims))
        related = {s for rel in self.relations for s in (rel.dim, *rel.sources)}
        unused = sorted(set(self.keyword_dims) - related)
        if unused:
            raise _fail(owner, "dims", unused, "every declared dim to appear in some input's shape or relation")
        if self.scalars is None:
            object.__setattr__(self, "scalars", {})
        if not isinstance(self.scalars, Mapping):
            raise _fail(owner, "scalars", self.scalars, "a mapping of name -> Scalar(low, high)")
        object.__setattr__(self, "scalars", dict(self.scalars))
        for name, s in self.scalars.items():
            if not isinstance(s, Scalar):
                raise _fail(owner, f"scalars[{name!r}]", s, "Scalar(low, high)")
            if name in self.inputs:
                raise _fail(owner, "scalars", name, "names distinct from the tensor inputs")
        for sym in self.keyword_dims:
            if sym in self.inputs or sym in self.scalars:
                raise _fail(owner, "dims", sym, "a dim handed by keyword (in no input's shape) named apart from "
                            "the inputs and scalars")
        if self.reduces is not None and self.reduces not in self.dims:
            raise _fail(owner, "reduces", self.reduces, f"one of dims={sorted(self.dims)}")
        self._check_tolerance()
        values = (self.values,) if isinstance(self.values, str) else tuple(self.values)
        claimable = vocabulary.VALUES.names(claim="claimed")  # the table itself: a new row is claimable
        for v in values:
            if v in vocabulary.VALUES.names(claim="ranged"):
                raise _fail(owner, "values", v, f"value classes from {claimable} ({v!r} is not claimed: it "
                            "applies to every input that declares a value_range)")
            if v not in claimable:
                raise _fail(owner, "values", v, f"value classes from {claimable}")
        object.__setattr__(self, "values", values)
        if not isinstance(self.strict, bool):
            raise _fail(owner, "strict", self.strict, "True or False")
        if self.dot_precision not in DOT_PRECISIONS:
            raise _fail(owner, "dot_precision", self.dot_precision, f"one of {DOT_PRECISIONS}")
        self._check_accumulate()
        if self.max_elements is not None and (not isinstance(self.max_elements, int) or self.max_elements < 1):
            raise _fail(owner, "max_elements", self.max_elements, "a positive int or None")
        if sum(1 for s in self.inputs.values() if s.is_mask) > 1:
            raise _fail(owner, "inputs", list(self.inputs), "at most one Mask input")
        self._check_inplace()
        self._check_backward()
        self._check_autotuned()
        if self.oracle is None:
            if self.model is None:
                raise _fail(owner, "oracle", None, "a torch function evaluated on float64 inputs (or model= "
                            "for a stochastic subject)")
            object.__setattr__(self, "oracle", _no_oracle)
        self._check_callable("oracle", self.oracle)
        if self.model is not None:
            self._check_model()
        if self.error_scale is not None:
            self._check_callable("error_scale", self.error_scale)

    def _check_tolerance(self) -> None:
        def check(where: str, tol: Any) -> Tolerance | None:
            if tol is not None and not isinstance(tol, Tolerance):
                raise _fail("Contract", where, tol, "Tolerance(...), None, or {device: Tolerance(...)} per device")
            return tol

        tol = self.tolerance
        if isinstance(tol, Mapping):
            object.__setattr__(self, "tolerance", PerDevice.of("tolerance", tol, check))
        elif not isinstance(tol, PerDevice):
            check("tolerance", tol)

    def _per_device_claims(self) -> list[PerDevice]:
        backward = self.backward
        claims = [self.tolerance, self.accumulate, *(backward.accumulate.values() if backward else ()),
                  *(getattr(s, "device_dtypes", None) for s in self.inputs.values())]
        return [c for c in claims if isinstance(c, PerDevice)]

    def claims_source(self, device: str, interpreter_path: str = "cpu") -> str | None:
        """The device whose per-device claims apply on ``device`` ("cpu", "cuda" or "interpreter"; see
        :meth:`on_device`), or None where no claim differs by device.  Reports say it beside a verdict."""
        claims = self._per_device_claims()
        return claims[0].source(device, interpreter_path) if claims else None

    def on_device(self, device: str, interpreter_path: str = "cpu") -> "Contract":
        """This contract as it claims on ``device`` ("cpu", "cuda" or "interpreter"): each per-device claim
        (``tolerance``, ``accumulate``, ``Backward.accumulate``, a ``Tensor``'s ``dtypes``) replaced by the one
        for that device.  On the interpreter: the "interpreter" claim, else ``interpreter_path``'s (the path
        the launcher takes there)."""
        if not self._per_device_claims():
            return self  # nothing differs by device
        backward = self.backward
        if backward is not None:
            backward = replace(backward, accumulate={n: on_device(v, device, interpreter_path)
                                                     for n, v in backward.accumulate.items()})
        inputs = dict(self.inputs)
        for name, spec in self.inputs.items():
            per = getattr(spec, "device_dtypes", None)
            if per is not None:
                inputs[name] = replace(spec, dtypes=per.on(device, interpreter_path), device_dtypes=None)
                for other, follower in self.inputs.items():  # refilled from it by the new contract
                    if getattr(follower, "same_dtype_as", None) == name:
                        inputs[other] = replace(follower, dtypes=None)
        return replace(self, tolerance=on_device(self.tolerance, device, interpreter_path),
                       accumulate=on_device(self.accumulate, device, interpreter_path), backward=backward,
                       inputs=inputs)

    def _check_inplace(self) -> None:
        inplace = (self.inplace,) if isinstance(self.inplace, str) else tuple(self.inplace)
        for name in inplace:
            if name not in self.inputs or self.inputs[name].is_mask:
                raise _fail("Contract", "inplace", name, f"names of Tensor inputs from {self.tensor_names}")
        if len(set(inplace)) != len(inplace):
            raise _fail("Contract", "inplace", inplace, "each input named once")
        object.__setattr__(self, "inplace", inplace)

    def _check_autotuned(self) -> None:
        kernels = self.autotuned
        if kernels is None:
            kernels = ()
        elif not isinstance(kernels, (tuple, list)):
            kernels = (kernels,)
        for k in kernels:
            if k is None or isinstance(k, (str, bytes, int, float, Mapping)):
                raise _fail("Contract", "autotuned", k, "@triton.autotune kernels (the decorated objects)")
        object.__setattr__(self, "autotuned", tuple(kernels))

    def _check_backward(self) -> None:
        object.__setattr__(self, "backward", resolve_backward(self, self.backward))

    def grad_reduction(self, name: str, dims: Mapping[str, int]) -> int:
        """How many terms gradient ``name`` sums (its tolerance's reduction length) at ``dims``."""
        b = self.backward
        syms = b.reduces.get(name)
        if syms is None:
            missing = tuple(s for s in b.output if s not in self.inputs[name].shape)
            syms = missing or ((self.reduces,) if self.reduces else ())
        n = 1
        for s in syms:
            n *= max(int(dims.get(s, 1)), 1)
        return n

    def _resolve_same_dtype(self) -> None:
        """Give each ``same_dtype_as=`` input the dtypes of the input it follows."""
        inputs = dict(self.inputs)
        for name, spec in self.inputs.items():
            leader = getattr(spec, "same_dtype_as", None)
            if leader is None:
                continue
            where = f"inputs[{name!r}].same_dtype_as"
            seen = [name]
            while leader is not None:
                if leader not in self.inputs or self.inputs[leader].is_mask:
                    raise _fail("Contract", where, leader, f"the name of a Tensor input, one of "
                                f"{[n for n, s in self.inputs.items() if not s.is_mask and n != name]}")
                if leader in seen:
                    raise _fail("Contract", where, leader, f"no cycle of same_dtype_as ({' -> '.join(seen + [leader])})")
                seen.append(leader)
                root, leader = leader, self.inputs[leader].same_dtype_as
            dtypes = self.inputs[root].dtypes
            if spec.dtypes and set(spec.dtypes) != set(dtypes):
                raise _fail("Contract", f"inputs[{name!r}].dtypes", spec.dtypes,
                            f"those of {root!r}, {dtypes}, or none (same_dtype_as={spec.same_dtype_as!r})")
            inputs[name] = replace(spec, dtypes=dtypes, same_dtype_as=root)
        object.__setattr__(self, "inputs", inputs)

    def _check_accumulate(self) -> None:
        object.__setattr__(self, "accumulate", accumulate_value("accumulate", self.accumulate))

    def accumulation(self, dtypes: Mapping[str, str], accumulate: str | Mapping[str, str] | None = None) -> str:
        """The dtype the kernel accumulates in for an example whose inputs have ``dtypes``.

        With ``accumulate="input"`` or a mapping, the input dtype is that of the
        example's float tensor inputs (the least precise one, if they differ).
        ``accumulate``: resolve this declaration instead of the contract's own.
        """
        acc = self.accumulate if accumulate is None else accumulate
        if isinstance(acc, PerDevice):
            raise ValueError(f"Contract.accumulation: accumulate={acc!r} differs by device; resolve it with "
                             "Contract.on_device(device) first")
        if isinstance(acc, str) and acc != ACCUMULATE_INPUT:
            return acc
        floats = [dtypes[n] for n in self.tensor_names if dtypes.get(n) in FLOAT_DTYPES]
        if not floats:
            return "float32"
        order = ("bfloat16", "float16", "float32", "float64")  # least precise first
        dtype = min(floats, key=order.index)
        return dtype if acc == ACCUMULATE_INPUT else acc.get(dtype, "float32")

    def grad_accumulation(self, name: str, dtypes: Mapping[str, str]) -> str:
        """The dtype gradient ``name``'s terms are formed and summed in (its ``u_acc``) for ``dtypes``."""
        return self.accumulation(dtypes, self.backward.accumulate.get(name))

    @property
    def ranged(self) -> bool:
        """Whether some input declares a ``value_range`` (so the ``values:extreme`` cell applies)."""
        return any(getattr(s, "value_range", None) is not None for s in self.inputs.values())

    def _check_model(self) -> None:
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
        check_accepts(f"Contract: {name}", fn, list(self.inputs) + list(self.scalars) + list(self.keyword_dims))

    # -- derived views -------------------------------------------------
    @property
    def keyword_dims(self) -> tuple[str, ...]:
        """The dims in no input's shape (named by a relation): the launcher and the oracle get them by keyword."""
        used = {s for spec in self.inputs.values() for s in spec.shape}
        return tuple(s for s in self.dims if s not in used)

    def keyword_values(self, dims: Mapping[str, int]) -> dict[str, int]:
        """The :attr:`keyword_dims` of an example's ``dims``, as the launcher and the oracle take them."""
        return {s: dims[s] for s in self.keyword_dims if s in dims}

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


def _no_oracle(**_: Any) -> None:
    """The oracle of a subject judged by its stochastic model alone."""
    return None


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
