"""Outcome classes for a cell, findings for an example, and the result of a cell."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["OUTCOMES", "PASSING", "FAILING", "Finding", "CellResult", "worst", "compile_error_kind",
           "cuda_poison_kind"]

OUTCOMES = ("honoured", "rejected", "wrong", "unsafe", "crash", "compile-error", "timeout", "skipped")
PASSING = ("honoured", "rejected", "skipped")
FAILING = ("wrong", "unsafe", "crash", "compile-error", "timeout")

# Exception lines of a compile failure, as a traceback prints them: (pattern, finding kind).
# The interpreter compiles nothing: there a failed tl.static_assert is the compile failure.
_COMPILE_ERRORS = (
    (re.compile(r"^(?:triton\.[\w.]*\.)?OutOfResources\b", re.M), "out-of-resources"),
    (re.compile(r"^(?:triton\.[\w.]*\.)?PTXASError\b", re.M), "ptxas-error"),
    (re.compile(r"^(?:triton\.[\w.]*\.)?CompileTimeAssertionFailure\b", re.M), "static-assert"),
    (re.compile(r", in _new_static_assert\n", re.M), "static-assert"),
    (re.compile(r"^(?:triton\.[\w.]*\.)?CompilationError\b", re.M), "compilation-error"),
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
    ``CompilationError`` and its ``CompileTimeAssertionFailure``, and under the
    interpreter a failed ``tl.static_assert``.
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
FINDING_ORDER = (
    "crash", "exception", "unclean-rejection",
    "mutated-input", "oob-write", "unwritten", "poisoned-read",
    "accepted-out-of-contract", "bad-shape", "bad-output", "nan-mismatch", "mismatch",
    "nondeterministic", "policy-violation",
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


def worst(findings: list[Finding]) -> Finding | None:
    if not findings:
        return None
    rank = {k: i for i, k in enumerate(FINDING_ORDER)}
    return min(findings, key=lambda f: rank.get(f.kind, len(rank)))


@dataclass
class CellResult:
    """One cell's verdict, with the shrunk counterexample when it failed."""

    subject: str
    family: str
    cell: str
    outcome: str
    finding: str | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    counterexample: dict[str, Any] | None = None
    reproducer: str | None = None
    examples: int = 0
    rejected_examples: int = 0
    duration_s: float = 0.0
    compiles: int | None = None
    expected_failure: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CellResult":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
