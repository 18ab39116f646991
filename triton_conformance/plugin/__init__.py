"""The pytest plugin (``pytest11`` entry point ``triton_conformance``).

It imports only pytest and the standard library: torch, triton, hypothesis and
the battery load only when ``--conformance`` is given.
"""

from __future__ import annotations

import os

import pytest

from triton_conformance.errors import ConformanceUsageError, InvalidContract
from triton_conformance.model.config import CUDA, INTERPRETER, on_cuda, parse_compat, run_config
from triton_conformance.options import HELP_CELL, HELP_ENABLE, HELP_FRESH, add_conformance_options, key, resolve
from triton_conformance.plugin import hookspecs

# This module loads in every pytest run, conformance or not: the rest of the package is imported inside
# the hooks that need it, and the engine only after pytest_configure has resolved the device.

_SESSION = pytest.StashKey["object"]()
_GPUS = pytest.StashKey["list"]()


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


def _given(config: pytest.Config, dest: str):  # noqa: ANN202
    """The command line's value of ``dest``; in pytest_load_initial_conftests, before the options are parsed
    into ``config.option``, the early parse's (``known_args_namespace``)."""
    value = config.getoption(dest)
    if value in (None, False, []):
        return getattr(config.known_args_namespace, dest, value)
    return value


def _enabled(config: pytest.Config) -> bool:
    if _given(config, "conformance_only"):
        return True
    flag = _given(config, "conformance")
    return bool(flag) if flag is not None else bool(config.getini("conformance"))


def _option(config: pytest.Config, name: str) -> tuple[str | None, str]:
    return resolve(name, _given(config, f"conformance_{key(name)}"), config.getini(f"conformance_{key(name)}"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    # The interpreter must be on before a conftest imports any @triton.jit kernel.
    if not _enabled(early_config):
        return
    device, _ = _option(early_config, "device")
    if device == INTERPRETER:  # the option as given (pytest_configure validates it and resolves auto)
        os.environ["TRITON_INTERPRET"] = "1"
        from triton_conformance.conformance.interpreter_layer import install_compat

        try:  # the interpreter compatibility layer, before a conftest imports a kernel
            install_compat(parse_compat(_option(early_config, "compat")[0]))
        except ConformanceUsageError as exc:
            raise pytest.UsageError(f"--conformance-compat: {exc}") from None


def _gpus(config: pytest.Config) -> list[str]:
    """The GPUs the workers spread over (controller side; cached): [] unless on cuda or --conformance-gpus."""
    if _GPUS in config.stash:
        return config.stash[_GPUS]
    from triton_conformance.workers.gpus import visible_gpus

    requested, where = _option(config, "gpus")
    device, _ = _option(config, "device")
    gpus: list[str] = []
    if requested or device == CUDA:  # the option as given
        try:
            gpus = visible_gpus(requested, where=where)
        except ConformanceUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_GPUS] = gpus
    return gpus


@pytest.hookimpl(optionalhook=True)  # pytest-xdist is optional: without it this hook has no spec
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on cuda: one worker per GPU (xdist's default counts CPUs)."""
    if not _enabled(config):
        return None
    return len(_gpus(config)) or None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    """Under ``--dist loadgroup``, one worker per subject (see conformance/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from triton_conformance.plugin.scheduling import SubjectGroupScheduling

    return SubjectGroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001
    """Controller side, for every worker xdist starts (replacements too): tell it the GPUs to claim from."""
    if _enabled(node.config) and _gpus(node.config):
        node.workerinput["conformance_gpus"] = _gpus(node.config)


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


def _turns(claim, device: str):  # noqa: ANN001, ANN202
    """The GpuTurns a worker's cells take on its GPU: only on cuda, and only when other workers share the GPU."""
    return claim.turns() if claim is not None and on_cuda(device) else None


def _sanitizer(config: pytest.Config, device: str, isolation: str):  # noqa: ANN202
    tool, where = _option(config, "sanitizer")
    if tool in (None, "", "off"):
        return None
    if tool != "memcheck":
        raise pytest.UsageError(f"{where}={tool!r}, expected 'memcheck' or 'off'")
    if not on_cuda(device) or isolation != "process":
        raise pytest.UsageError(f"{where}={tool!r} needs --conformance-device=cuda and process isolation "
                                f"(got device {device!r}, isolation {isolation!r})")
    from triton_conformance.workers.sanitizer import Sanitizer, find_sanitizer

    try:
        return Sanitizer(find_sanitizer(where=where), tool=tool)
    except ConformanceUsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _canaries_on(config: pytest.Config) -> bool:
    value, where = _option(config, "canary")
    if value not in ("on", "off"):
        raise ConformanceUsageError(f"{where}={value!r}, expected 'on' or 'off'")
    return value == "on"


def _start_environment_check(config: pytest.Config, run, where: str):  # noqa: ANN001, ANN202 - a RunConfig
    """Controller only (xdist workers and cell workers share its environment).  On the interpreter the
    canaries run here, now, and a failure raises ConformanceUsageError in one line.  On CUDA the probe for a
    GPU and the canaries start in a child process (so that pytest's own process initialises no CUDA context)
    and are read in pytest_sessionstart, once xdist has started its workers beside them: returns that
    pending check, as (EnvironmentCheck, where), or None."""
    from triton_conformance.conformance.canary import EnvironmentCheck, environment_failure

    if on_cuda(run.device):
        return EnvironmentCheck(run.device, run.compat, canaries=_canaries_on(config)), where
    line = environment_failure(run.device) if _canaries_on(config) else None
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


_ENVIRONMENT = pytest.StashKey[tuple]()


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session: pytest.Session):  # noqa: ANN201
    """After xdist has started its workers (its own pytest_sessionstart): wait for the CUDA environment check
    that ran beside their start-up, and end the run with its one line if the environment cannot run
    kernels, before any cell is scheduled."""
    result = yield
    pending = session.config.stash.get(_ENVIRONMENT, None)
    if pending is not None:
        del session.config.stash[_ENVIRONMENT]
        check, where = pending
        line = _environment_line(check.report(), where)
        if line is not None:
            raise pytest.UsageError(line)
    return result


def _shard(config: pytest.Config, results: str, controller: bool):  # noqa: ANN202
    """(shard or None, durations or None, what balances it) from --conformance-shard and -shard-durations."""
    from triton_conformance.plugin.shards import parse_shard, read_durations

    shard = parse_shard(*_option(config, "shard"))
    path, where = _option(config, "shard-durations")
    if shard is None or not path or not controller:  # workers get the controller's plan (pytest_configure_node)
        return shard, None, "cells"
    if path == "results":  # the bare flag: the results file there now, if there is one
        if not os.path.exists(results):
            return shard, None, "cells (no results file to take durations from)"
        path = results
    return shard, read_durations(path, where), f"durations in {path}"


def _history(config: pytest.Config) -> str | None:
    """The history database's URL (None: off); a bad value is a usage error now, not at the end of the run."""
    from triton_conformance.history.location import HistoryError, history_url

    value, where = _option(config, "history")
    try:
        return history_url(value, str(config.rootpath), where)
    except HistoryError as exc:
        raise ConformanceUsageError(str(exc)) from None


def _fresh(config: pytest.Config) -> bool:
    flag = config.getoption("conformance_fresh")
    return bool(flag) if flag is not None else bool(config.getini("conformance_fresh"))


# run_config's arguments and the options they come from.
_RUN_OPTIONS = {"profile": "profile", "seed": "seed", "compile_budget": "compiles", "timeout": "timeout",
                "isolation": "isolation", "compat": "compat", "worker_memory": "worker-memory"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a triton-conformance contract cell")
    if not _enabled(config):
        return
    claim = _pin_worker(config)
    from triton_conformance.conformance.backend import select_device
    from triton_conformance.plugin.session import ConformanceSession

    device, where = _option(config, "device")
    controller = getattr(config, "workerinput", None) is None
    results, results_where = _option(config, "results")
    fresh = _fresh(config)
    # Every mistake in the configuration is found here, before a cell runs, and reported in one line.
    try:
        device = select_device(device, where=where)
        options = {argument: _option(config, name) for argument, name in _RUN_OPTIONS.items()}
        run = run_config(device=device, **{k: v for k, (v, _) in options.items()},
                         where={k: w for k, (_, w) in options.items()})
        if not on_cuda(device):  # 'auto' resolved here; install() is idempotent
            from triton_conformance.conformance.interpreter_layer import install_compat

            install_compat(run.compat)
        if controller:  # HOOK(harness): the environment can run kernels at all, before any cell
            environment = _start_environment_check(config, run, where)
            if environment is not None:
                config.stash[_ENVIRONMENT] = environment
        if controller and not fresh:
            from triton_conformance.plugin.merge import check_mergeable

            check_mergeable(results, device=run.device,
                            where="--conformance-results" if results_where == "default" else results_where)
        session = ConformanceSession(config, run=run, results_path=results, fresh=fresh,
                                     cells=config.getoption("conformance_cell"))
        session.shard, session.durations, session.balance = _shard(config, results, controller)
        session.device_label = _option(config, "device-label")[0]
        session.history_url = _history(config) if controller else None
        session.load_subjects()
        session.check_selection()
    except (ConformanceUsageError, InvalidContract) as exc:
        raise pytest.UsageError(str(exc)) from None
    session.executor.sanitizer = _sanitizer(config, run.device, run.isolation)
    session.turns = _turns(claim, run.device)
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, "triton_conformance_session")
    alluredir = config.getoption("allure_report_dir", None)  # set only when allure-pytest is active
    if alluredir:
        from triton_conformance.plugin.allure import AllureConformance

        config.pluginmanager.register(AllureConformance(config, session, alluredir), "triton_conformance_allure")
