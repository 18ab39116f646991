"""The results history: every run's cells in a database (SQLite by default, PostgreSQL by URL), and what it
answers: trends, what is new since the last green run, flake rates, the first bad commit, time regressions.

It reads plain data (results documents) and imports only :mod:`~triton_conformance.model` and SQLAlchemy,
which loads with the first module here that needs it (:mod:`.location` does not).
"""

from triton_conformance.history.location import DEFAULT_PATH, HistoryError, history_url

__all__ = ["DEFAULT_PATH", "HistoryError", "history_url"]
