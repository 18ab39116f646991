"""Small inline SVG plots for the HTML report: no library, no network."""

from __future__ import annotations

import math
from html import escape
from typing import Any, Iterable

__all__ = ["series_points", "line_plot"]

WIDTH, HEIGHT = 420, 220
LEFT, RIGHT, TOP, BOTTOM = 62, 12, 24, 40


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def series_points(series: Any) -> list[tuple[float, float]]:
    """The finite (x, y) pairs of a ``[{"x": .., "y": ..}, ...]`` list; [] for anything else."""
    if not isinstance(series, list):
        return []
    points = []
    for p in series:
        if isinstance(p, dict):
            x, y = _number(p.get("x")), _number(p.get("y"))
            if x is not None and y is not None:
                points.append((x, y))
    return sorted(points)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


def line_plot(points: Iterable[tuple[float, float]], *, title: str, x_label: str = "x",
              y_label: str = "y", boundary: tuple[float, float] | None = None) -> str:
    """An SVG line plot of ``points``; y goes logarithmic when positive and spanning 3+ decades.

    ``boundary``: ``(last passing x, first failing x)``; a dashed vertical line
    between them marks where the failures start.
    """
    points = list(points)
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    log_y = min(ys) > 0 and max(ys) / min(ys) >= 1e3
    ty = [math.log10(y) for y in ys] if log_y else ys
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ty), max(ty)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    if y0 == y1:
        y0, y1 = y0 - (abs(y0) or 1) * 0.5, y1 + (abs(y1) or 1) * 0.5
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return TOP + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
           f'<text x="{LEFT}" y="15" class="plot-title">{escape(title)}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" class="plot-frame"/>']
    for t in _ticks(x0, x1):
        out.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{TOP + ph}" y2="{TOP + ph + 4}" class="axis"/>'
                   f'<text x="{px(t):.1f}" y="{TOP + ph + 16}" text-anchor="middle">{_fmt(t)}</text>')
    for t in _ticks(y0, y1):
        label = _fmt(10 ** t) if log_y else _fmt(t)
        out.append(f'<line x1="{LEFT - 4}" x2="{LEFT + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{label}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(12 {TOP + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'{escape(y_label)}{" (log)" if log_y else ""}</text>')
    if boundary is not None and x0 <= boundary[0] < boundary[1] <= x1:
        bx = px((boundary[0] + boundary[1]) / 2)
        label = f"fails from {_fmt(boundary[1])}"
        anchor = "end" if bx > LEFT + pw * 0.7 else "start"
        out.append(f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{TOP}" y2="{TOP + ph}" class="boundary" '
                   f'data-last-pass="{_fmt(boundary[0])}" data-first-fail="{_fmt(boundary[1])}">'
                   f'<title>passes at {_fmt(boundary[0])}, {escape(label)}</title></line>'
                   f'<text x="{bx + (-4 if anchor == "end" else 4):.1f}" y="{TOP + 12}" text-anchor="{anchor}" '
                   f'class="boundary-label">{escape(label)}</text>')
    path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ty))
    out.append(f'<polyline points="{path}" class="line"/>')
    for (x, y), t in zip(points, ty):
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(t):.1f}" r="2.5" class="dot">'
                   f'<title>{escape(x_label)}={_fmt(x)}, {escape(y_label)}={_fmt(y)}</title></circle>')
    out.append("</svg>")
    return "".join(out)
