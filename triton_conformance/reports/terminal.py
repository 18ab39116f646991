"""The terminal matrix: one row per subject, one letter per contract cell."""

from __future__ import annotations

from typing import Iterable

from triton_conformance.model.outcomes import CellResult

__all__ = ["LETTERS", "matrix_lines", "performance_lines"]

LETTERS = {"honoured": "H", "rejected": "R", "wrong": "W", "unsafe": "U", "crash": "C", "compile-error": "K",
           "timeout": "T", "skipped": "."}
LEGEND = "H honoured  R rejected cleanly  W wrong  U unsafe  C crash  K compile-error  T timeout  . skipped"


def _groups(cells: list[str]) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for c in cells:
        dim, _, value = c.partition(":")
        groups.setdefault(dim, []).append(value or dim)
    return list(groups.items())


def performance_lines(results: Iterable[CellResult]) -> list[str]:
    """The figures of every measured ``performance`` cell, one line per subject (none if none was measured)."""
    from triton_conformance.model.performance import figures_line

    measured = sorted((r for r in results if r.cell == "performance" and (r.details or {}).get("fraction")),
                      key=lambda r: (r.family, r.subject))
    if not measured:
        return []
    width = max(len(r.subject) for r in measured) + 2
    return ["", "performance (fraction of the measured peak; speed against torch):"] + [
        f"  {r.subject.ljust(width)}{r.details.get('bound', '')}-bound: {figures_line(r.details)}" for r in measured]


def matrix_lines(results: Iterable[CellResult]) -> list[str]:
    results = list(results)
    if not results:
        return ["(no conformance results)"]
    from triton_conformance.conformance.cells import cell_sort_key

    cells = sorted({r.cell for r in results}, key=cell_sort_key)
    order = {c: i for i, c in enumerate(cells)}
    by_subject: dict[str, dict[str, CellResult]] = {}
    for r in sorted(results, key=lambda r: (r.family, r.subject, order[r.cell])):
        by_subject.setdefault(r.subject, {})[r.cell] = r
    groups = _groups(cells)
    name_width = max(len(s) for s in by_subject) + 2
    header = " " * name_width + " ".join(dim.ljust(max(len(dim), len(values))) for dim, values in groups)
    lines = [LEGEND, header]
    for subject, row in by_subject.items():
        parts = []
        for dim, values in groups:
            letters = "".join(LETTERS.get(row[f"{dim}:{v}" if v != dim else dim].outcome, "?")
                              if (f"{dim}:{v}" if v != dim else dim) in row else " " for v in values)
            parts.append(letters.ljust(max(len(dim), len(values))))
        flag = "  (known bug)" if any(r.expected_failure for r in row.values()) else ""
        lines.append(subject.ljust(name_width) + " ".join(parts) + flag)
    lines.append("")
    for dim, values in groups:
        if values != [dim]:
            lines.append(f"  {dim}: " + " ".join(values))
    lines += performance_lines(results)
    from triton_conformance.conformance.compiles import compile_lines

    lines += compile_lines(results)  # CUDA only: the interpreter compiles nothing
    failures = [r for r in results if not r.passed]
    if failures:
        lines.append("")
        lines.append("failing cells:")
        for r in sorted(failures, key=lambda r: (r.subject, order[r.cell])):
            dims = (r.counterexample or {}).get("dims")
            lines.append(f"  {r.subject}[{r.cell}]: {r.outcome} ({r.finding})"
                         + (f" at dims={dims}" if dims else "")
                         + ("  [known bug]" if r.expected_failure else ""))
    return lines
