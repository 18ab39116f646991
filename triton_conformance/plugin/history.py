"""Recording a run in the results history (:mod:`triton_conformance.history`) at the end of the session."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["record_run"]


def record_run(url: str, document: dict[str, Any], *, started: float, root: str) -> dict[str, Any] | None:
    """Record ``document`` (this run's cells) in the store at ``url``; return the results document's history
    section, or None when the store cannot be written (said on stderr: the results JSON is written anyway,
    and a history that is down is no verdict on a kernel)."""
    try:
        from triton_conformance.history.section import history_section
        from triton_conformance.history.store import HistoryStore, record_document

        with HistoryStore(url) as store:
            ids = record_document(store, document, started=started, root=root)
            return history_section(store, ids[-1], store_device(document))
    except ImportError as exc:
        why = f"{exc}; pip install 'SQLAlchemy>=2', or --conformance-history=none"
    except Exception as exc:  # noqa: BLE001 - a database error of any driver: the run's results still stand
        why = f"{type(exc).__name__}: {exc}"
    print(f"triton-conformance: this run was not recorded in the history ({why})", file=sys.stderr)
    return None


def store_device(document: dict[str, Any]) -> str:
    env = document.get("environment") or {}
    return str(env.get("device_label") or env.get("device") or "unknown")
