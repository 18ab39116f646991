"""What Allure is told about the conformance cells: status, categories and environment, as plain data.

The pytest side that records them through allure-pytest is
:class:`triton_conformance.plugin.allure.AllureConformance`; this module
imports neither pytest nor allure.

- status from the outcome table (``Outcome.allure``): honoured and rejected
  pass, wrong and unsafe fail, crash, compile-error and timeout are broken,
  skipped is skipped; a known bug's failing cell stays skipped (pytest's
  xfail) and is marked known;
- ``categories.json``: one category per failing outcome class, known bugs,
  and harness errors;
- ``environment.properties`` from a results document's environment.
"""

from __future__ import annotations

from typing import Any

from triton_conformance.model.outcomes import OUTCOME_TABLE
from triton_conformance.reports.explain import KERNEL_FAULTS

__all__ = ["ALLURE_STATUS", "KNOWN_PREFIX", "ENVIRONMENT_KEYS", "cell_status", "categories",
           "environment_properties"]

# outcome class -> Allure status, from the outcome table
ALLURE_STATUS = {o.name: o.allure for o in OUTCOME_TABLE}
KNOWN_PREFIX = "known bug"
ENVIRONMENT_KEYS = ("device", "device_name", "triton", "torch", "python", "hypothesis", "profile", "seed",
                    "platform", "host", "commit", "triton_conformance")


def cell_status(cell: dict[str, Any]) -> tuple[str, str, bool]:
    """``(status, message, known)`` for a cell's result dict: what its Allure result should say."""
    outcome = cell["outcome"]
    status = ALLURE_STATUS.get(outcome, "broken")
    message = f"{outcome}: {cell.get('finding') or ''} {cell.get('message') or ''}".strip()
    # A known bug excuses the kernel's failures, not a mistake in the declaration (oracle-error).
    if cell.get("expected_failure") and outcome in KERNEL_FAULTS:
        return "skipped", f"{KNOWN_PREFIX} ({cell['expected_failure']}): {message}", True
    return status, message, False


def categories() -> list[dict[str, Any]]:
    """The ``categories.json`` document: one category per failing outcome class, then known bugs."""
    out = [{"name": f"{o.name}: {o.summary}", "messageRegex": f"(?s){o.name}: .*",
            "matchedStatuses": [o.allure]} for o in OUTCOME_TABLE if not o.passing]
    out.append({"name": "known bug (xfail subject)", "messageRegex": f"(?s){KNOWN_PREFIX}.*",
                "matchedStatuses": ["skipped"]})
    out.append({"name": "an error outside any cell (a test of your own, or the plugin)",
                "matchedStatuses": ["broken", "failed"]})
    return out


def _escape_property(text: str, *, key: bool = False) -> str:
    # java.util.Properties: backslash escapes, and separators in keys.
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    if key:
        for c in "=: ":
            text = text.replace(c, "\\" + c)
    return text


def environment_properties(env: dict[str, Any]) -> str:
    """The ``environment.properties`` text for a results document's environment."""
    lines = []
    for key in ENVIRONMENT_KEYS:
        value = env.get(key)
        value = "derandomized" if key == "seed" and value is None else value
        if value is not None:
            lines.append(f"{_escape_property(key, key=True)}={_escape_property(str(value))}")
    return "\n".join(lines) + "\n"
