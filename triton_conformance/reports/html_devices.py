"""The cross-device parts of the HTML report: the devices, the divergences, and a cell's key and name."""

from __future__ import annotations

from typing import Any

from triton_conformance.model.cells import cell_id
from triton_conformance.model.outcomes import FAILING
from triton_conformance.reports.combine import divergence_line, is_cross_device
from triton_conformance.reports.html_detail import esc

__all__ = ["key", "name", "devices_header", "divergence_section", "divergence_row"]


def key(r: dict[str, Any]) -> tuple[str, str, str | None]:
    """A cell's key in the page: (subject, cell, device), the device None in a single-device document."""
    return (r["subject"], r["cell"], r.get("device"))


def name(r: dict[str, Any]) -> str:
    """``subject[cell]``, with `` on DEVICE`` in a cross-device matrix."""
    return cell_id(r["subject"], r["cell"]) + (f' on {r["device"]}' if r.get("device") else "")


def devices_header(doc: dict[str, Any]) -> str:
    """A cross-device matrix's devices, one line each (empty for a single-device document)."""
    if not is_cross_device(doc):
        return ""
    rows = "".join(f'<tr data-device="{esc(d.get("device"))}"><th>{esc(d.get("device"))}</th>'
                   f'<td>{esc((d.get("environment") or {}).get("device_name"))}</td>'
                   f'<td>triton {esc((d.get("environment") or {}).get("triton"))}, torch '
                   f'{esc((d.get("environment") or {}).get("torch"))}</td><td>{esc(d.get("cells"))} cells</td>'
                   f'<td>{esc(", ".join(d.get("files") or ()))}</td></tr>' for d in doc["devices"])
    return f'<table class="kv devices"><caption>devices</caption>{rows}</table>'


def divergence_section(found: list[dict[str, Any]], ids: dict[tuple[str, str, str | None], str]) -> str:
    """The cells whose verdicts differ between the devices: a finding of their own."""
    if not found:
        return ('<section class="divergence-section" id="divergences"><h2>Device divergences (0)</h2>'
                '<p class="muted">Every cell that ran on more than one device got the same verdict on each.</p>'
                '</section>')
    items = []
    for d in found:
        links = " ".join(f'<a href="#{ids[(d["subject"], d["cell"], dev)]}" '
                         f'data-detail="{ids[(d["subject"], d["cell"], dev)]}">{esc(dev)}: {esc(o)}</a>'
                         for dev, o in d["outcomes"].items() if (d["subject"], d["cell"], dev) in ids)
        items.append(f'<li class="divergence" data-kind="{esc(d["kind"])}" data-subject="{esc(d["subject"])}" '
                     f'data-cell="{esc(d["cell"])}">{esc(divergence_line(d))} <span class="muted">{links}</span></li>')
    return (f'<section class="divergence-section" id="divergences"><h2>Device divergences ({len(found)})</h2>'
            f'<p class="muted">Cells whose verdict differs between the devices: honoured on one and failing on '
            f'another is a finding of its own (a device-specific bug, or a kernel that is right only by '
            f'chance).</p><ul class="divergences">{"".join(items)}</ul></section>')


def divergence_row(subject: str, cells: list[str], found: dict[str, dict[str, Any]],
                    ids: dict[tuple[str, str, str | None], str]) -> str:
    """Under a subject's device rows: a mark in each cell whose verdict differs between the devices."""
    tds = []
    for c in cells:
        d = found.get(c)
        if d is None:
            tds.append(f'<td class="cell nodiv" data-cell="{esc(c)}"></td>')
            continue
        first = next((dev for dev, o in d["outcomes"].items() if o in FAILING), next(iter(d["outcomes"])))
        idx = ids.get((subject, c, first), "")
        tds.append(f'<td class="cell divergence-mark" data-cell="{esc(c)}" data-kind="{esc(d["kind"])}">'
                   f'<a href="#{idx}" data-detail="{idx}" title="{esc(divergence_line(d))}">≠</a></td>')
    return (f'<tr class="divergence" data-subject="{esc(subject)}"><th class="subject" scope="row">'
            f'<span class="device">devices differ</span></th>{"".join(tds)}</tr>')
