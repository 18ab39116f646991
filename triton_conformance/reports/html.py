"""The self-contained HTML report, rendered only from a results document.

One file with inline style, script and SVG: no network access, readable
offline and attachable to a CI run.  Every string that comes from the
document (subject names, messages, tracebacks, reproducers) is escaped.

- ``render_html(document, baseline=None)``: the page as a string; with a
  baseline document it also shows the nightly diff.
- ``write_html(path, document, baseline=None)``.
"""

from __future__ import annotations

from typing import Any

from triton_conformance.model.cells import Catalogue, cell_id
from triton_conformance.model.outcomes import FAILING, OUTCOME_TABLE, OUTCOMES
from triton_conformance.model.performance import figures_line
from triton_conformance.reports._html_assets import CSS, JS
from triton_conformance.reports.combine import divergences, is_cross_device
from triton_conformance.reports.diff import ResultsDiff, diff_documents
from triton_conformance.reports.formats import ReportFormat, register_format, write_report
from triton_conformance.reports.explain import (
    COLOURS,
    KERNEL_FAULTS,
    LETTERS,
    finding_text,
    incidental_note,
    skip_example,
    skip_groups,
    text_colour,
)
from triton_conformance.reports.html_detail import chip, detail_section, esc, fmt
from triton_conformance.reports.html_devices import divergence_row as _divergence_row
from triton_conformance.reports.html_devices import divergence_section as _divergence_section
from triton_conformance.reports.html_devices import devices_header as _devices_header
from triton_conformance.reports.html_devices import key as _key
from triton_conformance.reports.html_findings import failing_section
from triton_conformance.reports.history_view import history_table_html, new_since_green_html
from triton_conformance.reports.results_json import catalogue_of

__all__ = ["render_html", "write_html"]

ENV_FIELDS = (("device", "device_name"), ("triton", "triton"), ("torch", "torch"), ("python", "python"),
              ("hypothesis", "hypothesis"), ("profile", "profile"), ("seed", "seed"), ("commit", "commit"),
              ("host", "host"), ("platform", "platform"), ("triton-conformance", "triton_conformance"),
              ("interpreter shims", "compat"))
_WIDE = 40  # characters past which an environment value spans the header's full width


def _header(doc: dict[str, Any]) -> str:
    env = doc.get("environment") or {}
    created = str(doc.get("created") or "")
    date = created.replace("T", " ").replace("+00:00", " UTC") if created else None
    items = [("date", date)] + [(label, env.get(key)) for label, key in ENV_FIELDS]
    texts = [(k, fmt(v) if k != "seed" or v is not None else "derandomized") for k, v in items]
    # A long value (the list of interpreter shims) takes a whole row rather than a narrow column.
    body = "".join(f'<div{" class=wide" if len(str(text)) > _WIDE else ""}><dt>{esc(k)}</dt><dd>{esc(text)}'
                   f"</dd></div>" for k, text in texts)
    return (f'<header><h1>Triton conformance report</h1><dl class="env">{body}</dl>'
            f'{_devices_header(doc)}'
            f'<p class="muted">schema {esc(doc.get("schema"))} v{esc(doc.get("version"))}</p></header>')


def _summary(results: list[dict[str, Any]], subjects: int, devices: int = 1) -> str:
    counts = {o: 0 for o in OUTCOMES}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    total = max(len(results), 1)
    chips = "".join(chip(o, f"{o} {n}", data_count=o) for o, n in counts.items())
    bar = "".join(f'<span style="width:{100 * n / total:.3f}%;background:{COLOURS.get(o, "#999")}" '
                  f'title="{esc(o)}: {n}"></span>' for o, n in counts.items() if n)
    return (f'<section class="summary-section"><h2>Summary</h2><div class="summary">'
            f'<strong>{subjects} subjects, {len(results)} cells'
            f'{f" on {devices} devices" if devices > 1 else ""}</strong>{chips}</div>'
            f'<div class="bar">{bar}</div>{_skips(results)}</section>')


def _skips(results: list[dict[str, Any]]) -> str:
    """Skipped cells counted by kind of reason (its code), each with one real message:
    "57 skipped (values:not-claimed), e.g.: value class 'nan' not claimed"."""
    items = []
    for code, group in skip_groups(results):
        messages = list(dict.fromkeys(r.get("message") or "" for r in group))
        tip = "\n".join(messages[:6]) + (f"\n\u2026 and {len(messages) - 6} more" if len(messages) > 6 else "")
        items.append(f'<li title="{esc(tip)}" data-skip-count="{len(group)}"><strong>{len(group)} skipped</strong> '
                     f'({esc(code)}){", e.g." if len(group) > 1 else ""}: {esc(skip_example(group))}</li>')
    return f'<ul class="skips">{"".join(items)}</ul>' if items else ""


def _filters(families: list[str], devices: list[str] | None = None) -> str:
    boxes = "".join(f'<label><input type="checkbox" name="outcome" value="{esc(o)}" checked> '
                    f'<span class="swatch" style="background:{COLOURS[o]}"></span> {esc(o)}</label>'
                    for o in OUTCOMES)
    options = "".join(f'<option value="{esc(f)}">{esc(f)}</option>' for f in families)
    device = ""
    if devices:
        choices = "".join(f'<option value="{esc(d)}">{esc(d)}</option>' for d in devices)
        device = (f'<label>device <select id="device-filter"><option value="">all</option>{choices}</select>'
                  f'</label><label><input type="checkbox" id="divergent-filter"> divergent only</label>')
    return (f'<section class="filters-section"><div class="filters">{boxes}'
            f'<button type="button" id="failing-only" data-outcomes="{esc(" ".join(FAILING))}">failing only</button>'
            f'<button type="button" id="show-all">show all</button></div><div class="filters" style="margin-top:6px">'
            f'<label>subject <input type="search" id="subject-filter" placeholder="name contains"></label>'
            f'<label>family <select id="family-filter"><option value="">all</option>{options}</select></label>'
            f'{device}'
            f'<label><input type="checkbox" id="known-filter" checked> known-bug subjects</label>'
            f'<span class="muted"><span id="visible-rows"></span> subjects shown; '
            f'* marks a known bug\'s cell; <a href="#legend">what the letters and cells mean</a></span></div>'
            f'</section>')


def _legend(cells: list[str], catalogue: Catalogue) -> str:
    """The letters (from the outcome table), the marks, and every cell of the matrix in one line each."""
    outcomes = "".join(
        f'<tr data-outcome="{esc(o.name)}"><td><span class="legend-cell" style="background:{o.colour};'
        f'color:{text_colour(o.colour)}">{esc(o.letter)}</span></td><th>{esc(o.name)}</th>'
        f'<td>{esc(o.summary)}</td></tr>' for o in OUTCOME_TABLE)
    marks = [("none", "", "not applicable", "the subject's contract has no such cell (a mask cell for a kernel "
                                             "without a mask, a stochastic cell for a deterministic one)"),
             ("known", LETTERS["wrong"], "* known bug", "a failing cell of a subject declared with xfail=: "
                                                       "expected, it does not fail the run"),
             ("incidental", LETTERS["wrong"], "corner mark", "the cell failed on something other than what its "
                                                             "column tests, e.g. a wrong answer found while "
                                                             "checking memory safety; its detail says what"),
             ("regressed", "", "black outline", "regressed since the baseline"),
             ("fixed", "", "green outline", "fixed since the baseline")]
    mark_rows = "".join(
        f'<tr data-mark="{esc(cls)}"><td><span class="legend-cell {cls}"'
        + (f' style="background:{COLOURS["wrong"]};color:#fff"' if letter else "")
        + f'>{esc(letter)}</span></td><th>{esc(name)}</th><td>{esc(text)}</td></tr>'
        for cls, letter, name, text in marks)
    groups: dict[str, list[str]] = {}
    for c in cells:
        groups.setdefault(c.partition(":")[0], []).append(c)
    entries = []
    for dim, members in groups.items():
        items = "".join(f'<div data-cell="{esc(c)}"><dt>{esc(c.partition(":")[2] or c)}</dt>'
                        f'<dd>{esc(_class_summary(catalogue, c) or "(no description)")}</dd>'
                        f'</div>' for c in members)
        entries.append(f'<div class="legend-dim"><h4>{esc(dim)}</h4><dl>{items}</dl></div>')
    return (f'<section class="legend-section" id="legend"><h2>Legend</h2><div class="legend">'
            f'<table class="kv legend-outcomes">{outcomes}{mark_rows}</table>'
            f'<div class="legend-cells">{"".join(entries)}</div></div></section>')


def _class_summary(catalogue: Catalogue, cell: str) -> str:
    """A cell's own line (without its dimension's prefix), as the legend lists it under the dimension."""
    dimension, value = cell.partition(":")[0], cell.partition(":")[2]
    for d in catalogue.dimensions:
        if d.name == dimension:
            for c in d.classes:
                if c.value == value:
                    return c.summary
    return ""


def _diff_section(diff: ResultsDiff, ids: dict[tuple[str, str, str | None], str]) -> str:
    def item(c: Any) -> str:
        idx = ids.get((c.subject, c.cell, c.device))
        text = esc(c.line())
        return f'<li><a href="#{idx}" data-detail="{idx}">{text}</a></li>' if idx else f"<li>{text}</li>"

    parts = [f'<p class="muted">baseline {esc(diff.baseline.get("created"))} '
             f'({esc((diff.baseline.get("environment") or {}).get("device_name"))}, commit '
             f'{esc((diff.baseline.get("environment") or {}).get("commit"))})</p>']
    if diff.is_empty:
        parts.append('<p class="muted">No cell changed.</p>')
    for title, changes in (("Regressions", diff.regressions), ("Fixes", diff.fixes),
                           ("Other changes", diff.changed), ("New cells", diff.new_cells),
                           ("Removed cells", diff.removed_cells)):
        if changes:  # an empty section is left out
            parts.append(f'<h3 data-diff="{esc(title.lower())}">{esc(title)} ({len(changes)})</h3>'
                         + "<ul>" + "".join(item(c) for c in changes) + "</ul>")
    for title, names in (("New subjects", diff.new_subjects), ("Removed subjects", diff.removed_subjects)):
        if names:
            parts.append(f'<h3 data-diff="{esc(title.lower())}">{esc(title)} ({len(names)})</h3>'
                         + "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in names) + "</ul>")
    return f'<section class="diff" id="diff"><h2>Changes since the baseline</h2>{"".join(parts)}</section>'


def _perf_text(r: dict[str, Any]) -> tuple[str, str]:
    """A measured performance cell's percent of peak for the matrix, and its figures for the tooltip."""
    details = r.get("details") if isinstance(r.get("details"), dict) else {}
    if r.get("cell") != "performance" or not isinstance(details.get("fraction"), (int, float)):
        return "", ""
    return f"{100 * details['fraction']:.0f}", figures_line(details)


def _performance_section(results: list[dict[str, Any]], ids: dict[tuple[str, str, str | None], str]) -> str:
    """A table of every measured performance cell: achieved against the measured peak and against torch."""
    rows = []
    for r in results:
        d = r.get("details") if isinstance(r.get("details"), dict) else {}
        if r["cell"] != "performance" or not isinstance(d.get("fraction"), (int, float)):
            continue
        idx, unit = ids[_key(r)], d.get("unit", "")
        speedup = f"{d['speedup']:.2f}x" if isinstance(d.get("speedup"), (int, float)) else "\u2014"
        cells = [fmt(d.get("dims")), f"{fmt(d.get('achieved'))} {unit}", f"{fmt(d.get('peak'))} {unit}",
                 f"{100 * d['fraction']:.1f}%", fmt(d.get("kernel_ms")), fmt(d.get("baseline_ms")), speedup]
        rows.append(f'<tr data-subject="{esc(r["subject"])}"><th scope="row"><a href="#{idx}" data-detail="{idx}">'
                    f'{esc(r["subject"])}{esc(" on " + r["device"]) if r.get("device") else ""}</a></th>' + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    if not rows:
        return ""
    head = "".join(f"<th>{esc(h)}</th>" for h in ("subject", "size", "achieved", "measured peak", "fraction",
                                                    "kernel ms", "torch ms", "speedup"))
    return (f'<section class="performance-section" id="performance"><h2>Performance</h2>'
            f'<p class="muted">Median of CUDA-event timings with a cold L2; peaks measured on this device '
            f'through torch (copy bandwidth; matmul rate per dtype).</p>'
            f'<table class="kv performance"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            f'</table></section>')


def _link(r: dict[str, Any], text: str, ids: dict[tuple[str, str, str | None], str]) -> str:
    """``text`` linking to the detail panel of result ``r``, with the matrix cell's tooltip."""
    idx = ids[_key(r)]
    return f'<a href="#{idx}" data-detail="{idx}" title="{esc(_cell_tip(r["subject"], r["cell"], r))}">{text}</a>'


def _cell_tip(subject: str, c: str, r: dict[str, Any]) -> str:
    """A matrix cell's tooltip: what was found, in words; a skip's reason; a failure outside the column's concern."""
    outcome = r["outcome"]
    tip = f"{cell_id(subject, c)}: {outcome}"
    if outcome == "skipped":
        return tip + (f": {r['message']}" if r.get("message") else "")
    note = incidental_note(r)
    if note:
        return f"{tip}, {note}"
    words = finding_text(r)
    if words:
        tip += f": {words}"
    _, perf = _perf_text(r)
    return tip + (f": {perf}" if perf else "")


def _matrix(results: list[dict[str, Any]], ids: dict[tuple[str, str, str | None], str],
            marks: dict[tuple[str, str, str | None], str], cells: list[str], catalogue: Catalogue,
            devices: list[str] | None = None, found: list[dict[str, Any]] | None = None) -> str:
    """The matrix; of a cross-device document, a sub-row per device under each subject, then a divergence row."""
    groups: dict[str, list[str]] = {}
    for c in cells:
        groups.setdefault(c.partition(":")[0], []).append(c)
    head1 = ['<th class="subject" rowspan="2">subject</th>']
    head2 = []
    for dim, members in groups.items():
        single = len(members) == 1 and ":" not in members[0]
        if single:
            tip = f"{dim}: {catalogue.describe(dim)}" if catalogue.describe(dim) else dim
            head1.append(f'<th rowspan="2" class="single" data-dimension="{esc(dim)}" data-cell="{esc(dim)}" '
                         f'title="{esc(tip)}"><span>{esc(dim)}</span></th>')
        else:
            head1.append(f'<th colspan="{len(members)}" data-dimension="{esc(dim)}">{esc(dim)}</th>')
        if not single:
            for c in members:
                what = catalogue.describe(c)
                head2.append(f'<th data-cell="{esc(c)}" title="{esc(f"{c}: {what}" if what else c)}">'
                             f'<span>{esc(c.partition(":")[2])}</span></th>')
    families: dict[str, dict[tuple[str, str | None], dict[str, dict[str, Any]]]] = {}
    for r in results:
        families.setdefault(r.get("family") or r["subject"], {}).setdefault(
            (r["subject"], r.get("device")), {})[r["cell"]] = r
    order = {d: i for i, d in enumerate(devices or ())}
    diverging: dict[str, dict[str, dict[str, Any]]] = {}
    for d in found or ():
        diverging.setdefault(d["subject"], {})[d["cell"]] = d
    bodies = []
    for family in sorted(families):
        rows = [f'<tr class="family-row"><th colspan="{len(cells) + 1}">{esc(family)}</th></tr>']
        keys = sorted(families[family], key=lambda k: (k[0], order.get(k[1], -1)))
        for n, (subject, device) in enumerate(keys):
            row = families[family][(subject, device)]
            known = next((r["expected_failure"] for r in row.values() if r.get("expected_failure")), None)
            badge = f'<span class="badge" title="{esc(known)}">known bug</span>' if known else ""
            if device is not None:
                badge += f' <span class="device" title="device">{esc(device)}</span>'
            tds = []
            for c in cells:
                r = row.get(c)
                if r is None:
                    tds.append(f'<td class="cell none" data-cell="{esc(c)}" title="{esc(f"{cell_id(subject, c)}: not applicable, its contract has no such cell")}"></td>')
                    continue
                idx, outcome = ids[(subject, c, device)], r["outcome"]
                classes = ["cell", f"o-{outcome}"] + (["known"] if known and outcome in KERNEL_FAULTS else [])
                if incidental_note(r):
                    classes.append("incidental")
                if c in diverging.get(subject, {}):
                    classes.append("divergent")
                if (subject, c, device) in marks:
                    classes.append(marks[(subject, c, device)])
                text, _ = _perf_text(r)
                colour = COLOURS.get(outcome, "#999")
                tds.append(f'<td class="{" ".join(classes)}" data-cell="{esc(c)}" data-outcome="{esc(outcome)}" '
                           f'style="background:{colour}"><a href="#{idx}" data-detail="{idx}" '
                           f'style="color:{text_colour(colour)}" title="{esc(_cell_tip(subject, c, r))}">'
                           f'{esc(text) if text else esc(LETTERS.get(outcome, "?"))}</a></td>')
            attrs = f' data-device="{esc(device)}"' if device is not None else ""
            if subject in diverging:
                attrs += ' data-divergent="1"'
            rows.append(f'<tr class="subject" data-subject="{esc(subject)}" data-known="{1 if known else 0}"{attrs}>'
                        f'<th class="subject" scope="row">{esc(subject)}{badge}</th>{"".join(tds)}</tr>')
            last = n + 1 == len(keys) or keys[n + 1][0] != subject
            if device is not None and last and subject in diverging:
                rows.append(_divergence_row(subject, cells, diverging[subject], ids))
        bodies.append(f'<tbody class="family" data-family="{esc(family)}">{"".join(rows)}</tbody>')
    key = " \u00b7 ".join(f"{o.letter} {o.name}" for o in OUTCOME_TABLE)
    return (f'<section class="matrix-section"><h2>Matrix</h2><p class="muted key">{esc(key)} \u00b7 hatched: not '
            f'applicable \u00b7 hover a column or a cell for what it means, click a cell for its detail '
            f'(<a href="#legend">legend</a>)</p><div class="matrix-wrap"><table class="matrix">'
            f'<thead><tr class="dims">{"".join(head1)}</tr><tr class="values">{"".join(head2)}</tr></thead>'
            f'{"".join(bodies)}</table></div></section>')


def render_html(document: dict[str, Any], *, baseline: dict[str, Any] | None = None) -> str:
    """The report page for ``document`` (as read by ``read_results``), with the diff if ``baseline``."""
    catalogue = catalogue_of(document)
    cross = is_cross_device(document)
    devices = [str(d.get("device")) for d in document["devices"]] if cross else None
    if cross:  # every cell names its device
        results = [dict(r, device=r.get("device") or devices[0]) for r in document.get("results") or ()]
    else:
        results = [{k: v for k, v in r.items() if k != "device"} for r in document.get("results") or ()]
    position = {d: i for i, d in enumerate(devices or ())}
    results.sort(key=lambda r: (r.get("family") or "", r["subject"], catalogue.sort_key(r["cell"]),
                                position.get(r.get("device"), 0)))
    found = divergences(dict(document, results=results)) if cross else []
    ids = {_key(r): f"d{i}" for i, r in enumerate(results)}
    diff = diff_documents(baseline, document) if baseline is not None else None
    marks: dict[tuple[str, str, str | None], str] = {}
    changes: dict[tuple[str, str, str | None], str] = {}
    if diff is not None:
        for kind, group in (("regressed", diff.regressions), ("fixed", diff.fixes), ("changed", diff.changed),
                            ("new", diff.new_cells)):
            for c in group:
                marks[(c.subject, c.cell, c.device)] = kind
                changes[(c.subject, c.cell, c.device)] = c.line()
    families = sorted({r.get("family") or r["subject"] for r in results})
    subjects = len({r["subject"] for r in results})
    cells = catalogue.sorted(r["cell"] for r in results)
    body = [_header(document), "<main>", _summary(results, subjects, len(devices or ())),
            new_since_green_html(document)]
    if results:
        body.append(failing_section(results, catalogue, lambda r, text: _link(r, text, ids)))
    if cross:
        body.append(_divergence_section(found, ids))
    if diff is not None:
        body.append(_diff_section(diff, ids))
    if results:
        body += [_filters(families, devices), _matrix(results, ids, marks, cells, catalogue, devices, found),
                 _performance_section(results, ids), history_table_html(document), _legend(cells, catalogue)]
    else:
        body.append('<section><p class="muted">This results file holds no cells.</p></section>')
    body.append("</main>")
    details = "".join(detail_section(ids[_key(r)], r, changes.get(_key(r)), catalogue) for r in results)
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            'style-src \'unsafe-inline\'; script-src \'unsafe-inline\'; img-src data:">'
            f'<title>Triton conformance report \u2014 {esc(document.get("created") or "")}</title>'
            f'<style>{CSS}</style><noscript><style>#panel, .detail {{ display: block !important; '
            f'position: static !important; width: auto !important; }}</style></noscript></head><body>'
            f'{"".join(body)}<aside id="panel" hidden aria-label="cell detail">'
            f'<button type="button" class="close" title="close (Esc)">\u00d7</button>{details}</aside>'
            f'<script>{JS}</script></body></html>\n')


def write_html(path: str, document: dict[str, Any], *, baseline: dict[str, Any] | None = None) -> str:
    """Write the report for ``document`` to ``path``; returns the absolute path."""
    return write_report(path, document, HTML, baseline=baseline)


HTML = register_format(ReportFormat("html", ".html", lambda doc, baseline: render_html(doc, baseline=baseline),
                                    "the matrix page, with each cell's detail"))
