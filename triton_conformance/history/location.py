"""Where the history is: the ``--conformance-history`` value as a database URL (no SQLAlchemy imported here:
the plugin checks the option at start-up, and SQLAlchemy loads only when a run is recorded)."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_PATH", "FLAKE_LEVEL", "FLAKE_RUNS", "OFF", "HistoryError", "history_url", "shown"]

DEFAULT_PATH = ".conformance/history.sqlite"
OFF = ("none", "off")
# The flake count's defaults (:mod:`.flakes`), here so that the CLI's parser needs no SQLAlchemy:
FLAKE_RUNS = 50  # the window: each device's newest runs that a flake count looks at
FLAKE_LEVEL = 0.01  # the family-wise level of the flagging, split over the stochastic cells tested


class HistoryError(ValueError):
    """The history store cannot be used: a bad URL, a missing driver, a database that refuses us."""


def history_url(value: str | None, root: str, where: str = "--conformance-history") -> str | None:
    """The database URL for option ``value``: None for ``none``; a URL (``postgresql://...``,
    ``sqlite:///...``) as given; anything else is a SQLite file path, relative to ``root``."""
    value = (value or DEFAULT_PATH).strip()
    if value.lower() in OFF:
        return None
    if "://" in value:
        scheme = value.split("://", 1)[0].lower()
        if not scheme.startswith(("sqlite", "postgres")):
            raise HistoryError(f"{where}={value!r}, expected a SQLite path, a sqlite:/// or postgresql:// URL, "
                               f"or 'none'")
        if scheme in ("postgres", "postgresql"):  # psycopg 3, the driver the history-postgres extra installs
            value = "postgresql+psycopg://" + value.split("://", 1)[1]
        return value
    path = value if os.path.isabs(value) else os.path.join(root, value)
    return "sqlite:///" + os.path.abspath(path)


def shown(url: str) -> str:
    """``url`` without its password, for messages."""
    head, sep, tail = url.partition("://")
    if "@" in tail and ":" in tail.split("@", 1)[0]:
        user = tail.split("@", 1)[0].split(":", 1)[0]
        tail = f"{user}:***@{tail.split('@', 1)[1]}"
    return head + sep + tail
