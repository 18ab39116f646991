"""The HTML report's detail panel of one cell: message, counterexample, inputs in memory, error statistics,
plots, statistical tests, traceback and reproducer; and the small text helpers the page shares."""

from __future__ import annotations

from html import escape
from typing import Any

from triton_conformance.model.cells import Catalogue, cell_id
from triton_conformance.reports.explain import (
    COLOURS,
    finding_text,
    first_failure,
    incidental_note,
    informative,
    text_colour,
)
from triton_conformance.reports.svg import line_plot, series_points

__all__ = ["chip", "detail_section", "esc", "fmt", "kv"]


ERROR_FIELDS = (("max abs error", "max_abs_err"), ("max rel error", "max_rel_err"),
                ("first mismatch at", "first_index"), ("mismatched", "mismatched"), ("of", "total"),
                ("tolerance", "tolerance"), ("statistic", "statistic"), ("p-value", "p_value"))
# Keys shown elsewhere in the detail view, or repeats of the message.
_HIDDEN_DETAILS = {"message", "kind", "traceback", "series", "series_labels", "tests", "magnitudes_unavailable",
                   "no_triton_launch", "precision", "error_ulps", "allowance_used", "claims_of"}
# Detail keys a finding's words already say (findings in words, not raw keys).
_WORDED_DETAILS = {"oob-write": {"side", "byte_offset", "span_bytes", "shape", "dtype"},
                   "unwritten": {"unwritten", "output", "gradient"},
                   "mutated-input": {"inputs"}}
# A measured performance cell's figures: shown in their own table, not as error statistics.
PERF_FIELDS = (("bound", "bound"), ("achieved", "achieved"), ("unit", "unit"), ("peak", "peak"),
               ("fraction of peak", "fraction"), ("kernel ms (median)", "kernel_ms"),
               ("torch ms (median)", "baseline_ms"), ("speedup vs torch", "speedup"), ("bytes", "bytes"),
               ("flops", "flops"), ("dims", "dims"), ("dtypes", "dtypes"), ("timed calls", "reps"),
               ("timer", "timer"), ("peaks", "peaks"))


def _precision(details: dict) -> str:
    """The cell's precision: the verdict of a failing output (which precision it achieved) and the worst
    error of the cell's judged outputs, in ulps of the output dtype and as a share of the bound."""
    rows = []
    verdict = details.get("precision")
    if isinstance(verdict, dict):
        achieved = ("within the bound for {input} intermediates" if verdict.get("achieved") == "input-dtype"
                    else "worse than {input} intermediates: wrong").format(input=verdict.get("input", "input-dtype"))
        rows += [("achieved", achieved), ("claimed accumulation", verdict.get("claimed")),
                 ("error / claimed bound", verdict.get("ratio_claimed")),
                 ("error / input-dtype bound", verdict.get("ratio_input"))]
    if details.get("error_ulps") is not None:
        rows += [("worst error (output ulps)", details["error_ulps"]),
                 ("share of the bound used", details.get("allowance_used"))]
    return f'<h3>Precision</h3><div class="precision">{kv(rows)}</div>' if rows else ""


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


def fmt(value: Any) -> str:
    if value is None:
        return "\u2014"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(fmt(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items()) or "{}"
    return str(value)


def chip(outcome: str, text: str | None = None, **attrs: str) -> str:
    """An outcome's coloured label, coloured from the outcome table."""
    colour = COLOURS.get(outcome, "#999")
    extra = "".join(f' {k.replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return (f'<span class="count o-{esc(outcome)}" style="background:{colour};color:{text_colour(colour)}"{extra}>'
            f'{esc(outcome if text is None else text)}</span>')


def kv(rows: list[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(fmt(v))}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>' if body else ""


def _layout_text(layout: Any) -> str:
    if not isinstance(layout, dict):
        return fmt(layout)
    parts = [str(layout.get("kind", "?"))]
    for key in ("perm", "steps", "broadcast"):
        if layout.get(key):
            parts.append(f"{key}={fmt(layout[key])}")
    for key in ("pad", "offset", "odd_stride"):
        if layout.get(key):
            parts.append(f"{key}={layout[key]}")
    return " ".join(parts)


def _statistical_tests(tests: Any) -> str:
    """A stochastic cell's tests: what was observed and expected, and how surprising it was."""
    if not isinstance(tests, list) or not tests:
        return ""
    head = "<tr><th>test</th><th>observed</th><th>expected</th><th>n</th><th>p-value</th><th></th></tr>"
    body = "".join(
        f'<tr class="{"rejected" if t.get("rejected") else ""}"><td>{esc(t.get("description", ""))} '
        f'({esc(t.get("test", ""))})</td><td>{esc(fmt(t.get("statistic")))}</td><td>{esc(fmt(t.get("expected")))}'
        f'</td><td>{esc(t.get("n"))}</td><td>{float(t.get("p_value", 1.0)):.3g}</td>'
        f'<td>{"rejects the model" if t.get("rejected") else ""}</td></tr>'
        for t in sorted((t for t in tests if isinstance(t, dict)), key=lambda t: t.get("p_value", 1.0)))
    return f'<h3>Statistical tests (smallest p-value first)</h3><table class="kv stats">{head}{body}</table>'


def _tensors(tensors: Any) -> str:
    """Each input's real shape, strides, storage offset and dtype, as the launcher saw it."""
    if not isinstance(tensors, dict) or not tensors:
        return ""
    head = "<tr><th>input</th><th>shape</th><th>strides</th><th>storage offset</th><th>dtype</th></tr>"
    body = "".join(
        f'<tr data-input="{esc(name)}"><td>{esc(name)}</td><td>{esc(fmt(t.get("shape")))}</td>'
        f'<td class="strides">{esc(fmt(t.get("strides")))}</td><td>{esc(fmt(t.get("storage_offset")))}</td>'
        f'<td>{esc(fmt(t.get("dtype")))}</td></tr>'
        for name, t in tensors.items() if isinstance(t, dict))
    return f'<h3>Inputs in memory</h3><table class="kv tensors">{head}{body}</table>' if body else ""


def _counterexample(spec: dict[str, Any]) -> str:
    if "last_launch" in spec:  # a stochastic cell: the seed and its design reproduce it
        launch = spec.get("last_launch") or {}
        return "<h3>Counterexample</h3>" + kv([("seed", spec.get("seed")), ("input shapes", launch.get("shapes")),
                                                 ("dtype", launch.get("dtype")), ("arguments", launch.get("params"))])
    rows: list[tuple[str, Any]] = [("dims", spec.get("dims")), ("dtypes", spec.get("dtypes"))]
    for name, layout in (spec.get("layouts") or {}).items():
        rows.append((f"layout of {name}", _layout_text(layout)))
    if spec.get("scalars"):
        rows.append(("scalars", spec["scalars"]))
    rows += [("values", spec.get("values")), ("mask", spec.get("mask")), ("seed", spec.get("seed"))]
    title = "Shrunk counterexample" if spec.get("shrunk", True) else "Counterexample (as recorded, not shrunk)"
    return (f"<h3>{title}</h3>" + kv([r for r in rows if r[1] not in (None, {})])
            + _tensors(spec.get("tensors")))


def _plots(details: dict[str, Any]) -> str:
    """Plots of the series that carry information: two points or more, not all zero (NaNs are dropped)."""
    labels = details.get("series_labels") if isinstance(details.get("series_labels"), dict) else {}
    out = []
    for key, value in details.items():
        points = series_points(value)
        if not informative(points):
            continue
        title = "error vs size" if key == "series" else key.replace("_", " ")
        out.append(line_plot(points, title=title, x_label=str(labels.get("x", "size")),
                             y_label=str(labels.get("y", "error")), boundary=first_failure(value)))
    return ("<h3>Plots</h3>" + "".join(out)) if out else ""


def _failure_boundary(details: dict[str, Any]) -> list[tuple[str, Any]]:
    """"first failing size": the sizes either side of where the error-vs-size series starts failing."""
    found = first_failure(details.get("series"))
    if found is None:
        return []
    labels = details.get("series_labels") if isinstance(details.get("series_labels"), dict) else {}
    axis = str(labels.get("x", "size")).split(" (")[0]
    return [("first failing size", f"{axis} = {fmt(found[1])} (passes at {fmt(found[0])})")]


def detail_section(idx: str, r: dict[str, Any], change: str | None, catalogue: Catalogue) -> str:
    details = r.get("details") if isinstance(r.get("details"), dict) else {}
    words = finding_text(r)
    where = f' <span class="device">on {esc(r["device"])}</span>' if r.get("device") else ""
    head = (f'<h2>{esc(cell_id(r["subject"], r["cell"]))}{where}</h2>'
            f'<p class="verdict">{chip(r["outcome"])} <span class="finding">{esc(words)}</span>'
            + (f' <code class="finding-key" title="finding">{esc(r["finding"])}</code>' if r.get("finding") else "")
            + (f' <span class="badge" title="{esc(r["expected_failure"])}">known bug</span>'
               if r.get("expected_failure") else "") + "</p>")
    parts = [head]
    what = catalogue.describe(r["cell"])
    if what:
        parts.append(f'<p class="muted cell-meaning">{esc(r["cell"])}: {esc(what)}</p>')
    note = incidental_note(r)
    if note:
        parts.append(f'<p class="incidental"><strong>Not what this column tests:</strong> {esc(note)}</p>')
    if r.get("expected_failure"):
        parts.append(f'<p class="muted">Known bug: {esc(r["expected_failure"])}</p>')
    if change:
        parts.append(f'<p><strong>Since the baseline:</strong> {esc(change)}</p>')
    if r.get("message") and r["message"] != words:
        parts.append(f'<p class="message">{esc(r["message"])}</p>')
    if details.get("no_triton_launch"):
        parts.append(f'<p class="no-triton-launch"><strong>Note:</strong> {esc(details["no_triton_launch"])}</p>')
    if details.get("claims_of"):
        parts.append(f'<p class="claims-of"><strong>Claims:</strong> the contract\'s {esc(repr(details["claims_of"]))} '
                     'claims (its dtypes, tolerance or accumulation differ by device)</p>')
    if details.get("magnitudes_unavailable"):
        parts.append(f'<p class="magnitudes-unavailable"><strong>Magnitudes unavailable:</strong> '
                     f'{esc(details["magnitudes_unavailable"])}; judged by the plain bound alone</p>')
    parts.append(_precision(details))
    if isinstance(r.get("counterexample"), dict):
        parts.append(_counterexample(r["counterexample"]))
    measured = r["cell"] == "performance" and details.get("fraction") is not None
    if measured:
        parts.append("<h3>Performance</h3>" + kv([(label, details[key]) for label, key in PERF_FIELDS
                                                   if details.get(key) is not None]))
    stats = [(label, details[key]) for label, key in ERROR_FIELDS if key in details]
    stats += _failure_boundary(details)
    known = ({key for _, key in ERROR_FIELDS} | _HIDDEN_DETAILS | _WORDED_DETAILS.get(r.get("finding"), set())
             | ({k for _, k in PERF_FIELDS} if measured else set()))
    stats += [(k, v) for k, v in details.items() if k not in known and not series_points(v)]
    if stats:
        parts.append("<h3>Error statistics</h3>" + kv(stats))
    parts.append(_statistical_tests(details.get("tests")))
    parts.append(_plots(details))
    if r.get("reproducer"):
        pre = f"repro-{idx}"
        parts.append(f'<h3>Reproducer</h3><p><button type="button" class="copy" data-target="{pre}">Copy</button>'
                     f'<span class="copied" aria-live="polite"></span></p>'
                     f'<pre id="{pre}" class="reproducer"><code>{esc(r["reproducer"])}</code></pre>')
    if details.get("traceback"):
        parts.append(f'<h3>Traceback</h3><pre class="traceback">{esc(details["traceback"])}</pre>')
    parts.append("<h3>Run</h3>" + kv([("examples", r.get("examples")), ("rejected examples",
                                       r.get("rejected_examples")), ("seconds", r.get("duration_s")),
                                      ("compiles", r.get("compiles")), ("family", r.get("family"))]))
    return f'<section class="detail" id="{idx}" hidden>{"".join(parts)}</section>'


