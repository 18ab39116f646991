"""The terminal matrix: one row per subject, one letter per contract cell.

Letters and the legend come from the outcome table, the column order from the
catalogue of cells the run wrote (the results document's own; without one, the
cells' names order them).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from triton_conformance.model.cells import Catalogue, cell_id
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.performance import figures_line
from triton_conformance.reports.combine import cell_device, devices_of, divergence_line, divergences, is_cross_device
from triton_conformance.reports.explain import KERNEL_FAULTS, LETTERS, legend_line, skip_example, skip_groups
from triton_conformance.reports.findings import FindingGroup, finding_groups
from triton_conformance.reports.formats import ReportFormat, register_format
from triton_conformance.reports.results_json import catalogue_of

__all__ = ["matrix_lines", "failing_lines", "performance_lines", "compile_lines", "compiles_by_subject", "skip_lines",
           "unavailable_magnitude_lines", "no_triton_launch_lines", "claims_lines", "document_lines", "divergence_lines", "slowest_lines", "SLOWEST"]

SLOWEST = 5  # cells the run's summary names as its slowest


def _as_dict(result: Any) -> dict:
    """A cell's result as the results file holds it (a CellResult, or already a dict)."""
    return result if isinstance(result, dict) else result.to_dict()


def compiles_by_subject(results: Iterable[Any]) -> dict[str, int]:
    """Total compiles per subject over its cells' results (subjects that compiled nothing counted are left out)."""
    totals: dict[str, int] = {}
    for r in map(_as_dict, results):
        if r.get("compiles") is not None:
            totals[r["subject"]] = totals.get(r["subject"], 0) + int(r["compiles"])
    return totals


def _past_budget(results: Iterable[Any]) -> dict[str, int]:
    """Compiles past the subject's budget per subject: first classes of cells that could run nothing else."""
    past: dict[str, int] = {}
    for r in map(_as_dict, results):
        n = ((r.get("details") or {}).get("specializations") or {}).get("compiled_past_budget") or 0
        if n:
            past[r["subject"]] = past.get(r["subject"], 0) + int(n)
    return past


def compile_lines(results: Iterable[Any]) -> list[str]:
    """Lines for the terminal summary: compilations per subject (and how many went past its budget, for
    cells that could run nothing else), or none where nothing was counted (the interpreter)."""
    results = list(results)
    totals = compiles_by_subject(results)
    if not totals:
        return []
    past = _past_budget(results)
    width = max(len(s) for s in totals) + 2
    lines = ["", "Triton compilations per subject (new specializations, summed over its cells):"]
    for name, n in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
        note = f"  ({past[name]} past the budget: first classes of cells that could run nothing else)" \
            if past.get(name) else ""
        lines.append(f"  {name.ljust(width)}{n}{note}")
    return lines


def skip_lines(results: Iterable[CellResult]) -> list[str]:
    """``N skipped (code), e.g. message`` for each kind of skip reason (its code), the commonest first, with one
    real message of the group (none if nothing was skipped)."""
    groups = skip_groups({"outcome": r.outcome, "cell": r.cell, "message": r.message, "details": r.details}
                         for r in results)
    if not groups:
        return []
    total = sum(len(g) for _, g in groups)
    return ["", f"skipped cells ({total}):"] + [
        f"  {len(g)} skipped ({code}){', e.g.' if len(g) > 1 else ''}: {skip_example(g)}" for code, g in groups]


def slowest_lines(results: Iterable[Any], n: int = SLOWEST) -> list[str]:
    """The ``n`` slowest cells: duration, examples, and the examples discarded as over the interpreter's cost
    allowance, and how many of those were cut inside a program (none if no cell ran: every one skipped before
    it started, or no results)."""
    cells = [_as_dict(r) for r in results]
    timed = sorted((c for c in cells if float(c.get("duration_s") or 0) > 0),
                   key=lambda c: (-float(c["duration_s"]), c.get("subject", ""), c.get("cell", "")))
    if not timed:
        return []
    total = sum(float(c["duration_s"]) for c in timed)
    lines = ["", f"slowest cells ({min(n, len(timed))} of {len(timed)}, {total:.1f} s in all):"]
    width = max(len(cell_id(c.get("subject"), c.get("cell"))) for c in timed[:n]) + 2
    for c in timed[:n]:
        over = (c.get("details") or {}).get("over-cost_discarded") or \
            ((c.get("details") or {}).get("interpreter_cost") or {}).get("stopped")
        note = f", {over} over the interpreter's cost allowance (discarded)" if over else ""
        cut = (c.get("details") or {}).get("cut_discarded")
        note += f", {cut} cut halfway through a program (discarded)" if cut else ""
        name = cell_id(c.get("subject"), c.get("cell"))
        lines.append(f"  {name.ljust(width)}{float(c['duration_s']):7.1f} s  {c.get('outcome')}, "
                     f"{int(c.get('examples') or 0)} examples{note}")
    return lines


def _groups(cells: list[str]) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for c in cells:
        dim, _, value = c.partition(":")
        groups.setdefault(dim, []).append(value or dim)
    return list(groups.items())


def performance_lines(results: Iterable[CellResult]) -> list[str]:
    """The figures of every measured ``performance`` cell, one line per subject (none if none was measured)."""
    measured = sorted((r for r in results if r.cell == "performance" and (r.details or {}).get("fraction")),
                      key=lambda r: (r.family, r.subject))
    if not measured:
        return []
    width = max(len(r.subject) for r in measured) + 2
    return ["", "performance (fraction of the measured peak; speed against torch):"] + [
        f"  {r.subject.ljust(width)}{r.details.get('bound', '')}-bound: {figures_line(r.details)}" for r in measured]


def matrix_lines(results: Iterable[CellResult], catalogue: Catalogue = Catalogue()) -> list[str]:
    """The matrix, its legend, the failing cells and the skip reasons; columns in ``catalogue`` order
    (the run's: ``conformance.kinds.catalogue()`` or a document's ``catalogue_of``)."""
    results = list(results)
    if not results:
        return ["(no conformance results)"]
    cells = catalogue.sorted(r.cell for r in results)
    order = {c: i for i, c in enumerate(cells)}
    by_subject: dict[str, dict[str, CellResult]] = {}
    for r in sorted(results, key=lambda r: (r.family, r.subject, order[r.cell])):
        by_subject.setdefault(r.subject, {})[r.cell] = r
    groups = _groups(cells)
    name_width = max(len(s) for s in by_subject) + 2
    header = " " * name_width + " ".join(dim.ljust(max(len(dim), len(values))) for dim, values in groups)
    lines = [legend_line(), header]
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
    lines += compile_lines(results)  # CUDA only: the interpreter compiles nothing
    lines += failing_lines(results, lambda r: (r["subject"], order[r["cell"]]))
    lines += unavailable_magnitude_lines(results)
    lines += no_triton_launch_lines(results)
    lines += claims_lines(results)
    lines += skip_lines(results)
    return lines


def no_triton_launch_lines(results: Iterable[Any]) -> list[str]:
    """The cells whose launcher launched no Triton kernel on the interpreter (their ``no_triton_launch`` note),
    grouped by subject, the note said once: a note, not a failure (none if every such cell launched one)."""
    noted = [(d["subject"], d["cell"], d["details"]["no_triton_launch"]) for d in map(_as_dict, results)
             if (d.get("details") or {}).get("no_triton_launch")]
    if not noted:
        return []
    by_subject: dict[str, list[str]] = {}
    for subject, cell, _ in noted:
        by_subject.setdefault(subject, []).append(cell)
    return ["", f"{noted[0][2]}, in {len(noted)} cells:"] + [
        f"  {subject}: {', '.join(cells)}" for subject, cells in by_subject.items()]


def claims_lines(results: Iterable[Any]) -> list[str]:
    """Subjects whose claims differ by device, and whose claims (``claims_of``: "cpu", "cuda" or "interpreter")
    judged their cells here, one line per device (none if no subject's claims differ)."""
    by_device: dict[str, list[str]] = {}
    for d in map(_as_dict, results):
        device = (d.get("details") or {}).get("claims_of")
        if device and d["subject"] not in by_device.setdefault(device, []):
            by_device[device].append(d["subject"])
    return (["", "claims that differ by device:"] +
            [f"  the {device!r} claims judged {', '.join(names)}" for device, names in sorted(by_device.items())]
            if by_device else [])


def unavailable_magnitude_lines(results: Iterable[Any]) -> list[str]:
    """``magnitudes unavailable in N cells``, then each reason with its count, the commonest first: cells judged
    by the plain bound alone because the magnitude pass could not run (none if it always ran)."""
    reasons = Counter(d["magnitudes_unavailable"] for d in ((_as_dict(r).get("details") or {}) for r in results)
                      if d.get("magnitudes_unavailable"))
    if not reasons:
        return []
    return ["", f"magnitudes unavailable in {sum(reasons.values())} cells (judged by the plain bound alone):"] + [
        f"  {n}: {reason}" for reason, n in reasons.most_common()]


def _finding_line(group: FindingGroup) -> str:
    """``subject[cell, cell]: outcome (finding) at dims={...}`` for one finding and the cells that found it."""
    r = group.first
    cells = ", ".join(c["cell"] for c in group.cells)
    dims = (r.get("counterexample") or {}).get("dims")
    same = f"  (one finding in {len(group.cells)} cells)" if group.others else ""
    return (f"{r['subject']}[{cells}]: {r['outcome']} ({r.get('finding')})" + (f" at dims={dims}" if dims else "")
            + same + ("  [known bug]" if r.get("expected_failure") and r["outcome"] in KERNEL_FAULTS else ""))


def failing_lines(results: Iterable[Any], order: Any = None) -> list[str]:
    """The failing cells, one line per finding (cells of a subject with the same outcome, finding and shrunk
    dims together: :mod:`.findings`); then the failures that are no verdict about the kernel (an oracle that
    raised, a harness error: our bug), each with its first line."""
    groups = finding_groups(results, order)
    verdicts = [g for g in groups if g.first["outcome"] in KERNEL_FAULTS]
    others = [g for g in groups if g.first["outcome"] not in KERNEL_FAULTS]
    lines = []
    if verdicts:
        lines += ["", "failing cells:"] + [f"  {_finding_line(g)}" for g in verdicts]
    if others:
        lines += ["", "not verdicts about the kernel (a mistake in a declaration, or a bug in triton-conformance):"]
        for g in others:
            first = (g.first.get("message") or "").strip().splitlines()
            lines.append(f"  {_finding_line(g)}" + (f": {first[0][:300]}" if first else ""))
    return lines


def divergence_lines(doc: dict[str, Any]) -> list[str]:
    """``device divergences (N):`` and one line per cell whose verdicts differ between devices (none if none)."""
    found = doc.get("divergences") if isinstance(doc.get("divergences"), list) else divergences(doc)
    if not found:
        return []
    return ["", f"device divergences ({len(found)}):"] + [f"  {divergence_line(d)}" for d in found]


def document_lines(doc: dict[str, Any]) -> list[str]:
    """The matrix of a results document; of a cross-device one, a matrix per device, then the divergences."""
    catalogue = catalogue_of(doc)
    if not is_cross_device(doc):
        return matrix_lines((CellResult.from_dict(r) for r in doc.get("results") or ()), catalogue)
    envs = {str(d.get("device")): d.get("environment") or {} for d in doc["devices"]}
    lines: list[str] = [f"cross-device matrix: {len(envs)} devices ({', '.join(envs)})"]
    for device in devices_of(doc):
        env = envs.get(device, {})
        cells = [CellResult.from_dict(r) for r in doc.get("results") or () if cell_device(r, doc) == device]
        lines += ["", f"== device {device} ({env.get('device_name') or env.get('device')}, triton "
                      f"{env.get('triton')}, torch {env.get('torch')}): {len(cells)} cells =="]
        lines += matrix_lines(cells, catalogue)
    return lines + divergence_lines(doc)


TEXT = register_format(ReportFormat("text", ".txt", lambda doc, baseline: "\n".join(document_lines(doc)) + "\n",
                                    "the terminal matrix"))
