"""What the plugin reads of pytest's configuration: the conformance options, as the session needs them.

Import-light, as the entry module is: pytest and the standard library (the
sanitizer, the shards and the history load inside the functions that read
them).  Each reader raises ``pytest.UsageError`` or ConformanceUsageError
naming the option, so a mistake is one line before any cell runs.
"""

from __future__ import annotations

import os

import pytest

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.model.config import CUDA, on_cuda
from triton_conformance.options import key, resolve

__all__ = ["given", "enabled", "option", "gpus", "turns", "sanitizer", "shard", "split_durations", "history", "fresh"]

_GPUS = pytest.StashKey["list"]()


def given(config: pytest.Config, dest: str):  # noqa: ANN202
    """The command line's value of ``dest``; in pytest_load_initial_conftests, before the options are parsed
    into ``config.option``, the early parse's (``known_args_namespace``)."""
    value = config.getoption(dest)
    if value in (None, False, []):
        return getattr(config.known_args_namespace, dest, value)
    return value


def enabled(config: pytest.Config) -> bool:
    if given(config, "conformance_only"):
        return True
    flag = given(config, "conformance")
    return bool(flag) if flag is not None else bool(config.getini("conformance"))


def option(config: pytest.Config, name: str) -> tuple[str | None, str]:
    return resolve(name, given(config, f"conformance_{key(name)}"), config.getini(f"conformance_{key(name)}"))


def gpus(config: pytest.Config) -> list[str]:
    """The GPUs the workers spread over (controller side; cached): [] unless on cuda or --conformance-gpus."""
    if _GPUS in config.stash:
        return config.stash[_GPUS]
    from triton_conformance.workers.gpus import visible_gpus

    requested, where = option(config, "gpus")
    device, _ = option(config, "device")
    found: list[str] = []
    if requested or device == CUDA:  # the option as given
        try:
            found = visible_gpus(requested, where=where)
        except ConformanceUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_GPUS] = found
    return found


def turns(claim, device: str):  # noqa: ANN001, ANN202
    """The GpuTurns a worker's cells take on its GPU: only on cuda, and only when other workers share the GPU."""
    return claim.turns() if claim is not None and on_cuda(device) else None


def sanitizer(config: pytest.Config, device: str, isolation: str):  # noqa: ANN202
    tool, where = option(config, "sanitizer")
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


def shard(config: pytest.Config, results: str, controller: bool):  # noqa: ANN202
    """(shard or None, durations or None, what balances it) from --conformance-shard and -shard-durations."""
    from triton_conformance.plugin.shards import parse_shard, read_durations

    shard = parse_shard(*option(config, "shard"))
    path, where = option(config, "shard-durations")
    if shard is None or not path or not controller:  # workers get the controller's plan (pytest_configure_node)
        return shard, None, "cells"
    if path == "results":  # the bare flag: the results file there now, if there is one
        if not os.path.exists(results):
            return shard, None, "cells (no results file to take durations from)"
        path = results
    return shard, read_durations(path, where), f"durations in {path}"


def split_durations(config: pytest.Config, results: str, device: str) -> tuple[dict | None, str]:
    """The cell durations that cut long subjects into parts for the xdist workers (:mod:`.splitting`), and
    where they came from: ``--conformance-shard-durations`` if given, else the results file there now if
    it is this device's, else None (one unit a cell)."""
    from triton_conformance.plugin.shards import read_durations
    from triton_conformance.reports.results_json import read_results

    path, where = option(config, "shard-durations")
    if path and path != "results":
        return read_durations(path, where), f"durations in {path}"
    if not os.path.exists(results):
        return None, "cells (no results file to take durations from)"
    try:
        theirs = (read_results(results).get("environment") or {}).get("device")
    except (OSError, ValueError):
        return None, f"cells ({results} cannot be read)"
    if theirs != device:
        return None, f"cells ({results} is from device {theirs!r})"
    return read_durations(results, where), f"durations in {results}"


def history(config: pytest.Config) -> str | None:
    """The history database's URL (None: off); a bad value is a usage error now, not at the end of the run."""
    from triton_conformance.history.location import HistoryError, history_url

    value, where = option(config, "history")
    try:
        return history_url(value, str(config.rootpath), where)
    except HistoryError as exc:
        raise ConformanceUsageError(str(exc)) from None


def fresh(config: pytest.Config) -> bool:
    flag = config.getoption("conformance_fresh")
    return bool(flag) if flag is not None else bool(config.getini("conformance_fresh"))
