"""Report formats: every way a results document is rendered to a file, one registry.

A format renders the results JSON (and, for a diff, a baseline document)
to text; :func:`write_report` writes it atomically.  ``triton-conformance
report --format NAME`` writes any registered format.  The built-in ones
register themselves where they are defined, when the reports package is
imported: ``html`` (the matrix page, :mod:`.html`) and ``text`` (the
terminal matrix, :mod:`.terminal`); the JUnit XML and Allure results come
from pytest's own writers during the run.

A new format is one module that calls :func:`register_format` when it is
imported: name it with ``--format-module``, or list it under the entry-point
group ``triton_conformance.report_formats``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

__all__ = ["ReportFormat", "register_format", "report_format", "report_formats", "write_report",
           "load_format_modules", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "triton_conformance.report_formats"


@dataclass(frozen=True)
class ReportFormat:
    """One way to render a results document.

    - ``name``: what ``--format`` calls it; ``suffix``: its file's extension (``".html"``);
    - ``render(document, baseline)``: the file's text (``baseline``: an older document, or None);
    - ``summary``: one line for ``--help``.
    """

    name: str
    suffix: str
    render: Callable[[dict[str, Any], dict[str, Any] | None], str]
    summary: str = ""


_FORMATS: dict[str, ReportFormat] = {}


def register_format(fmt: ReportFormat) -> ReportFormat:
    """Add ``fmt`` to the registry (a later format of the same name replaces the earlier one); returns it."""
    if not isinstance(fmt, ReportFormat) or not fmt.name or not callable(fmt.render):
        raise ValueError(f"register_format: fmt={fmt!r}, expected a ReportFormat with a name and a render function")
    _FORMATS[fmt.name] = fmt
    return fmt


def report_formats() -> dict[str, ReportFormat]:
    """Every registered format, by name (the built-in ones first)."""
    return dict(_FORMATS)


def report_format(name: str) -> ReportFormat:
    """The format called ``name``; ValueError naming the known ones otherwise."""
    known = report_formats()
    if name not in known:
        raise ValueError(f"format={name!r}, expected one of {sorted(known)} (a format of your own: --format-module)")
    return known[name]


def load_format_modules(modules: list[str] | tuple[str, ...] = ()) -> None:
    """Import ``modules`` and the entry points of :data:`ENTRY_POINT_GROUP`: each registers its formats."""
    for module in modules:
        importlib.import_module(module)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()


def write_report(path: str, document: dict[str, Any], fmt: ReportFormat | str = "html", *,
                 baseline: dict[str, Any] | None = None) -> str:
    """Write ``document`` in ``fmt`` to ``path`` (whole or not at all); returns the absolute path."""
    fmt = report_format(fmt) if isinstance(fmt, str) else fmt
    text = fmt.render(document, baseline)
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path

