"""The results history as the reports show it, from the document's ``history`` section (written by the run
from its history store: see :mod:`triton_conformance.history.section`): the terminal's one line, and the
HTML page's "new since the last green run" list and per-cell strips of the last runs with a flake column."""

from __future__ import annotations

from typing import Any

from triton_conformance.reports.explain import COLOURS, LETTERS, text_colour
from triton_conformance.reports.html_detail import esc

__all__ = ["history_line", "new_since_green_html", "history_table_html"]

NOT_RUN = "\u00b7"  # a run that did not record the cell


def _short(commit: str | None) -> str:
    return (commit or "?")[:10]


def history_line(section: dict[str, Any]) -> str:
    """``history: 2 new failures, 1 new pass, 0 changed findings since the last green run (abc1234, run 12);
    3 flaky cells (1 flagged); 14 runs on H200 in <store>``."""
    new, flaky = section.get("new") or {}, section.get("flaky") or {}
    base = new.get("baseline")
    since = f"since the last green run ({_short(base['commit'])}, run {base['id']})" if base else \
        "with no green run before it on this device"
    counts = [(len(new.get("new_failures") or ()), "new failure"), (len(new.get("new_passes") or ()), "new pass"),
              (len(new.get("changed_findings") or ()), "changed finding")]
    words = ", ".join(f"{n} {w}{'es' if n != 1 and w.endswith('s') else 's' if n != 1 else ''}" for n, w in counts)
    flagged = sum(1 for f in flaky.values() if f.get("flagged"))
    return (f"history: {words} {since}; {len(flaky)} flaky cell{'s' if len(flaky) != 1 else ''} "
            f"({flagged} flagged); {len(section.get('runs') or ())} recent runs on {section.get('device')} "
            f"in {section.get('store')}")


def _item(entry: dict[str, Any]) -> str:
    then, now = entry.get("then"), entry["now"]
    was = f"{then['outcome']}{' ' + then['finding'] if then.get('finding') else ''}" if then else "not run"
    return (f"<li><code>{esc(entry['cell'])}</code>: {esc(was)} \u2192 "
            f"{esc(now['outcome'])}{' ' + esc(now['finding']) if now.get('finding') else ''}</li>")


def new_since_green_html(document: dict[str, Any]) -> str:
    """The list at the top of the page: what is new since the last green run; empty without a history."""
    section = document.get("history")
    if not isinstance(section, dict):
        return ""
    new = section.get("new") or {}
    base = new.get("baseline")
    title = (f"New since the last green run ({esc(_short(base['commit']))}, run {base['id']})" if base
             else "New since the last green run (none recorded on this device: every failure is new)")
    parts = []
    for key, label in (("new_failures", "new failures"), ("new_passes", "new passes"),
                       ("changed_findings", "changed findings")):
        entries = new.get(key) or []
        if entries:
            parts.append(f'<h3>{len(entries)} {label}</h3><ul class="history-{key}">'
                         + "".join(_item(e) for e in entries) + "</ul>")
    body = "".join(parts) or '<p class="muted">nothing changed</p>'
    return f'<section class="history-new"><h2>{title}</h2>{body}</section>'


def history_table_html(document: dict[str, Any]) -> str:
    """Each cell's outcomes over the last runs (oldest first, one square each) and its flake count."""
    section = document.get("history")
    if not isinstance(section, dict) or not section.get("strips"):
        return ""
    recorded = section.get("runs") or []
    flaky = section.get("flaky") or {}
    rows = []
    for name, strip in section["strips"].items():
        squares = []
        for run, outcome in zip(recorded, strip):
            tip = f"run {run['id']} at {_short(run['commit'])}: {outcome or 'not run'}"
            colour = COLOURS.get(outcome, "#eee") if outcome else "#eee"
            squares.append(f'<span class="h-run" title="{esc(tip)}" data-outcome="{esc(outcome or "")}" '
                           f'style="background:{colour};color:{text_colour(colour)};padding:0 3px">'
                           f'{esc(LETTERS.get(outcome, NOT_RUN) if outcome else NOT_RUN)}</span>')
        flake = flaky.get(name)
        flake_text = f"{flake['flips']} of {flake['runs']}" + (" \u26a0" if flake.get("flagged") else "") \
            if flake else ""
        rows.append(f'<tr data-cell="{esc(name)}"><td><code>{esc(name)}</code></td>'
                    f'<td class="h-strip">{"".join(squares)}</td><td class="h-flake">{esc(flake_text)}</td></tr>')
    return (f'<section class="history"><h2>History: the last {len(recorded)} runs on {esc(section.get("device"))}'
            f'</h2><p class="muted">oldest first; flakes: runs whose outcome differed from the most common one '
            f'at the same commit (\u26a0: above a stochastic cell\'s declared false-positive rate, or any flip '
            f'of a deterministic cell); from {esc(section.get("store"))}</p>'
            f'<table class="history-table"><thead><tr><th>cell</th><th>last runs</th><th>flakes</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></section>')
