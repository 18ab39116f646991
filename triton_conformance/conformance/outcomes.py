"""Outcome classes for a cell, findings for an example, and the result of a cell."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["OUTCOMES", "PASSING", "Finding", "CellResult", "worst"]

OUTCOMES = ("honoured", "rejected", "wrong", "unsafe", "crash", "timeout", "skipped")
PASSING = ("honoured", "rejected", "skipped")

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
