"""ConformanceSession: the one owner of a run's state, registered as a pytest plugin."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from triton_conformance.plugin.items import PROPERTY, ConformanceItem
from triton_conformance.model.outcomes import CellResult
from triton_conformance.errors import ConformanceUsageError
from triton_conformance.model.config import RunConfig

__all__ = ["ConformanceSession"]


class ConformanceSession:
    """A run's state: its :class:`RunConfig`, the subjects, the executor and the results as they arrive."""

    def __init__(self, config: pytest.Config, *, run: RunConfig, results_path: str):
        from triton_conformance.workers.executor import CellExecutor

        self.config = config
        self.results_path = results_path
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None and "conformance_seed" in workerinput:
            run = replace(run, seed=workerinput["conformance_seed"])  # the controller's, so workers agree
        elif run.seed is None and not run.profile.derandomize:
            run = replace(run, seed=random.randrange(2**32))
        self.run = run
        self.executor = CellExecutor(run)
        self.results: dict[str, CellResult] = {}
        self.subjects: list = []
        self.is_worker = workerinput is not None

    # -- collection -----------------------------------------------------
    def load_subjects(self) -> None:
        """Import the modules that declare subjects; raises ConformanceUsageError if there are none."""
        from triton_conformance.model.subject import load_modules, registry

        modules: list[str] = []
        for names in self.config.hook.pytest_conformance_modules(config=self.config):
            modules.extend(names or ())
        modules.extend(self.config.getini("conformance_modules") or ())
        load_modules(dict.fromkeys(modules), entry_points=True)
        self.subjects = list(registry)
        if not self.subjects:
            raise ConformanceUsageError(
                "--conformance was given but no subject is declared: implement "
                "pytest_conformance_modules() in conftest.py, set the conformance_modules ini option, "
                "or register an entry point in the 'triton_conformance.subjects' group")

    def pytest_ignore_collect(self, collection_path: Any, config: pytest.Config) -> bool | None:
        return True if config.getoption("conformance_only") else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        from triton_conformance.conformance.cells import cells_for

        for subject in self.subjects:
            for cell in cells_for(subject.contract):
                items.append(ConformanceItem.from_parent(
                    session, name=f"{subject.name}[{cell}]", subject=subject, cell=cell, owner=self))

    # -- results --------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(getattr(report, "user_properties", ()) or ())
        if PROPERTY in props:
            result = CellResult.from_dict(props[PROPERTY])
            self.results[report.nodeid] = result
            self.config.hook.pytest_conformance_result(config=self.config, result=result)
        elif report.failed and report.nodeid not in self.results and "[" in report.nodeid:
            # The pytest worker itself died (xdist replaced it): the cell is still a crash.
            name, _, cell = report.nodeid.rpartition("::")[2].partition("[")
            self.results[report.nodeid] = CellResult(
                subject=name, family=name, cell=cell.rstrip("]"), outcome="crash", finding="worker-died",
                message=str(report.longrepr)[-3000:])

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["conformance_seed"] = self.run.seed

    def pytest_report_header(self, config: pytest.Config) -> str:
        seed = f", seed {self.run.seed}" if self.run.seed is not None else " (derandomized)"
        return f"conformance: device {self.run.device}, profile {self.run.profile.name}{seed}, results {self.results_path}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        from triton_conformance.reports.terminal import matrix_lines

        terminalreporter.section("conformance matrix")
        for line in matrix_lines(self.results.values()):
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"results: {self.results_path}")
        if self.run.seed is not None:
            terminalreporter.write_line(f"reproduce this run with --conformance-seed={self.run.seed}")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.executor.close()
        if self.is_worker or not self.results:
            return
        from triton_conformance.reports.results_json import environment, results_document, write_results

        env = environment(device=self.run.device, profile=self.run.profile.name, seed=self.run.seed)
        write_results(self.results_path, results_document(self.results.values(), env))
