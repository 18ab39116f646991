"""The nightly diff: what changed between two results documents.

A **regression** is a cell that passed in the baseline (honoured, or rejected
cleanly) and now fails (wrong, unsafe, crash, compile-error or timeout).  A **fix** is the
reverse.  Any other change of outcome (wrong to crash, honoured to skipped) is
listed as a change.  Subjects and cells present on one side only are listed as
new or removed.  Known-bug subjects count like any other: a known bug that
appears in a cell that used to pass is still a regression there.

A ``performance`` cell honoured on both sides is a **performance regression**
when its achieved fraction of peak drops by more than ``perf_threshold``
(default 10%, relative: 0.80 -> 0.71 is a regression, 0.80 -> 0.73 is not);
a rise by as much is listed as a change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from triton_conformance.errors import InvalidArgument
from triton_conformance.model.cells import cell_id
from triton_conformance.reports.combine import cell_device, divergence_line, divergences, is_cross_device
from triton_conformance.reports.explain import CHECKED_PASSING, KERNEL_FAULTS

__all__ = ["CellChange", "ResultsDiff", "diff_documents", "performance_note", "GOOD", "BAD", "PERF_THRESHOLD"]

GOOD = CHECKED_PASSING  # checked and passed (skipped passes too, but checked nothing)
BAD = KERNEL_FAULTS  # failing outcomes that are verdicts about the kernel (not oracle-error)
PERF_THRESHOLD = 0.10  # relative drop in a performance cell's fraction of peak that is a regression


@dataclass(frozen=True)
class CellChange:
    """One (subject, cell) whose outcome differs; ``old``/``new`` is None where it is absent."""

    subject: str
    cell: str
    old: str | None
    new: str | None
    finding: str | None = None
    expected_failure: str | None = None
    note: str | None = None  # e.g. a performance cell's change of fraction of peak
    device: str | None = None  # in a cross-device matrix: the device the cell ran on

    def line(self) -> str:
        arrow = f"{self.old or '(absent)'} -> {self.new or '(absent)'}"
        extra = f" ({self.finding})" if self.finding and self.new in BAD else ""
        known = "  [known bug]" if self.expected_failure else ""
        note = f" ({self.note})" if self.note else ""
        where = f" on {self.device}" if self.device else ""
        return f"{cell_id(self.subject, self.cell)}{where}: {arrow}{extra}{note}{known}"


@dataclass
class ResultsDiff:
    regressions: list[CellChange] = field(default_factory=list)
    fixes: list[CellChange] = field(default_factory=list)
    changed: list[CellChange] = field(default_factory=list)
    new_subjects: list[str] = field(default_factory=list)
    removed_subjects: list[str] = field(default_factory=list)
    new_cells: list[CellChange] = field(default_factory=list)
    removed_cells: list[CellChange] = field(default_factory=list)
    divergences: list[dict[str, Any]] = field(default_factory=list)  # the current matrix's, see reports.combine
    baseline: dict[str, Any] = field(default_factory=dict)
    current: dict[str, Any] = field(default_factory=dict)

    @property
    def has_regressions(self) -> bool:
        return bool(self.regressions)

    @property
    def is_empty(self) -> bool:
        return not (self.regressions or self.fixes or self.changed or self.new_subjects
                    or self.removed_subjects or self.new_cells or self.removed_cells)

    def to_dict(self) -> dict[str, Any]:
        """As JSON; a change's ``device`` and the ``divergences`` only where there is a cross-device matrix."""
        out = asdict(self)
        for value in out.values():
            if isinstance(value, list):
                for change in value:
                    if isinstance(change, dict) and change.get("device", "") is None:
                        del change["device"]
        if not self.divergences:
            del out["divergences"]
        return out

    def summary_lines(self) -> list[str]:
        def plural(n: int, word: str) -> str:
            return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('x') else 's'}"

        # The regressions are always counted (they decide the exit status); other kinds only when present.
        counts = [plural(len(self.regressions), "regression")] + [
            plural(len(group), word) for group, word in (
                (self.fixes, "fix"), (self.changed, "other change"), (self.new_subjects, "new subject"),
                (self.removed_subjects, "removed subject"), (self.new_cells, "new cell"),
                (self.removed_cells, "removed cell"), (self.divergences, "device divergence")) if group]
        lines = [f"baseline: {_describe(self.baseline)}", f"current:  {_describe(self.current)}",
                 ", ".join(counts) + ("; no changes" if self.is_empty else "")]
        sections = [("regressions", self.regressions), ("fixes", self.fixes), ("other changes", self.changed),
                    ("new cells", self.new_cells), ("removed cells", self.removed_cells)]
        for title, changes in sections:
            if changes:
                lines += ["", f"{title}:"] + [f"  {c.line()}" for c in changes]
        for title, names in (("new subjects", self.new_subjects), ("removed subjects", self.removed_subjects)):
            if names:
                lines += ["", f"{title}:"] + [f"  {n}" for n in names]
        if self.divergences:
            lines += ["", "device divergences (verdicts that differ between the devices):"] + [
                f"  {divergence_line(d)}" for d in self.divergences]
        return lines


def _describe(doc: dict[str, Any]) -> str:
    env = doc.get("environment") or {}
    parts = [str(doc.get("created") or "?"), str(env.get("device_name") or env.get("device") or "?")]
    if env.get("commit"):
        parts.append(f"commit {env['commit']}")
    return ", ".join(parts)


def _cells(doc: dict[str, Any], by_device: bool) -> dict[tuple[str, str, str | None], dict[str, Any]]:
    """(subject, cell, device) -> result; the device is None unless one side is a cross-device matrix."""
    return {(r["subject"], r["cell"], cell_device(r, doc) if by_device else None): r for r in doc.get("results", ())}


def _fraction(r: dict[str, Any]) -> float | None:
    details = r.get("details") if isinstance(r.get("details"), dict) else {}
    value = details.get("fraction")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def performance_note(was: dict[str, Any], now: dict[str, Any], threshold: float) -> tuple[str, str] | None:
    """``("regression" | "changed", note)`` when a measured cell's fraction of peak moved past ``threshold``."""
    before, after = _fraction(was), _fraction(now)
    if before is None or after is None or was.get("outcome") != "honoured" or now.get("outcome") != "honoured":
        return None
    relative = (after - before) / before
    if abs(relative) <= threshold:
        return None
    note = f"fraction of peak {100 * before:.1f}% -> {100 * after:.1f}%, {100 * relative:+.1f}%"
    return ("regression" if relative < 0 else "changed"), note


def diff_documents(old: dict[str, Any], new: dict[str, Any], *,
                   perf_threshold: float = PERF_THRESHOLD) -> ResultsDiff:
    """Compare two results documents (as read by ``read_results``), baseline first.

    ``perf_threshold``: the relative drop in a performance cell's fraction of
    peak that counts as a regression (0.10: a tenth of what it was).
    """
    if not (isinstance(perf_threshold, (int, float)) and 0 <= perf_threshold < 1):
        raise InvalidArgument(f"diff_documents: perf_threshold={perf_threshold!r}, expected a number in [0, 1)")

    by_device = is_cross_device(old) or is_cross_device(new)
    before, after = _cells(old, by_device), _cells(new, by_device)
    old_subjects = {s for s, _, _ in before}
    new_subjects = {s for s, _, _ in after}
    out = ResultsDiff(new_subjects=sorted(new_subjects - old_subjects),
                      removed_subjects=sorted(old_subjects - new_subjects),
                      baseline={"created": old.get("created"), "environment": old.get("environment") or {}},
                      current={"created": new.get("created"), "environment": new.get("environment") or {}},
                      divergences=divergences(new))
    for key in sorted(set(before) | set(after), key=lambda k: (k[0], k[1], k[2] or "")):
        subject, cell, device = key
        was, now = before.get(key), after.get(key)
        if subject in out.new_subjects or subject in out.removed_subjects:
            continue
        ref = now or was
        change = CellChange(subject, cell, was["outcome"] if was else None, now["outcome"] if now else None,
                            finding=ref.get("finding"), expected_failure=(now or {}).get("expected_failure"),
                            device=device)
        if was is None:
            out.new_cells.append(change)
        elif now is None:
            out.removed_cells.append(change)
        elif change.old == change.new:
            moved = performance_note(was, now, perf_threshold)
            if moved is not None:
                kind, note = moved
                (out.regressions if kind == "regression" else out.changed).append(replace(change, note=note))
            continue
        elif change.old in GOOD and change.new in BAD:
            out.regressions.append(change)
        elif change.old in BAD and change.new in GOOD:
            out.fixes.append(change)
        else:
            out.changed.append(change)
    return out
