"""The outcome table, findings for one example, and the typed, frozen result of a cell.

:data:`OUTCOME_TABLE` is the one place an outcome class is defined: its
letter in the matrix, its colour in the HTML, whether it passes, and what it
maps to in Allure and JUnit.  Every report reads it from here.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Outcome", "OUTCOME_TABLE", "OUTCOMES", "PASSING", "FAILING", "outcome", "Finding", "TensorView",
           "Counterexample", "CellResult", "worst", "compile_error_kind", "cuda_poison_kind", "SkipReason",
           "SKIP_CODE"]


@dataclass(frozen=True)
class Outcome:
    """One outcome class of a cell.

    - ``letter``: its letter in the terminal and HTML matrix;
    - ``colour``: its colour in the HTML report;
    - ``passing``: whether the cell passes (a known-buggy subject's failing cell is xfail);
    - ``allure``: Allure's status for it (the JUnit XML needs no table: pytest writes a failing
      cell as a failure, a skipped one as skipped, a known bug's as xfail);
    - ``summary``: one line for the report's legend;
    - ``kernel_fault``: a failing outcome that is a verdict about the kernel (a regression
      in the nightly diff); False for a mistake in the subject's declaration (``oracle-error``)
      or in triton-conformance itself (``harness-error``).
    """

    name: str
    letter: str
    colour: str
    passing: bool
    allure: str
    summary: str
    kernel_fault: bool = field(default=True, kw_only=True)  # by keyword: a row written for another table fails

    def __post_init__(self) -> None:
        if self.passing and self.kernel_fault:
            object.__setattr__(self, "kernel_fault", False)  # a passing outcome faults nothing


OUTCOME_TABLE: tuple[Outcome, ...] = (
    Outcome("honoured", "H", "#2e9d4f", True, "passed",
            "every example inside the contract gave the right answer, safely"),
    Outcome("rejected", "R", "#7cc0a0", True, "passed",
            "the cell probed inputs outside the contract and the launcher refused each one cleanly"),
    Outcome("accepted", "A", "#9fd36a", True, "passed",
            "accepted beyond the claim: inputs outside the contract were computed right (the claim could be wider)"),
    Outcome("wrong", "W", "#d62f2f", False, "failed",
            "silently wrong numbers (or a result for an input it should have refused)"),
    Outcome("unsafe", "U", "#8e2bb0", False, "failed",
            "out-of-bounds write, unwritten output, read outside the inputs, or a mutated input"),
    Outcome("crash", "C", "#e0701a", False, "broken",
            "an exception, abort or lost CUDA context on an input inside the contract"),
    Outcome("compile-error", "K", "#b5651d", False, "broken",
            "the kernel failed to compile (shared memory, registers, static_assert, ptxas)"),
    Outcome("timeout", "T", "#e0b21a", False, "broken", "the cell did not finish in time"),
    Outcome("skipped", ".", "#d4d4d4", True, "skipped",
            "the cell does not apply to this contract or back end (the reason says why)"),
    Outcome("oracle-error", "E", "#5b6b7a", False, "broken",
            "the subject's own oracle or error_scale raised: a mistake in the declaration, not a kernel verdict",
            kernel_fault=False),
    Outcome("harness-error", "!", "#2b5d8a", False, "broken",
            "triton-conformance's own code raised while running the cell: our bug, not a kernel verdict "
            "(its traceback says where; please report it)", kernel_fault=False),
)
_BY_NAME = {o.name: o for o in OUTCOME_TABLE}
OUTCOMES = tuple(o.name for o in OUTCOME_TABLE)
PASSING = tuple(o.name for o in OUTCOME_TABLE if o.passing)
FAILING = tuple(o.name for o in OUTCOME_TABLE if not o.passing)


def outcome(name: str) -> Outcome:
    """The :class:`Outcome` called ``name``; ValueError naming the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"outcome={name!r}, expected one of {OUTCOMES}") from None


# Exception lines of a compile failure, as a traceback prints them: (pattern, finding kind).
# The interpreter compiles nothing: there a failed tl.static_assert is the compile failure.
_COMPILE_ERRORS = (
    (re.compile(r"^(?:triton\.[\w.]*\.)?OutOfResources\b", re.M), "out-of-resources"),
    (re.compile(r"^(?:triton\.[\w.]*\.)?PTXASError\b", re.M), "ptxas-error"),
    (re.compile(r"^(?:triton\.[\w.]*\.)?CompileTimeAssertionFailure\b", re.M), "static-assert"),
    (re.compile(r", in _new_static_assert\n", re.M), "static-assert"),
    (re.compile(r"^(?:triton\.[\w.]*\.)?CompilationError\b", re.M), "compilation-error"),
    # An MLIR pass of triton's pipeline failed (its diagnostic goes to stderr; the exception says only this).
    (re.compile(r"^RuntimeError: PassManager::run failed$", re.M), "pass-failed"),
)
# Errors after which the process's CUDA context is unusable: (text, finding kind).
_CUDA_POISON = (
    ("an illegal memory access was encountered", "illegal-address"),
    ("illegal address", "illegal-address"),
    ("device-side assert triggered", "device-assert"),
    ("unspecified launch failure", "launch-failure"),
    ("an illegal instruction was encountered", "illegal-instruction"),
    ("misaligned address", "misaligned-address"),
    ("CUDA error: the launch timed out", "launch-timeout"),
)


def compile_error_kind(text: str) -> str | None:
    """The finding kind if ``text`` (a traceback or message) shows a kernel that failed to compile.

    Matches ``OutOfResources`` (shared memory or registers), ``PTXASError``,
    ``CompilationError`` and its ``CompileTimeAssertionFailure``, a failed MLIR
    pass (``PassManager::run failed``), and under the interpreter a failed
    ``tl.static_assert``.
    """
    for pattern, kind in _COMPILE_ERRORS:
        if pattern.search(text or ""):
            return kind
    return None


def cuda_poison_kind(text: str) -> str | None:
    """The finding kind if ``text`` shows a sticky CUDA error (the context is lost), else None."""
    for needle, kind in _CUDA_POISON:
        if needle in (text or ""):
            return kind
    return None

# Finding kinds, most severe first; the worst one found in an example is reported.
# A kind missing here ranks below all of them, so a backward's write into grad_output would hide
# behind the wrong numbers it causes.
FINDING_ORDER = (
    "crash", "exception", "unclean-rejection",
    "mutated-input", "mutated-grad-output", "misaligned-descriptor", "oob-write", "unwritten", "poisoned-read",
    "accepted-out-of-contract", "no-backward", "missing-gradient", "bad-shape", "bad-output",
    "nan-mismatch", "mismatch",
    "nondeterministic", "config-order-dependent", "policy-violation",
)


@dataclass(frozen=True)
class Finding:
    """What went wrong in one example."""

    outcome: str  # wrong / unsafe / crash
    kind: str  # e.g. oob-write, mismatch, accepted-out-of-contract
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SKIP_CODE = "skip_code"  # the key of a skipped result's reason code in its details


class SkipReason(str):
    """Why a cell is skipped: the message, carrying ``code``, a stable name for the kind of reason.

    A ``str``, so a ``skip_reason`` may return one wherever a message is expected; reports
    group skipped cells by the code (kept in the result's details under :data:`SKIP_CODE`),
    never by the message's words.
    """

    code: str

    def __new__(cls, message: str, *, code: str) -> "SkipReason":
        if not code:
            raise ValueError(f"code={code!r}, expected a non-empty reason code")
        self = super().__new__(cls, message)
        self.code = code
        return self

    def __reduce__(self):  # noqa: ANN204 - pickled with its code (results cross the worker's pipe as dicts)
        return (_skip_reason, (str(self), self.code))


def _skip_reason(message: str, code: str) -> SkipReason:
    return SkipReason(message, code=code)


def worst(findings: list[Finding]) -> Finding | None:
    if not findings:
        return None
    rank = {k: i for i, k in enumerate(FINDING_ORDER)}
    return min(findings, key=lambda f: rank.get(f.kind, len(rank)))


@dataclass(frozen=True)
class TensorView:
    """How one input sat in memory in a counterexample, as the launcher saw it."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    storage_offset: int
    dtype: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TensorView":
        return cls(shape=tuple(d["shape"]), strides=tuple(d["strides"]), storage_offset=int(d["storage_offset"]),
                   dtype=str(d["dtype"]))


@dataclass(frozen=True)
class Counterexample:
    """The example a failure was found at.

    - ``spec``: what rebuilds it: a :class:`~triton_conformance.model.spec.Spec` as a
      dict for searched cells, a seed and the last launch for a stochastic design,
      the fixed plan of a large-index example;
    - ``tensors``: each input's real shape, strides, storage offset and dtype;
    - ``shrunk``: False when it is the example a dead worker was running, as recorded.
    """

    spec: dict[str, Any]
    tensors: dict[str, TensorView] = field(default_factory=dict)
    shrunk: bool = True

    def __getitem__(self, key: str) -> Any:
        """Read it as its JSON reads: ``counterexample["dims"]``, ``counterexample["tensors"]``."""
        return self.to_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.spec)
        if self.tensors:
            out["tensors"] = {n: asdict(v) for n, v in self.tensors.items()}
        if not self.shrunk:
            out["shrunk"] = False
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Counterexample":
        spec = {k: v for k, v in d.items() if k not in ("tensors", "shrunk")}
        tensors = {n: TensorView.from_dict(v) for n, v in (d.get("tensors") or {}).items()}
        return cls(spec=spec, tensors=tensors, shrunk=d.get("shrunk", True))


@dataclass(frozen=True)
class CellResult:
    """One cell's verdict, with the shrunk counterexample when it failed.  Changed with ``replace()``."""

    subject: str
    family: str
    cell: str
    outcome: str
    finding: str | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    counterexample: Counterexample | None = None
    reproducer: str | None = None
    examples: int = 0
    rejected_examples: int = 0
    duration_s: float = 0.0
    compiles: int | None = None
    expected_failure: str | None = None

    def __post_init__(self) -> None:
        outcome(self.outcome)  # an unknown outcome is a bug where the result was built
        if isinstance(self.counterexample, dict):  # as read from JSON, or written by hand in a test
            object.__setattr__(self, "counterexample", Counterexample.from_dict(self.counterexample))

    @property
    def passed(self) -> bool:
        return _BY_NAME[self.outcome].passing

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["details"] = dict(self.details)
        out["counterexample"] = self.counterexample.to_dict() if self.counterexample is not None else None
        return out

    @classmethod
    def of(cls, subject: Any, cell: str, outcome: str, message: str = "", **fields: Any) -> "CellResult":
        """The one constructor of a result: ``outcome`` for ``subject``'s ``cell``. ``subject`` is a Subject (its
        name, family and known bug are the result's), or only a name where none is at hand (a module that did
        not import, a fleet task that was lost): its family is then the name unless ``family=`` says."""
        if isinstance(subject, str):
            return cls(subject=subject, family=fields.pop("family", None) or subject, cell=cell, outcome=outcome,
                       message=message, **fields)
        return cls(subject=subject.name, family=subject.family, cell=cell, outcome=outcome, message=message,
                   expected_failure=subject.xfail, **fields)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CellResult":
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        fields["details"] = dict(fields.get("details") or {})
        return cls(**fields)
