"""Subjects: host launchers with a declared contract, and the registry of them.

A subject is declared once, with :func:`subject` as a decorator or
:func:`register` as a call, and is then looked up by name.  Declaring imports
neither torch nor triton.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from triton_conformance.model.contract import (
    Contract,
    Dim,
    Mask,
    Scalar,
    Tensor,
    Tolerance,
    check_accepts,
)
from triton_conformance.model.performance import check_performance
from triton_conformance.errors import InvalidContract

__all__ = ["Subject", "subject", "register", "registry", "get_subject", "load_modules", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "triton_conformance.subjects"


@dataclass(frozen=True, slots=True, eq=False)
class Subject:
    """A launcher and its contract.  Calling a Subject calls the launcher."""

    name: str
    family: str
    launcher: Callable[..., Any]
    contract: Contract
    module: str  # importable module that declares it (for worker processes and reproducers)
    xfail: str | None = None  # a known-buggy subject: failing cells are expected

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.launcher(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Subject {self.name!r} ({self.family}) from {self.module}>"


class _Registry:
    def __init__(self) -> None:
        self._subjects: dict[str, Subject] = {}

    def add(self, s: Subject) -> Subject:
        old = self._subjects.get(s.name)
        if old is not None and (old.module, old.launcher.__qualname__) != (s.module, s.launcher.__qualname__):
            raise InvalidContract(
                f"subject name={s.name!r} is already declared by {old.module}; expected unique names"
            )
        self._subjects[s.name] = s
        return s

    def get(self, name: str) -> Subject:
        try:
            return self._subjects[name]
        except KeyError:
            raise KeyError(f"no subject named {name!r}; declared: {sorted(self._subjects)}") from None

    def __iter__(self):
        return iter(sorted(self._subjects.values(), key=lambda s: (s.family, s.name)))

    def __len__(self) -> int:
        return len(self._subjects)

    def clear(self) -> None:
        self._subjects.clear()


registry = _Registry()


def get_subject(name: str) -> Subject:
    return registry.get(name)


def _as_contract(
    launcher: Callable[..., Any],
    *,
    inputs: Mapping[str, Tensor | Mask],
    dims: Mapping[str, Dim],
    oracle: Callable[..., Any] | None,
    scalars: Mapping[str, Scalar] | None,
    deterministic: bool,
    reduces: str | None,
    tolerance: Tolerance | None,
    values: Iterable[str],
    accumulate: str,
    max_elements: int | None,
    model: Any,
    error_scale: Callable[..., Any] | None,
    performance: Any = None,
    dot_precision: str | None = None,
) -> Contract:
    if oracle is None and model is None:
        raise InvalidContract("subject: oracle=None, expected a torch function evaluated on float64 inputs")
    contract = Contract(
        inputs=dict(inputs),
        dims=dict(dims),
        oracle=oracle if oracle is not None else (lambda **kw: None),
        scalars=dict(scalars or {}),
        deterministic=deterministic,
        reduces=reduces,
        tolerance=tolerance,
        values=tuple(values),
        accumulate=accumulate,
        max_elements=max_elements,
        model=model,
        error_scale=error_scale,
        performance=performance,
        dot_precision=dot_precision,
    )
    check_performance(contract)
    check_accepts("subject: launcher", launcher, list(contract.inputs) + list(contract.scalars))
    return contract


def register(
    launcher: Callable[..., Any],
    *,
    inputs: Mapping[str, Tensor | Mask],
    dims: Mapping[str, Dim],
    oracle: Callable[..., Any] | None = None,
    name: str | None = None,
    family: str | None = None,
    scalars: Mapping[str, Scalar] | None = None,
    deterministic: bool = True,
    reduces: str | None = None,
    tolerance: Tolerance | None = None,
    values: Iterable[str] = (),
    accumulate: str = "float32",
    max_elements: int | None = None,
    model: Any = None,
    error_scale: Callable[..., Any] | None = None,
    performance: Any = None,
    dot_precision: str | None = None,
    xfail: str | None = None,
    module: str | None = None,
) -> Subject:
    """Declare ``launcher`` as a subject and return it.

    - ``inputs``: name -> ``Tensor(("M", "N"), dtypes=..., layouts=...)`` or ``Mask(...)``;
      the launcher and the oracle take them by keyword.
    - ``dims``: symbol -> ``Dim(min, max)``, the supported range.
    - ``oracle``: a torch function of the same keywords, run on float64 copies.
    - ``scalars``: name -> ``Scalar(low, high)``, passed by keyword as Python numbers.
    - ``deterministic``: claim bitwise-identical output for identical input.
    - ``reduces``: the dim symbol summed over, which scales the tolerance.
    - ``values``: adversarial value classes claimed (huge, inf, nan, denormal, ties).
    - ``max_elements``: a cost cap per input tensor for the drawn examples.
    - ``error_scale``: a torch function of the inputs giving, per output element,
      the magnitude rounding errors scale with (``|A| @ |x|`` for a GEMV);
      default: the largest ``|oracle|``.
    - ``performance``: a ``Performance(dims=..., bytes=... or flops=..., baseline=...)``
      contract, measured by the ``performance`` cell on CUDA.
    - ``dot_precision``: ``"tf32"`` if the kernel's ``tl.dot`` on fp32 inputs runs in
      tf32 (Triton's default on CUDA; the tolerance widens there), ``"ieee"`` if it
      asks for full fp32 (``input_precision="ieee"``), None if it has no such dot.
    - ``xfail``: reason this subject is known to be buggy (its failures are expected).
    """
    if not callable(launcher):
        raise InvalidContract(f"register: launcher={launcher!r}, expected a callable")
    contract = _as_contract(
        launcher, inputs=inputs, dims=dims, oracle=oracle, scalars=scalars,
        deterministic=deterministic, reduces=reduces, tolerance=tolerance, values=values,
        accumulate=accumulate, max_elements=max_elements, model=model, error_scale=error_scale,
        performance=performance, dot_precision=dot_precision,
    )
    name = name or launcher.__name__
    if not isinstance(name, str) or not name or any(c in name for c in "[]:/ "):
        raise InvalidContract(f"register: name={name!r}, expected a non-empty name without []:/ or spaces")
    module = module or _caller_module(launcher)
    return registry.add(Subject(name=name, family=family or name, launcher=launcher,
                                contract=contract, module=module, xfail=xfail))


def subject(**declaration: Any) -> Callable[[Callable[..., Any]], Subject]:
    """Decorator form of :func:`register`::

        @subject(inputs={"x": Tensor(("M", "N"), dtypes=("float32",))},
                 dims={"M": Dim(1, 64), "N": Dim(1, 8192)},
                 oracle=lambda x: torch.softmax(x, -1), reduces="N")
        def softmax(x): ...
    """

    def decorate(launcher: Callable[..., Any]) -> Subject:
        declaration.setdefault("module", launcher.__module__)
        return register(launcher, **declaration)

    return decorate


def _caller_module(launcher: Callable[..., Any]) -> str:
    # register() called from a conftest: the declaring module is the caller's.
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("triton_conformance."):
        frame = frame.f_back
    return frame.f_globals.get("__name__", launcher.__module__) if frame else launcher.__module__


def load_modules(names: Iterable[str], *, entry_points: bool = False) -> None:
    """Import modules that declare subjects (ini ``conformance_modules``, entry points)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InvalidContract(f"conformance_modules: cannot import {name!r}: {exc}") from exc
    if entry_points:
        from importlib.metadata import entry_points as eps

        for ep in eps(group=ENTRY_POINT_GROUP):
            ep.load()
