"""Subjects: host launchers with a declared contract, and the registry of them.

A subject is declared once, with :func:`subject` as a decorator or
:func:`register` as a call, and is then looked up by name.  Declaring imports
neither torch nor triton.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
import traceback
from dataclasses import MISSING, dataclass, fields
from typing import Any, Callable, Iterable, Mapping

from triton_conformance.errors import InvalidContract
from triton_conformance.model.contract import Contract, check_accepts
from triton_conformance.model.launchers import function_launcher, is_module_instance, launcher_form, module_launcher
from triton_conformance.model.performance import check_performance

__all__ = ["Subject", "subject", "register", "registry", "get_subject", "load_modules", "ImportFailure",
           "ENTRY_POINT_GROUP", "FIELDS"]

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
    # How the declared object is called: "function" (the launcher itself), "autograd.Function"
    # (``apply``) or "nn.Module"; ``target`` is that object (``launcher`` then wraps it).
    form: str = "function"
    target: Any = None
    # Inside the launcher call only, its CPU tensors say is_cuda / device.type == "cuda" (compat/cuda_dispatch.py).
    pretend_cuda: bool = False

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


# The fields of a declaration, in order: the contract's own (model/contract.py), then the subject's.
# register() and @subject take exactly these; a new Contract field is a new keyword of both.
CONTRACT_FIELDS = tuple(f.name for f in fields(Contract))
SUBJECT_FIELDS = ("name", "family", "xfail", "module", "parameters", "pretend_cuda")
FIELDS = CONTRACT_FIELDS + SUBJECT_FIELDS
REQUIRED = tuple(f.name for f in fields(Contract) if f.default is MISSING and f.default_factory is MISSING)
_EXPECTED = {"inputs": "a mapping of input names to Tensor(...) or Mask(...)",
             "dims": "a mapping of dim symbols to Dim(min, max)"}


def _launcher_for(launcher: Any, contract: Contract, parameters: Mapping[str, str] | None) -> tuple[Any, str]:
    """The keyword callable every cell calls, and the declared object's form."""
    names = list(contract.inputs) + list(contract.scalars) + list(contract.keyword_dims)
    form = launcher_form(launcher, parameters)
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidContract(f"register: parameters={parameters!r}, expected a mapping of input name -> "
                              "the module's parameter name, e.g. {'weight': 'weight'}")
    if form == "autograd.Function":
        if parameters is not None:
            raise InvalidContract(f"register: parameters={dict(parameters)!r} with an autograd.Function "
                                  f"{launcher.__qualname__}, expected parameters= only for an nn.Module")
        return function_launcher(launcher, names), form
    if form == "nn.Module":
        return module_launcher(launcher, names, contract.inputs, contract.dims, contract.scalars, parameters), form
    if not callable(launcher):
        raise InvalidContract(f"register: launcher={launcher!r}, expected a callable, an autograd.Function "
                              "subclass or an nn.Module")
    check_accepts("subject: launcher", launcher, names)
    return launcher, form


def register(launcher: Callable[..., Any], /, **declaration: Any) -> Subject:
    """Declare ``launcher`` as a subject and return it.

    The contract's fields:

    - ``inputs``: name -> ``Tensor(("M", "N"), dtypes=..., layouts=...)`` or ``Mask(...)``;
      the launcher and the oracle take them by keyword.
    - ``dims``: symbol -> ``Dim(min, max)``, the supported range.
    - ``oracle``: a torch function of the same keywords, run on float64 copies.
    - ``scalars``: name -> ``Scalar(low, high)``, passed by keyword as Python numbers.
    - ``deterministic``: claim bitwise-identical output for identical input.
    - ``reduces``: the dim symbol summed over, which scales the tolerance.
    - ``tolerance``: a ``Tolerance(...)`` overriding the derived bound, or one per device
      ({"cpu": ..., "cuda": ...}; the interpreter takes "interpreter"'s if given, else "cpu"'s, or
      "cuda"'s under ``pretend_cuda``).
    - ``values``: adversarial value classes claimed (huge, inf, nan, denormal, ties); a string
      names one class.
    - ``accumulate``: the dtype the kernel accumulates in (default float32), ``"input"``, or
      {input dtype: accumulation dtype}; or one of those per device ({"cpu": "input", "cuda": "float32"}).
    - ``max_elements``: a cost cap per input tensor for the drawn examples.
    - ``model``: a stochastic model (``Dropout(...)``, ``StochasticRounding(...)``) of a random
      output; the oracle, if any, is then its deterministic part.
    - ``error_scale``: a torch function of the inputs giving, per output element,
      the magnitude rounding errors scale with (``|A| @ |x|`` for a GEMV);
      default: the largest ``|oracle|``.
    - ``performance``: a ``Performance(dims=..., bytes=... or flops=..., baseline=...)``
      contract, measured by the ``performance`` cell on CUDA.
    - ``dot_precision``: ``"tf32"`` if the kernel's ``tl.dot`` on fp32 inputs runs in
      tf32 (Triton's default on CUDA; the tolerance widens there), ``"ieee"`` if it
      asks for full fp32 (``input_precision="ieee"``), None if it has no such dot.
    - ``strict``: inputs outside the claims must be refused, with a message; by default
      refusing them and computing them right both pass (wrong numbers never do).
    - ``inplace``: inputs the launcher writes into (``("out",)``): they may change, and their
      contents after the call are judged as outputs, after the returned ones (less None and
      less a returned in-place input itself); the oracle returns them in that order.
    - ``backward``: the subject has a backward: ``True`` (every float input gets a gradient),
      the names that get gradients (``("x", "weight")``), or ``Backward(...)``; the ``grad``
      cells judge its gradients against float64 autograd of the oracle, every float output
      backpropagated with a grad_output of its own (``Backward(outputs=...)`` says which).
    - ``autotuned``: the ``@triton.autotune`` kernels the launcher runs (one, or a tuple),
      needed only where its code does not show them (a kernel picked from a table at run
      time, a launcher in a compiled extension); by default they are found in its code.
    - ``relations``: relations between dims, ``Divisible("C", by="G")`` (C % G == 0) or
      ``Product("C", ("G", "Cg"))`` (C = G x Cg); examples are built to keep them, and a dim in
      no input's shape (``G``) is passed to the launcher and the oracle by keyword.

    The subject's own:

    - ``name``: the subject's name in cell ids (default: the launcher's ``__name__``).
    - ``family``: the row it is grouped under in reports (default: its name).
    - ``xfail``: reason this subject is known to be buggy (its failures are expected).
    - ``module``: the importable module that declares it (default: the caller's), which
      worker processes and reproducers import.
    - ``parameters``: for an ``nn.Module``, input -> the module's parameter it replaces.
    - ``pretend_cuda``: for a library's API that calls Triton only for CUDA tensors (``if x.is_cuda:``):
      on the interpreter, inside the launcher call only, its tensors say ``is_cuda`` and
      ``device.type == "cuda"``, so its Triton path runs (default False).

    The launcher may also be a ``torch.autograd.Function`` subclass: ``apply`` gets the
    declared inputs and scalars by position, each at its name's place among ``forward``'s
    parameters after ``ctx``.  Or an ``nn.Module``: an instance is called with them by
    keyword; with ``parameters={"weight": "weight"}`` (input -> the module's parameter),
    the drawn tensors replace those parameters before each call, and the launcher may
    instead be a factory (or the module class) built per launch from the dims and
    scalars its signature names: ``register(lambda N: RMSNorm(N), parameters=...)``.

    A keyword that is not a field (``oracel=``) raises :class:`InvalidContract` naming the
    subject, its module and the closest field.
    """
    return _declare("register", launcher, declaration)


def subject(*args: Any, **declaration: Any) -> Callable[[Callable[..., Any]], Subject]:
    """Decorator form of :func:`register`, with the same fields::

        @subject(inputs={"x": Tensor(("M", "N"), dtypes=("float32",))},
                 dims={"M": Dim(1, 64), "N": Dim(1, 8192)},
                 oracle=lambda x: torch.softmax(x, -1), reduces="N")
        def softmax(x): ...
    """
    if args:
        what = getattr(args[0], "__name__", repr(args[0]))
        raise InvalidContract(f"@subject: got {what} as a positional argument, expected keywords only: "
                              "@subject(inputs=..., dims=..., oracle=...) above the launcher")

    def decorate(launcher: Callable[..., Any]) -> Subject:
        return _declare("@subject", launcher, {"module": getattr(launcher, "__module__", None), **declaration})

    return decorate


def _declare(owner: str, launcher: Any, declaration: Mapping[str, Any]) -> Subject:
    """The one path of :func:`register` and :func:`subject`: check the keywords, build the contract."""
    if not callable(launcher):
        raise InvalidContract(f"register: launcher={launcher!r}, expected a callable, an autograd.Function "
                              f"subclass or an nn.Module (subject {declaration.get('name')!r})")
    name = declaration.get("name") or (type(launcher).__name__ if is_module_instance(launcher)
                                       else getattr(launcher, "__name__", None))
    module = declaration.get("module") or _caller_module(launcher)
    _check_keywords(owner, declaration, name, module)
    if not isinstance(name, str) or not name or any(c in name for c in "[]:/ <>"):
        raise InvalidContract(f"register: name={name!r}, expected a non-empty name without []:/<> or spaces "
                              f"(in module {module!r}; a lambda needs name=)")
    pretend_cuda = declaration.get("pretend_cuda", False)
    if not isinstance(pretend_cuda, bool):
        raise InvalidContract(f"{owner}: pretend_cuda={pretend_cuda!r}, expected True or False (subject {name!r} "
                              f"in module {module!r})")
    try:
        contract = Contract(**{k: v for k, v in declaration.items() if k in CONTRACT_FIELDS})
        check_performance(contract)
        call, form = _launcher_for(launcher, contract, declaration.get("parameters"))
    except InvalidContract as exc:
        raise _declared(exc, name, module) from None
    return registry.add(Subject(name=name, family=declaration.get("family") or name, launcher=call,
                                contract=contract, module=module, xfail=declaration.get("xfail"), form=form,
                                target=launcher, pretend_cuda=pretend_cuda))


def _check_keywords(owner: str, declaration: Mapping[str, Any], name: Any, module: str | None) -> None:
    where = f"subject {name!r} in module {module!r}"
    for key in declaration:
        if key not in FIELDS:
            close = difflib.get_close_matches(key, FIELDS, n=1)
            hint = f"did you mean {close[0]}=? " if close else ""
            raise InvalidContract(f"{owner}: {key}= is not a field of a declaration ({where}); {hint}"
                                  f"expected one of {', '.join(FIELDS)}")
    for key in REQUIRED:
        if key not in declaration:
            raise InvalidContract(f"{owner}: {key}= is missing ({where}); expected {_EXPECTED[key]}")


def _signature() -> inspect.Signature:
    """register()'s signature as help() and editors show it, from the one field list."""
    def default(f: Any) -> Any:
        return f.default_factory() if f.default_factory is not MISSING else f.default

    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("launcher", inspect.Parameter.POSITIONAL_ONLY)]
    params += [inspect.Parameter(f.name, keyword) if f.name in REQUIRED else
               inspect.Parameter(f.name, keyword, default=default(f)) for f in fields(Contract)]
    params += [inspect.Parameter(n, keyword, default=None) for n in SUBJECT_FIELDS]
    return inspect.Signature(params, return_annotation=Subject)


register.__signature__ = _signature()  # type: ignore[attr-defined]


def _declared(exc: InvalidContract, name: str, module: str | None) -> InvalidContract:
    """``exc`` with the subject and its module named (once)."""
    message = str(exc)
    if "(subject " not in message:
        message = f"{message} (subject {name!r} in module {module!r})"
    new = InvalidContract(message)
    new.subject = name  # type: ignore[attr-defined]
    return new


def _caller_module(launcher: Callable[..., Any]) -> str:
    # register() called from a conftest: the declaring module is the caller's.
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("triton_conformance."):
        frame = frame.f_back
    return frame.f_globals.get("__name__", launcher.__module__) if frame else launcher.__module__


@dataclass(frozen=True)
class ImportFailure:
    """A subject module that raised while it was imported (its own error, not a missing module).

    - ``module``: the module (or entry point) name;
    - ``error``: one line, ``NameError: name 'x' is not defined (mykernels/add.py:12)``;
    - ``traceback``: the whole traceback, for ``-v`` and the results.
    """

    module: str
    error: str
    traceback: str


def _location(exc: BaseException, root: str | None) -> str | None:
    """``file:line`` where ``exc`` was raised in the user's code (a SyntaxError's own position)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        filename, line = exc.filename, exc.lineno
    else:
        ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if not f.filename.startswith("<frozen") and not os.path.abspath(f.filename).startswith(ours)]
        if not frames:
            return None
        filename, line = frames[-1].filename, frames[-1].lineno
    if root and os.path.abspath(filename).startswith(os.path.abspath(root) + os.sep):
        filename = os.path.relpath(filename, root)
    return f"{filename}:{line}"


def _missing_itself(name: str, exc: ImportError) -> bool:
    """Whether ``exc`` says that ``name`` (or a package above it) does not exist, not something it imports."""
    missing = getattr(exc, "name", None)
    return isinstance(exc, ModuleNotFoundError) and bool(missing) and (
        name == missing or name.startswith(missing + "."))


def _import(name: str, load: Callable[[], Any], root: str | None, failures: list[ImportFailure]) -> None:
    try:
        load()
    except InvalidContract as exc:
        where = _location(exc, root)
        message = str(exc)
        if f"module {name!r}" not in message:
            message += f" (in module {name!r})"
        raise InvalidContract(message + (f" at {where}" if where else "")) from exc
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any error of the user's module is reported
        if isinstance(exc, ImportError) and _missing_itself(name.partition(":")[0], exc):
            looked = f", which includes the rootdir {root!r}" if root else ""
            raise InvalidContract(
                f"conformance_modules: cannot import {name!r}: {exc} (looked on sys.path{looked}); expected an "
                "importable module name: check the spelling, or add its folder to the ini option pythonpath"
            ) from exc
        where = _location(exc, root)
        # "Type: message" is the last part (a SyntaxError's source lines come first); of a message of
        # several lines, its first (what a library's runtime says it refuses), past an empty one.
        lines = [line.strip() for line in traceback.format_exception_only(type(exc), exc)[-1].strip().splitlines()]
        head = lines[0] if lines else type(exc).__name__
        if head.endswith(":"):
            head = " ".join([head] + [line for line in lines[1:] if line][:1])
        error = head + (f" ({where})" if where else "")
        failures.append(ImportFailure(name, error, "".join(traceback.format_exception(type(exc), exc,
                                                                                       exc.__traceback__))))


def load_modules(names: Iterable[str], *, entry_points: bool = False,
                 root: str | None = None) -> list[ImportFailure]:
    """Import modules that declare subjects (ini ``conformance_modules``, the hook, entry points).

    - ``root``: a folder put on ``sys.path`` first (the rootdir), so that a
      project's own modules import without a ``pythonpath`` setting; worker
      processes get the same ``sys.path``.

    A module that does not exist, or a bad declaration, raises
    :class:`InvalidContract` naming it; a module that raises anything else
    while importing (SyntaxError, NameError, a missing dependency) is returned
    as an :class:`ImportFailure`, and the other modules are still imported.
    """
    if root and os.path.abspath(root) not in (os.path.abspath(p) for p in sys.path if p):
        sys.path.insert(0, root)
    failures: list[ImportFailure] = []
    for name in names:
        _import(name, lambda name=name: importlib.import_module(name), root, failures)
    if entry_points:
        from importlib.metadata import entry_points as eps

        for ep in eps(group=ENTRY_POINT_GROUP):
            _import(ep.value, ep.load, root, failures)
    return failures
