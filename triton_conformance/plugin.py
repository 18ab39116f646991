"""The pytest plugin (``pytest11`` entry point ``triton_conformance``).

It imports only pytest and the standard library: torch, triton, hypothesis and
the battery load only when ``--conformance`` is given.
"""

from __future__ import annotations

import os

import pytest

from triton_conformance.errors import ConformanceUsageError, InvalidContract
from triton_conformance.options import HELP_ENABLE, add_conformance_options, resolve

_SESSION = pytest.StashKey["object"]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from triton_conformance import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "triton-conformance")
    group.addoption("--conformance", action="store_true", default=None, dest="conformance", help=HELP_ENABLE)
    group.addoption("--conformance-only", action="store_true", default=False, dest="conformance_only",
                    help="run only the conformance battery: collect no test files")
    parser.addini("conformance", type="bool", default=False, help=HELP_ENABLE)
    parser.addini("conformance_modules", type="linelist", default=[],
                  help="modules that declare subjects, imported after the device is chosen")
    add_conformance_options(group.addoption, parser.addini)


def _enabled(config: pytest.Config) -> bool:
    if config.getoption("conformance_only"):
        return True
    flag = config.getoption("conformance")
    return bool(flag) if flag is not None else bool(config.getini("conformance"))


def _option(config: pytest.Config, name: str) -> tuple[str | None, str]:
    return resolve(name, config.getoption(f"conformance_{name}"), config.getini(f"conformance_{name}"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    # The interpreter must be on before a conftest imports any @triton.jit kernel.
    if not _enabled(early_config):
        return
    device, _ = _option(early_config, "device")
    if device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a triton-conformance contract cell")
    if not _enabled(config):
        return
    from triton_conformance.conformance.backend import select_device
    from triton_conformance.conformance.session import ConformanceSession

    device, where = _option(config, "device")
    try:
        device = select_device(device, where=where)
    except ConformanceUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    profile, where = _option(config, "profile")
    if profile not in ("dev", "ci", "nightly"):
        raise pytest.UsageError(f"{where}={profile!r}, expected one of ('dev', 'ci', 'nightly')")
    seed_text, where = _option(config, "seed")
    timeout_text, timeout_where = _option(config, "timeout")
    try:
        seed = int(seed_text) if seed_text not in (None, "") else None
    except ValueError:
        raise pytest.UsageError(f"{where}={seed_text!r}, expected an integer") from None
    try:
        timeout = float(timeout_text) if timeout_text not in (None, "", "0") else None
    except ValueError:
        raise pytest.UsageError(f"{timeout_where}={timeout_text!r}, expected a number of seconds") from None
    isolation, where = _option(config, "isolation")
    if isolation not in ("process", "none"):
        raise pytest.UsageError(f"{where}={isolation!r}, expected 'process' or 'none'")
    results, _ = _option(config, "results")
    session = ConformanceSession(config, device=device, profile=profile, results_path=results, seed=seed,
                                 isolation=isolation, timeout=timeout)
    try:
        session.load_subjects()
    except (ConformanceUsageError, InvalidContract) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, "triton_conformance_session")
    alluredir = config.getoption("allure_report_dir", None)  # set only when allure-pytest is active
    if alluredir:
        from triton_conformance.reports.allure import AllureConformance

        config.pluginmanager.register(AllureConformance(config, session, alluredir), "triton_conformance_allure")
