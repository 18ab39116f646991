"""ConformanceSession: the one owner of a run's state, registered as a pytest plugin."""

from __future__ import annotations

import difflib
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import pytest

import triton_conformance.compat as compat
from triton_conformance.errors import ConformanceUsageError, InvalidContract
from triton_conformance.model.cells import cell_id
from triton_conformance.model.config import RunConfig, on_cuda
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.subject import load_modules, registry
from triton_conformance.options import EXIT_HARNESS_ERROR, OPTIONS
from triton_conformance.plugin.items import IMPORT_CELL, PROPERTY, ConformanceItem, ImportFailureItem, import_result
import triton_conformance.plugin.settings as settings
from triton_conformance.plugin.merge import check_mergeable
from triton_conformance.plugin.shards import plan_shards
from triton_conformance.plugin.splitting import WORKER_INPUT as LEDGERS_INPUT, SharedLedgers, join_shared_ledgers
from triton_conformance.plugin.worker_deaths import RERUN, WorkerDeaths
from triton_conformance.reports.combine import update_results
from triton_conformance.reports.findings import finding_groups
from triton_conformance.reports.results_json import environment, results_document, write_results
from triton_conformance.reports.history_view import history_line
from triton_conformance.reports.terminal import matrix_lines, slowest_lines
from triton_conformance.workers.executor import CellExecutor

# The engine (conformance/) is imported inside the methods that need it: it loads triton, which must
# come after pytest_configure has resolved the device (TRITON_INTERPRET) and installed the compat layer.

__all__ = ["ConformanceSession"]

RERUN_LINES = 20  # re-run commands printed at most


def _gpu_name() -> str | None:
    """The first visible GPU's name as nvidia-smi gives it, without ``NVIDIA `` (``H200``); None if unknown."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    visible = (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0].strip()
    argv = [smi, "--query-gpu=name", "--format=csv,noheader"] + (["-i", visible] if visible else [])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    names = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return names[0].strip().removeprefix("NVIDIA ").strip() or None if names else None


def _this_python() -> str:
    """This interpreter, as a command names it: relative to the current directory when inside it
    (``.tox/conformance/bin/python``), else its absolute path."""
    relative = os.path.relpath(sys.executable)
    return relative if not relative.startswith(os.pardir) else sys.executable


def _plugin_argument(config: pytest.Config) -> list[str]:
    """``-p triton_conformance.plugin`` when the plugin was loaded by name (a checkout where it is not
    installed: ``triton-conformance run`` adds it), else nothing (the entry point loads it)."""
    return ["-p", "triton_conformance.plugin"] if config.pluginmanager.has_plugin("triton_conformance.plugin") \
        else []


class ConformanceSession:
    """A run's state: its :class:`RunConfig`, the subjects, the executor and the results as they arrive."""

    def __init__(self, config: pytest.Config, *, run: RunConfig, claim: Any = None):
        """The session of ``config`` (as xdist builds its ``DSession(config)``): it reads the options it needs
        from ``config`` (:mod:`.settings`), given the validated ``run`` and, on a pytest worker pinned to a
        GPU, its ``claim`` (a :class:`~triton_conformance.workers.gpus.Claim`)."""
        self.config = config
        workerinput = getattr(config, "workerinput", None)
        controller = workerinput is None
        self.results_path, where = settings.option(config, "results")
        self.fresh = settings.fresh(config)  # write a new results file instead of merging into the one there
        if controller and not self.fresh:
            check_mergeable(self.results_path, device=run.device,
                            where="--conformance-results" if where == "default" else where)
        if workerinput is not None and "conformance_seed" in workerinput:
            run = replace(run, seed=workerinput["conformance_seed"])  # the controller's, so workers agree
        elif run.seed is None and not run.profile.derandomize:
            run = replace(run, seed=random.randrange(2**32))
        self.run = run
        self.turns = settings.turns(claim, run.device)  # this worker's GPU turns when other workers share it
        self.executor = CellExecutor(run, sanitizer=settings.sanitizer(config, run.device, run.isolation),
                                     turns=self.turns)
        self.results: dict[str, CellResult] = {}
        self.subjects: list = []
        self.loaded = False  # load_subjects() has run (the xdist controller runs it in pytest_sessionstart)
        self.import_failures: list = []  # ImportFailure: modules that raised while importing
        self.is_worker = workerinput is not None
        self.selected = list(config.getoption("conformance_cell") or ())  # --conformance-cell: only these cells
        self._cells: dict[str, tuple[str, str]] | None = None
        # --conformance-shard: run only this shard's subjects (a plugin.shards.Shard), the (subject, cell) ->
        # seconds that balance the shards, and what the split is balanced by, for the header.
        self.shard, self.durations, self.balance = settings.shard(config, self.results_path, controller)
        self.device_label: str | None = settings.option(config, "device-label")[0]
        self._plan: dict[str, int] | None = None
        self.worker_deaths = WorkerDeaths()  # controller: pytest workers that died mid-cell, per cell
        # --conformance-history as a database URL; None: not recorded (the controller records).
        self.history_url: str | None = settings.history(config) if controller else None
        self.history: dict | None = None  # the results document's history section, once recorded
        self.started = time.time()
        # --dist loadgroup: long subjects cut into parts share their ledgers through files (plugin/splitting.py)
        self.ledgers = SharedLedgers() if controller and config.getoption("dist", None) == "loadgroup" else None
        join_shared_ledgers(workerinput)

    # -- the cells ------------------------------------------------------
    def cells(self) -> dict[str, tuple[str, str]]:
        """Every conformance item's name (``subject[cell]``) -> (subject, cell), import failures included.

        The same on the controller, which under xdist collects nothing, and on the workers.
        """
        if not self.loaded:
            self.load_subjects()
        if self._cells is None:
            from triton_conformance.conformance.kinds import cells_for

            self._cells = {cell_id(f.module, IMPORT_CELL): (f.module, IMPORT_CELL) for f in self.import_failures}
            for subject in self.subjects:
                try:
                    cells = cells_for(subject)
                except InvalidContract as exc:  # a field only the engine can check (autotuned=)
                    raise InvalidContract(f"{exc} (subject {subject.name!r} in module {subject.module!r})") from None
                for cell in cells:
                    self._cells[cell_id(subject.name, cell)] = (subject.name, cell)
        return self._cells

    def check_selection(self) -> None:
        """Raise ConformanceUsageError for a --conformance-cell that names no cell."""
        cells = self.cells()
        subjects = {subject for subject, _ in cells.values()}
        for wanted in self.selected:
            if wanted in cells or wanted in subjects:
                continue
            close = difflib.get_close_matches(wanted, list(cells) + sorted(subjects), n=3)
            hint = f"; closest: {', '.join(close)}" if close else ""
            if self.import_failures:  # the cell may be one of theirs: say so, not only "names no cell"
                hint += "; " + "; ".join(f"subject module {f.module!r} failed to import ({f.error}), so the "
                                         f"cells it declares are unknown" for f in self.import_failures)
            raise ConformanceUsageError(
                f"--conformance-cell={wanted!r} names no cell, expected subject[cell] as the terminal prints it, "
                f"or a subject name{hint}")

    def _wanted(self, name: str) -> bool:
        return not self.selected or name in self.selected or self.cells()[name][0] in self.selected

    def shard_plan(self) -> dict[str, int] | None:
        """Each subject's shard (1-based) under --conformance-shard, None without it; the controller's on workers."""
        if self.shard is None:
            return None
        if self._plan is None:
            workerinput = getattr(self.config, "workerinput", None) or {}
            if "conformance_shard_plan" in workerinput:
                self._plan = dict(workerinput["conformance_shard_plan"])
            else:
                self._plan = plan_shards(self.cells().values(), self.shard.count, self.durations)
        return self._plan

    def _in_shard(self, name: str) -> bool:
        plan = self.shard_plan()
        return plan is None or plan.get(self.cells()[name][0]) == self.shard.index

    def shard_line(self) -> str:
        """``shard 2/4: 5 of 13 subjects, 60 of 333 cells, balanced by ...`` (empty without a shard)."""
        plan = self.shard_plan()
        if plan is None:
            return ""
        mine = [c for c in self.cells().values() if plan.get(c[0]) == self.shard.index]
        return (f"shard {self.shard}: {len({s for s, _ in mine})} of {len(plan)} subjects, {len(mine)} of "
                f"{len(self.cells())} cells, balanced by {self.balance}")

    def label(self) -> str:
        """This run's device as a cross-device matrix names it."""
        if self.device_label:
            return self.device_label
        if not on_cuda(self.run.device):
            return self.run.device
        return _gpu_name() or "cuda"

    # -- collection -----------------------------------------------------
    def load_subjects(self) -> None:
        """Import the modules that declare subjects; raises ConformanceUsageError if there are none.

        The rootdir goes on sys.path first (worker processes inherit it), so the
        project's own modules import without a ``pythonpath`` setting.  A module
        that raises while importing becomes a crash cell ``module[import]``.
        """
        modules: list[str] = []
        for names in self.config.hook.pytest_conformance_modules(config=self.config):
            modules.extend(names or ())
        modules.extend(self.config.getini("conformance_modules") or ())
        self.import_failures = load_modules(dict.fromkeys(modules), entry_points=True,
                                            root=str(self.config.rootpath))
        self.subjects, self._cells, self.loaded = list(registry), None, True
        if not self.subjects and not self.import_failures:
            raise ConformanceUsageError(
                "--conformance was given but no subject is declared: implement "
                "pytest_conformance_modules() in conftest.py, set the conformance_modules ini option, "
                "or register an entry point in the 'triton_conformance.subjects' group")

    def pytest_ignore_collect(self, collection_path: Any, config: pytest.Config) -> bool | None:
        return True if config.getoption("conformance_only") else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        from triton_conformance.conformance.kinds import cells_for

        ours: list = [ImportFailureItem.from_parent(session, name=cell_id(f.module, IMPORT_CELL), failure=f)
                      for f in self.import_failures]
        for subject in self.subjects:
            for cell in cells_for(subject):
                ours.append(ConformanceItem.from_parent(
                    session, name=cell_id(subject.name, cell), subject=subject, cell=cell, owner=self))
        # Our items come from no collector: report them as collected, so that the terminal counts them
        # ("321 tests collected", not "no tests collected" under --collect-only).
        session.ihook.pytest_collectreport(report=pytest.CollectReport(session.nodeid, "passed", None, ours))
        kept = [item for item in ours if self._wanted(item.name) and self._in_shard(item.name)]
        if len(kept) < len(ours):
            keep = {id(item) for item in kept}
            config.hook.pytest_deselected(items=[item for item in ours if id(item) not in keep])
        items.extend(kept)

    # -- results --------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A pytest-xdist worker died running ``crashitem``: a conformance cell runs once more (see
        plugin/worker_deaths.py); the second death is its crash cell."""
        if self._cell_of(crashitem) is not None and self.worker_deaths.handle(crashitem, report, sched):
            self.config.get_terminal_writer().line(
                f"\n{report.longrepr}: it runs again on another worker", yellow=True)

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple | None:
        if report.outcome == RERUN:
            return RERUN, "R", ("RERUN", {"yellow": True})
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == RERUN:
            return  # its worker died: the cell runs again, and that run is its result
        props = dict(getattr(report, "user_properties", ()) or ())
        if PROPERTY in props:
            result = CellResult.from_dict(props[PROPERTY])
            died = self.worker_deaths.note(report.nodeid)
            if died is not None:  # it ran to the end after its worker died: say so, the verdict stands
                result = replace(result, details={**result.details, "worker_died": died})
            self.results[report.nodeid] = result
            self.config.hook.pytest_conformance_result(config=self.config, result=result)
            return
        if not report.failed or report.nodeid in self.results:
            return
        cell = self._cell_of(report.nodeid)
        if cell is None:
            return  # the user's own test
        # The pytest worker itself died (xdist replaced it): the cell is still a crash.
        name, cell = cell
        subject = next((s for s in self.subjects if s.name == name), None)
        if cell == IMPORT_CELL and subject is None:
            failure = next(f for f in self.import_failures if f.module == name)
            result = import_result(failure)
        else:
            result = CellResult.of(subject or name, cell, "crash", str(report.longrepr)[-3000:],
                                   finding="worker-died")
        self.results[report.nodeid] = result

    def _cell_of(self, nodeid: str) -> tuple[str, str] | None:
        """(subject, cell) of a conformance item's node id (``::`` + its name), None for any other test."""
        prefix, _, name = nodeid.partition("::")
        return self.cells().get(name) if prefix == "" else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Controller side, for every worker xdist starts (replacements too): the GPUs to claim from, the run's
        seed, and the shard plan."""
        gpus = settings.gpus(self.config)
        if gpus:
            node.workerinput["conformance_gpus"] = gpus
        node.workerinput["conformance_seed"] = self.run.seed
        if self.shard is not None:  # the controller's split, so that no worker reads the durations again
            node.workerinput["conformance_shard_plan"] = self.shard_plan()
        if self.ledgers is not None:
            node.workerinput[LEDGERS_INPUT] = self.ledgers.path()

    def pytest_report_header(self, config: pytest.Config) -> str:
        seed = f", seed {self.run.seed}" if self.run.seed is not None else " (derandomized)"
        shard = f"\nconformance: {self.shard_line()}" if self.shard is not None else ""
        return (f"conformance: device {self.run.device}, profile {self.run.profile.name}{seed}, "
                f"results {self.results_path}{shard}\nconformance: {self.memory_line()}")

    def memory_line(self) -> str:
        """Which memory bound the cell workers apply (:func:`memory_bound.plan_line`), for the header and the
        results' environment."""
        if self.run.isolation != "process":
            return "worker memory: unbounded (cells run in pytest's own process, --conformance-isolation=none)"
        from triton_conformance.conformance.memory_bound import plan_line

        workers = getattr(self.config.option, "numprocesses", None)
        return plan_line(self.run.worker_memory, self.run.device, workers=workers if isinstance(workers, int)
                         and workers > 0 else 1)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        from triton_conformance.conformance.kinds import catalogue

        terminalreporter.section("conformance matrix")
        for line in matrix_lines(self.results.values(), catalogue()) + slowest_lines(self.results.values()):
            terminalreporter.write_line(line)
        for failure in self.import_failures:
            terminalreporter.write_line(f"cannot import subject module {failure.module!r}: {failure.error}; "
                                        f"recorded as the crash cell {cell_id(failure.module, IMPORT_CELL)}",
                                        red=True)
        split = self.ledgers.line() if self.ledgers is not None else None
        if split:
            terminalreporter.write_line(split)
        terminalreporter.write_line(f"results: {self.results_path}")
        if self.history is not None:
            terminalreporter.write_line(history_line(self.history))
        if self.run.seed is not None:
            terminalreporter.write_line(f"reproduce this run with --conformance-seed={self.run.seed}")
        rerun = self.rerun_commands()
        if rerun:
            terminalreporter.write_line("re-run a failing cell:")
            for line in rerun[:RERUN_LINES]:
                terminalreporter.write_line(f"  {line}")
            if len(rerun) > RERUN_LINES:
                terminalreporter.write_line(f"  ... and {len(rerun) - RERUN_LINES} more: --conformance-cell takes "
                                            "subject[cell] as the matrix names it, and may be repeated")
        harness = [r for r in self.results.values() if r.outcome == "harness-error"]
        if harness:  # HOOK(harness): our bugs, said apart from every verdict
            terminalreporter.write_line(
                f"{len(harness)} harness error{'s' if len(harness) != 1 else ''}: triton-conformance's own code "
                "raised, a bug in triton-conformance and no verdict about the kernels; please report it with the "
                f"traceback (above, and in the results JSON); the run exits with status {EXIT_HARNESS_ERROR}",
                red=True)

    def rerun_commands(self) -> list[str]:
        """A command line for each failing finding of this run (its first cell: :mod:`..reports.findings`),
        which runs that cell alone with the Python that ran this job (``python -m pytest``: a bare ``pytest``
        may be another environment's, without this plugin)."""
        defaults = {name: default for name, default, *_ in OPTIONS}
        common = [_this_python(), "-m", "pytest", *_plugin_argument(self.config), "--conformance-only"]
        for name, value in (("device", self.run.device), ("profile", self.run.profile.name)):
            if value != defaults[name]:
                common.append(f"--conformance-{name}={value}")
        if self.run.compat is not None:  # the shims this run chose (not all of them)
            common.append(f"--conformance-compat={','.join(self.run.compat) or 'none'}")
        if self.run.seed is not None:
            common.append(f"--conformance-seed={self.run.seed}")
        if self.results_path != defaults["results"]:
            common.append(f"--conformance-results={self.results_path}")
        # In the order they ran, known bugs last; one line per finding.
        ran = sorted(self.results.values(), key=lambda r: r.expected_failure is not None)
        return [shlex.join(common + [f"--conformance-cell={cell_id(g.first['subject'], g.first['cell'])}"])
                for g in finding_groups(ran)]

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.ledgers is not None:
            self.ledgers.close()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.executor.close()
        if self.is_worker or not self.results:
            return
        if any(r.outcome == "harness-error" for r in self.results.values()) and \
                session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = EXIT_HARNESS_ERROR  # HOOK(harness): our bug has a status of its own
        from triton_conformance.conformance.kinds import catalogue

        env = environment(device=self.run.device, profile=self.run.profile.name, seed=self.run.seed,
                          compat=compat.installed(), device_label=self.label())
        env["memory_bound"] = self.memory_line()
        if self.shard is not None:
            env["shard"] = str(self.shard)
        document = results_document(self.results.values(), env, catalogue())
        try:
            previous = None if self.fresh else check_mergeable(self.results_path, device=self.run.device)
        except ConformanceUsageError as exc:  # replaced since pytest_configure checked it: leave it, write beside
            self.results_path += ".new"
            print(f"triton-conformance: {exc}; this run's results went to {self.results_path}", file=sys.stderr)
            previous = None
        if self.history_url is not None:
            from triton_conformance.plugin.history import record_run

            self.history = record_run(self.history_url, document, started=self.started, root=str(self.config.rootpath))
        merged = update_results(previous, document)
        if self.history is not None:
            merged["history"] = self.history
        write_results(self.results_path, merged)
