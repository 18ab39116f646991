"""The report's list of failing cells, at the top of the page: one line per finding.

Cells of a subject that found the same thing (outcome, finding kind, shrunk
dims: :mod:`.findings`) are one line naming its cells; a known bug's cells
follow, one line per subject; failures that are no verdict about the kernel
(an oracle that raised, a harness error) say so.
"""

from __future__ import annotations

from typing import Any, Callable

from triton_conformance.model.cells import Catalogue
from triton_conformance.model.outcomes import FAILING
from triton_conformance.reports.explain import KERNEL_FAULTS, finding_text
from triton_conformance.reports.findings import FindingGroup, finding_groups
from triton_conformance.reports.html_detail import chip, esc, fmt
from triton_conformance.reports.html_devices import name as _name

__all__ = ["failing_section"]


def _dims_text(r: dict[str, Any]) -> str:
    cx = r.get("counterexample") if isinstance(r.get("counterexample"), dict) else {}
    dims = cx.get("dims")
    return f" at {fmt(dims)}" if isinstance(dims, dict) and dims else ""


def failing_section(results: list[dict[str, Any]], catalogue: Catalogue,
                    link: Callable[[dict[str, Any], str], str]) -> str:
    """Every failing cell, at the top of the page as in the terminal summary.

    New failures come first, one line per finding with it in words (cells of a subject with the same
    outcome, finding and shrunk dims are one finding: :mod:`.findings`); a known
    bug's failing cells follow, one line per subject, so they do not push the
    matrix off the first screen.  ``link(result, text)``: ``text`` linking to the result's detail panel.
    """
    failing = [r for r in results if r["outcome"] in FAILING]
    if not failing:
        return ('<section class="failing-section" id="failing"><h2>Failing cells (0)</h2>'
                '<p class="muted">No cell failed.</p></section>')
    failing.sort(key=lambda r: (r["subject"], catalogue.sort_key(r["cell"])))

    def item(group: FindingGroup) -> str:  # one finding, and the other cells that found the same
        r = group.first
        also = ", ".join(link(o, esc(o["cell"]) + (f' on {esc(o["device"])}' if o.get("device") else ""))
                         for o in group.others)
        same = f' <span class="muted same-finding">(the same finding in {also})</span>' if also else ""
        apart = "" if r["outcome"] in KERNEL_FAULTS else ' <span class="badge">not a verdict about the kernel</span>'
        return (f'<li data-known="0" data-cells="{len(group.cells)}">{link(r, esc(_name(r)))} {chip(r["outcome"])}'
                f'{apart} {esc(finding_text(r) or r.get("message") or "")}{esc(_dims_text(r))}{same}</li>')

    def excused(r: dict[str, Any]) -> bool:  # a known bug excuses the kernel's failures, nothing else
        return bool(r.get("expected_failure")) and r["outcome"] in KERNEL_FAULTS

    items = [item(g) for g in finding_groups(r for r in failing if not excused(r))]
    known: dict[str, list[dict[str, Any]]] = {}
    for r in failing:
        if excused(r):
            known.setdefault(r["subject"], []).append(r)
    for subject, group in known.items():
        cells = ", ".join(link(r, esc(r["cell"]) + (f' on {esc(r["device"])}' if r.get("device") else ""))
                          for r in group)
        items.append(f'<li data-known="1" data-subject="{esc(subject)}"><strong>{esc(subject)}</strong> '
                     f'<span class="badge" title="{esc(group[0]["expected_failure"])}">known bug</span> '
                     f'{len(group)} failing cell{"" if len(group) == 1 else "s"}, as expected '
                     f'({esc(group[0]["expected_failure"])}): {cells}</li>')
    known_n = sum(len(g) for g in known.values())
    note = f' <span class="muted">({known_n} of them known bugs)</span>' if known_n else ""
    return (f'<section class="failing-section" id="failing"><h2>Failing cells ({len(failing)}){note}</h2>'
            f'<ul class="failing">{"".join(items)}</ul></section>')
