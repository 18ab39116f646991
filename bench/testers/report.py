"""The benchmark's tables, as Markdown: one row per tester, then one row per bug."""

from __future__ import annotations

from typing import Any

__all__ = ["bug_table", "summary_table"]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _s(x: float | None) -> str:
    return "n/a" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.0f}")


def summary_table(summaries: list[dict[str, Any]]) -> str:
    lines = [("| tester | bugs caught | recall (detectable here) | false alarms (runs) | median / max s to detect "
              "(CPU s) | median / max s to verdict (shrunk) | serial s (detect + false alarms; CPU s) |"),
             "|---|---|---|---|---|---|---|"]
    for s in summaries:
        if s["unavailable"]:
            lines.append(f"| {s['tester']} | unavailable: {s['unavailable']} | | | | | |")
            continue
        skipped = f" ({s['skipped']} skipped)" if s["skipped"] else ""
        skipped += f" ({s['timeouts']} timed out)" if s.get("timeouts") else ""
        lines.append(
            f"| {s['tester']} | {s['caught']}/{s['bugs']}{skipped} | {_pct(s['recall_detectable'])} "
            f"({s['detectable']} detectable) | {s['false_alarms']} ({s['runs']}) | "
            f"{_s(s['median_detect_s'])} / {_s(s['max_detect_s'])} "
            f"({_s(s['median_detect_cpu_s'])} / {_s(s['max_detect_cpu_s'])}) | "
            f"{_s(s['median_verdict_s'])} / {_s(s['max_verdict_s'])} | "
            f"{_s(s['detect_wall_s'])} + {_s(s['false_alarm_wall_s'])}; {_s(s['cpu_s'])} |")
    return "\n".join(lines)


def _cell(d: dict[str, Any] | None) -> str:
    if d is None:
        return "not run"
    if d["status"] == "caught":
        size = f", size {d['size']}" if d.get("size") is not None else ""
        first = d.get("first_failure_s")
        t = _s(d.get("seconds")) if first is None or first == d.get("seconds") else \
            f"{_s(first)}/{_s(d.get('seconds'))}"
        return f"**{d.get('case')}** ({t} s{size})"
    if d["status"] == "skipped":
        return "skipped"
    if d["status"] == "error":
        return "harness error"
    if d["status"] == "timeout":
        return f"timeout ({_s(d.get('seconds'))} s, at {d.get('case')})"
    return f"missed ({_s(d.get('seconds'))} s)"


def bug_table(detections: list[dict[str, Any]], testers: list[str]) -> str:
    bugs = list(dict.fromkeys(d["bug"] for d in detections))
    by = {(d["tester"], d["bug"]): d for d in detections}
    lines = ["| bug | intended cell | " + " | ".join(testers) + " |", "|---|---|" + "---|" * len(testers)]
    for bug in bugs:
        first = next(d for d in detections if d["bug"] == bug)
        cell = first["intended_cell"] + ("" if first.get("detectable", True) else " (not here)")
        lines.append(f"| {bug} | {cell} | " + " | ".join(_cell(by.get((t, bug))) for t in testers) + " |")
    return "\n".join(lines)
