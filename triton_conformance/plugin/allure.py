"""Allure results for the conformance cells, through allure-pytest.

The plugin registers :class:`AllureConformance` only when allure-pytest is
active (``--alluredir`` given); this module imports ``allure`` inside its
hooks, so importing it costs nothing without allure.  What each cell's
status, message and the run's categories are is decided from plain data in
:mod:`triton_conformance.reports.allure`.

Per cell, in whichever process runs it (an xdist worker or the only one):

- labels: family as epic, subject as feature, contract cell as story; suites
  family > subject > dimension; ``outcome`` with the cell's outcome class;
- parameters subject, cell, device, profile; the volatile seed and host are
  excluded, so history stays stable across nightly runs;
- the reproducer attached as ``reproducer.py``, the counterexample and error
  statistics as JSON;
- status from the outcome table (see :func:`triton_conformance.reports.allure.cell_status`).

On the controller at the end: ``categories.json`` (one category per failing
outcome class, and known bugs) and ``environment.properties``.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import pytest

from triton_conformance.plugin.items import PROPERTY
from triton_conformance.reports.allure import categories, cell_status, environment_properties
from triton_conformance.reports.results_json import environment

__all__ = ["AllureConformance"]


def _result_of(item: pytest.Item) -> dict[str, Any] | None:
    return dict(item.user_properties).get(PROPERTY)


_EVERY_JUDGED_CELL = ("error_ulps", "allowance_used")  # details that every judged cell has

class _StatusFromOutcome:
    """An allure-commons plugin: sets each cell's status before the file logger writes it."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}

    def report_result(self, result: Any) -> None:
        labels = {label.name: label.value for label in result.labels}
        cell = self.pending.pop((labels.get("feature"), labels.get("story")), None)
        if cell is None:
            return
        from allure_commons.model2 import StatusDetails

        status, message, known = cell_status(cell)
        trace = result.statusDetails.trace if result.statusDetails else None
        if known:
            result.statusDetails = StatusDetails(known=True, message=message, trace=trace)
        elif status in ("failed", "broken", "skipped"):
            result.statusDetails = StatusDetails(message=message, trace=trace)
        result.status = status


class AllureConformance:
    """Labels, parameters, attachments and status for each conformance cell; files for the run."""

    def __init__(self, config: pytest.Config, session: Any, alluredir: str):
        import allure_commons

        self.config, self.session, self.alluredir = config, session, alluredir
        # tryfirst: set the status before allure's file logger serialises the result.
        allure_commons.hookimpl(tryfirst=True)(_StatusFromOutcome.report_result)
        self.status = _StatusFromOutcome()
        allure_commons.plugin_manager.register(self.status, name="triton_conformance_status")

    def _is_cell(self, item: pytest.Item) -> bool:
        return hasattr(item, "subject") and hasattr(item, "cell") and getattr(item, "owner", None) is self.session

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if not self._is_cell(item):
            return
        import allure

        subject, cell = item.subject, item.cell
        allure.dynamic.epic(subject.family)
        allure.dynamic.feature(subject.name)
        allure.dynamic.story(cell)
        allure.dynamic.parent_suite(subject.family)
        allure.dynamic.suite(subject.name)
        allure.dynamic.sub_suite(cell.partition(":")[0])
        for name, value in (("subject", subject.name), ("cell", cell), ("device", self.session.run.device),
                            ("profile", self.session.run.profile.name)):
            allure.dynamic.parameter(name, value)
        seed = self.session.run.seed if self.session.run.seed is not None else "derandomized"
        allure.dynamic.parameter("seed", seed, excluded=True)
        allure.dynamic.parameter("host", socket.gethostname(), excluded=True)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        yield
        cell = _result_of(item) if self._is_cell(item) else None
        if cell is None:
            return
        import allure

        self.status.pending[(cell["subject"], cell["cell"])] = cell
        allure.dynamic.label("outcome", cell["outcome"])
        if cell.get("message"):
            allure.dynamic.description(cell["message"])
        if cell.get("reproducer"):
            allure.attach(cell["reproducer"], name="reproducer.py", attachment_type=allure.attachment_type.TEXT,
                          extension="py")
        # Every judged cell carries its worst error (error_ulps, allowance_used): alone, not worth an attachment.
        details = {k: v for k, v in (cell.get("details") or {}).items() if k not in _EVERY_JUDGED_CELL}
        if cell.get("counterexample") or details:
            body = json.dumps({"counterexample": cell.get("counterexample"), "details": cell.get("details")},
                              indent=1, default=str)
            allure.attach(body, name="counterexample.json", attachment_type=allure.attachment_type.JSON)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.session.is_worker:
            return

        os.makedirs(self.alluredir, exist_ok=True)
        with open(os.path.join(self.alluredir, "categories.json"), "w", encoding="utf-8") as fh:
            json.dump(categories(), fh, indent=1)
        env = environment(device=self.session.run.device, profile=self.session.run.profile.name, seed=self.session.run.seed)
        with open(os.path.join(self.alluredir, "environment.properties"), "w", encoding="utf-8") as fh:
            fh.write(environment_properties(env))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        import allure_commons

        if allure_commons.plugin_manager.is_registered(self.status):
            allure_commons.plugin_manager.unregister(self.status)
