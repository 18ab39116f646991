"""The pytest plugin (``pytest11`` entry point ``triton_conformance``).

It imports only pytest and the standard library: torch, triton, hypothesis and
the battery load only when ``--conformance`` is given.
"""

from __future__ import annotations

import os
from typing import Callable, Optional

import pytest

from triton_conformance.errors import ConformanceUsageError, InvalidContract
from triton_conformance.model.config import INTERPRETER, on_cuda, parse_compat, run_config
from triton_conformance.options import HELP_CELL, HELP_ENABLE, HELP_FRESH, add_conformance_options
from triton_conformance.plugin import hookspecs, settings

# This module loads in every pytest run, conformance or not: the rest of the package is imported inside
# the hooks that need it, and the engine only after pytest_configure has resolved the device.

_SESSION = pytest.StashKey["object"]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "triton-conformance")
    group.addoption("--conformance", action="store_true", default=None, dest="conformance", help=HELP_ENABLE)
    group.addoption("--conformance-only", action="store_true", default=False, dest="conformance_only",
                    help="run only the conformance battery: collect no test files")
    parser.addini("conformance", type="bool", default=False, help=HELP_ENABLE)
    group.addoption("--conformance-fresh", action="store_true", default=None, dest="conformance_fresh",
                    help=HELP_FRESH)
    group.addoption("--conformance-cell", action="append", default=[], dest="conformance_cell",
                    metavar="SUBJECT[CELL]", help=HELP_CELL)
    parser.addini("conformance_modules", type="linelist", default=[],
                  help="modules that declare subjects, imported after the device is chosen")
    parser.addini("conformance_fresh", type="bool", default=False, help=HELP_FRESH)
    add_conformance_options(group.addoption, parser.addini)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    # The interpreter must be on before a conftest imports any @triton.jit kernel.
    if not settings.enabled(early_config):
        return
    device, _ = settings.option(early_config, "device")
    if device == INTERPRETER:  # the option as given (pytest_configure validates it and resolves auto)
        os.environ["TRITON_INTERPRET"] = "1"
        if _xdist_controller(early_config, early=True):
            return  # it launches no kernel of a conftest's: the shims wait for pytest_sessionstart
        from triton_conformance.conformance.interpreter_layer import install_compat

        try:  # the interpreter compatibility layer, before a conftest imports a kernel
            install_compat(parse_compat(settings.option(early_config, "compat")[0]))
        except ConformanceUsageError as exc:
            raise pytest.UsageError(f"--conformance-compat: {exc}") from None


@pytest.hookimpl(optionalhook=True)  # pytest-xdist is optional: without it this hook has no spec
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on cuda: one worker per GPU (xdist's default counts CPUs)."""
    if not settings.enabled(config):
        return None
    return len(settings.gpus(config)) or None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    """Under ``--dist loadgroup``, one worker per subject, or per part of a long one (see plugin/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from triton_conformance.plugin.scheduling import SubjectGroupScheduling

    session = config.stash.get(_SESSION, None)
    if session is None or session.ledgers is None:  # no conformance run here: subjects are not cut
        return SubjectGroupScheduling(config, log)
    durations, session.ledgers.balance = settings.split_durations(config, session.results_path, session.run.device)
    return SubjectGroupScheduling(config, log, durations=durations, share=session.ledgers.share)


def _pin_worker(config: pytest.Config):  # noqa: ANN202
    """Worker side, before CUDA initialises: claim a free GPU and make it the only one visible.

    Returns the workers.gpus.Claim, or None when this is no xdist worker pinned to a GPU.
    """
    workerinput = getattr(config, "workerinput", None)
    if not workerinput or not workerinput.get("conformance_gpus"):
        return None
    from triton_conformance.workers.gpus import claim_gpu

    run_key = str(workerinput.get("testrunuid") or os.environ.get("PYTEST_XDIST_TESTRUNUID") or os.getppid())
    try:
        claim = claim_gpu(workerinput["conformance_gpus"], run_key, workers=workerinput.get("workercount"))
    except ConformanceUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    os.environ["CUDA_VISIBLE_DEVICES"] = claim.gpu  # our cell workers inherit it
    return claim


def _canaries_on(config: pytest.Config) -> bool:
    value, where = settings.option(config, "canary")
    if value not in ("on", "off"):
        raise ConformanceUsageError(f"{where}={value!r}, expected 'on' or 'off'")
    return value == "on"


def _start_environment_check(config: pytest.Config, run, where: str, *, later: bool):  # noqa: ANN001, ANN202
    """Controller only (xdist workers and cell workers share its environment); ``run`` is the RunConfig.
    Returns the pending check, a callable that answers its one usage-error line or None, or runs it now and
    raises ConformanceUsageError with that line when ``later`` is false.  On CUDA the probe for a GPU and the
    canaries start in a child process now (so that pytest's own process initialises no CUDA context), and
    are read in pytest_sessionstart, once xdist has started its workers beside them; on the interpreter the
    canaries run in this process, in pytest_sessionstart too when ``later`` (xdist's controller)."""
    from triton_conformance.conformance.canary import EnvironmentCheck, environment_failure

    canaries = _canaries_on(config)
    if on_cuda(run.device):
        check = EnvironmentCheck(run.device, run.compat, canaries=canaries)
        return lambda: _environment_line(check.report(), where)
    if not canaries:
        return None
    if later:
        return lambda: environment_failure(run.device)
    line = environment_failure(run.device)
    if line is not None:
        raise ConformanceUsageError(line)
    return None


def _environment_line(report, where: str) -> str | None:  # noqa: ANN001 - an EnvironmentReport
    """The one usage-error line for what the CUDA child found, or None when the environment can run kernels."""
    hint = "run on the CPU with --conformance-device=interpreter (the default)"
    if report.torch_missing:
        return f"{where}='cuda' but torch cannot be imported here ({report.failure}); {hint}"
    seen = report.probe
    if seen is not None and seen["devices"] < 1:
        build = "built without CUDA" if seen["cuda"] is None else f"CUDA {seen['cuda']}"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        shown = f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        return (f"{where}='cuda' but no CUDA GPU is usable here: torch {seen['torch']} ({build}) sees none{shown}; "
                f"expected a machine with a GPU, or {hint}")
    return report.failure


_ENVIRONMENT = pytest.StashKey[Callable[[], Optional[str]]]()  # the pending check: its one line, or None


def _xdist_controller(config: pytest.Config, *, early: bool = False) -> bool:
    """Whether this process is pytest-xdist's controller, which collects and runs no cell itself (``early``:
    from the options known before the conftests load, when xdist has not yet marked its workers)."""
    if getattr(config, "workerinput", None) is not None or os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    options = config.known_args_namespace if early else config.option
    return bool(getattr(options, "numprocesses", None)) and (early or getattr(options, "dist", "no") != "no")


def _install_compat(run) -> None:  # noqa: ANN001 - a RunConfig
    """The interpreter's compatibility shims, before any kernel module is imported (idempotent)."""
    if not on_cuda(run.device):  # 'auto' is resolved by now
        from triton_conformance.conformance.interpreter_layer import install_compat

        install_compat(run.compat)


def _load_subjects(session) -> None:  # noqa: ANN001 - a ConformanceSession
    session.load_subjects()
    session.check_selection()


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session: pytest.Session):  # noqa: ANN201
    """After xdist has started its workers (its own pytest_sessionstart): on the controller, install the
    interpreter's shims and import the subjects' modules (torch and triton among them: seconds, beside the
    workers' own start-up, instead of before it), then run the interpreter's canaries or wait for the CUDA
    environment check that ran beside the start-up; a mistake in any ends the run with its one line before
    any cell is scheduled."""
    result = yield
    conformance = session.config.stash.get(_SESSION, None)
    if conformance is not None and not conformance.loaded:
        try:
            _install_compat(conformance.run)
            _load_subjects(conformance)
        except (ConformanceUsageError, InvalidContract) as exc:
            raise pytest.UsageError(str(exc)) from None
    pending = session.config.stash.get(_ENVIRONMENT, None)
    if pending is not None:
        del session.config.stash[_ENVIRONMENT]
        line = pending()
        if line is not None:
            raise pytest.UsageError(line)
    return result


# run_config's arguments and the options they come from.
_RUN_OPTIONS = {"profile": "profile", "seed": "seed", "compile_budget": "compiles", "timeout": "timeout",
                "isolation": "isolation", "compat": "compat", "worker_memory": "worker-memory", "batch": "batch"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a triton-conformance contract cell")
    if not settings.enabled(config):
        return
    claim = _pin_worker(config)
    from triton_conformance.conformance.backend import select_device
    from triton_conformance.plugin.session import ConformanceSession

    device, where = settings.option(config, "device")
    controller = getattr(config, "workerinput", None) is None
    # Every mistake in the configuration is found here, before a cell runs, and reported in one line.
    try:
        device = select_device(device, where=where)
        options = {argument: settings.option(config, name) for argument, name in _RUN_OPTIONS.items()}
        run = run_config(device=device, **{k: v for k, (v, _) in options.items()},
                         where={k: w for k, (_, w) in options.items()})
        session = ConformanceSession(config, run=run, claim=claim)  # it reads the rest of the options itself
        # xdist's controller runs no cell: it imports torch, triton and the subjects' modules (seconds) once
        # xdist has started its workers, in pytest_sessionstart (a shard plan needs the subjects now).
        later = _xdist_controller(config) and session.shard is None
        if not later:
            _install_compat(run)
        if controller:  # HOOK(harness): the environment can run kernels at all, before any cell
            environment = _start_environment_check(config, run, where, later=later)
            if environment is not None:
                config.stash[_ENVIRONMENT] = environment
        if not _xdist_controller(config) and not config.option.collectonly:
            session.executor.prestart()  # its imports and CUDA context overlap this process's collection
        if not later:
            _load_subjects(session)
    except (ConformanceUsageError, InvalidContract) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, "triton_conformance_session")
    alluredir = config.getoption("allure_report_dir", None)  # set only when allure-pytest is active
    if alluredir:
        from triton_conformance.plugin.allure import AllureConformance

        config.pluginmanager.register(AllureConformance(config, session, alluredir), "triton_conformance_allure")
