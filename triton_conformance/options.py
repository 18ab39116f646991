"""Every option, defined once: the pytest plugin and the CLI both add them from here.

Each flag is ``--conformance-*`` with an ini twin ``conformance_*``; a value
resolves from the command line, then the environment, then the ini file.
"""

from __future__ import annotations

import os
from typing import Any, Callable

__all__ = ["OPTIONS", "BARE", "DEFAULT_TEXT", "HELP_ENABLE", "HELP_FRESH", "HELP_CELL", "add_conformance_options",
           "help_for", "key", "resolve", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_HARNESS_ERROR",
           "EXIT_COULD_NOT_RUN"]

# name, default, choices, help (the help never states the default: help_for() adds it, once)
OPTIONS: tuple[tuple[str, str | None, tuple[str, ...] | None, str], ...] = (
    ("device", "interpreter", ("interpreter", "cuda", "auto"),
     "where kernels run: the Triton interpreter on the CPU, cuda, or auto (cuda if a GPU is visible)"),
    ("profile", "ci", ("dev", "ci", "nightly"),
     "hypothesis profile: dev (few examples), ci (derandomized), nightly (many, with an example database)"),
    ("results", "conformance-results/results.json", None,
     "where the results JSON is written; a partial run merges into the one there"),
    ("seed", None, None, "hypothesis seed for non-derandomized profiles"),
    ("isolation", "process", ("process", "none"),
     "run cells in a replaceable worker process, or in the pytest process"),
    ("timeout", "300", None, "seconds a cell may run before it is recorded as a timeout"),
    ("worker-memory", "auto", None,
     "memory each worker process may allocate beyond its start-up, so that an example too large for the host "
     "is discarded (skipped, saying so) before the host runs out: auto (the host's available memory less a "
     "margin, shared among the xdist workers), none, or a number of GiB"),
    ("gpus", None, None, "GPUs for the xdist workers, one worker pinned to each: a count or ids such as 0,1"),
    ("sanitizer", "off", ("off", "memcheck"),
     "run each cell's worker under compute-sanitizer (memcheck; CUDA only, slow); the bare flag means memcheck"),
    ("compat", "all", None,
     "shims of the interpreter compatibility layer: all, none, or a comma-separated list of names"),
    ("compiles", None, None,
     "most new Triton specializations each subject may compile on CUDA; examples needing more are discarded "
     "and counted (0: no limit)"),
    ("shard", None, None,
     "run only shard K of N (K/N, 1 <= K <= N): a stable split of the subjects, each subject's cells together; "
     "the other shards' cells are deselected"),
    ("shard-durations", None, None,
     "balance --conformance-shard, and the cut of long subjects between xdist workers under --dist loadgroup, "
     "by the cell durations in this earlier results JSON (the bare flag: the results file there now; the cut "
     "takes that file unasked when it is this device's); every shard must be given the same file"),
    ("device-label", None, None,
     "this run's device as a cross-device matrix names it (interpreter, H200, ...)"),
    ("canary", "on", ("on", "off"),
     "run a few canary kernels on the chosen back end before any cell, and stop with a usage error if one "
     "fails (the environment, not the kernels, is broken); off skips them"),
    ("batch", "1", None,
     "examples one Hypothesis test case draws, each judged on its own (the first failure is shrunk and "
     "replayed alone): the engine's cost per test case shared by that many; 1 draws as every earlier run did "
     "(a batch changes which examples run: docs/performance.md)"),
    ("history", ".conformance/history.sqlite", None,
     "the results history every run is recorded in: a SQLite path (relative to the rootdir), a "
     "postgresql:// URL for runs on many machines, or none"),
)
# Options that may be given bare: the flag alone means this value.
BARE = {"sanitizer": "memcheck", "shard-durations": "results"}
# What an option without a fixed default does when it is not given.
DEFAULT_TEXT = {
    "seed": "fresh each run, printed",
    "gpus": "every visible GPU with --conformance-device=cuda, else none",
    "compiles": "the profile's: 16 for nightly, no limit otherwise",
    "shard": "the whole battery",
    "shard-durations": "none: balanced by cell counts",
    "device-label": "interpreter, or the GPU's name on cuda",
}

# Exit statuses of a run (pytest's own: 0 every cell passed, 1 a kernel verdict failed, 2 interrupted,
# 3 pytest's internal error, 4 a usage error, 5 nothing collected) and of the CLI, which keeps them.
EXIT_OK = 0
EXIT_FAILED = 1  # a cell failed a verdict about its kernel; replay: the failure is still there; diff: a regression
EXIT_USAGE = 4  # a mistake in the configuration, a bad results file, or a canary that failed: said in one line
EXIT_HARNESS_ERROR = 6  # triton-conformance's own code raised in a cell: our bug (a harness-error cell)
EXIT_COULD_NOT_RUN = 7  # replay: the reproducer died before reaching a verdict (an import, a missing module)

HELP_ENABLE = "run the conformance battery over the declared subjects"
HELP_FRESH = ("write a new results file instead of merging this run's cells into the one there "
              "(a partial run merges by default, so nothing already computed is lost)")
HELP_CELL = ("run only this cell, as the terminal names it: subject[cell] (or a whole subject); "
             "may be repeated")


def key(name: str) -> str:
    """An option's name as a dest, ini and environment name: ``shard-durations`` -> ``shard_durations``."""
    return name.replace("-", "_")


def help_for(name: str, defaults: dict[str, str] | None = None) -> str:
    """The help of option ``name`` with its default stated once: ``defaults`` (a command's own) first."""
    _, default, _, text = next(o for o in OPTIONS if o[0] == name)
    shown = (defaults or {}).get(name) or DEFAULT_TEXT.get(name) or default
    return f"{text} [default: {shown}]"


def add_conformance_options(addoption: Callable[..., Any], addini: Callable[..., Any] | None = None,
                            prefix: str = "--conformance-", defaults: dict[str, str] | None = None) -> None:
    """Add the options with ``addoption`` (argparse or pytest) and, if given, their ini twins.

    ``defaults``: a command's own defaults (``nightly``: device cuda), set as the
    argparse defaults and shown in the help; otherwise a value left out is None,
    so that :func:`resolve` can look in the environment and the ini file.
    """
    defaults = defaults or {}
    for name, default, choices, _help in OPTIONS:
        kwargs: dict[str, Any] = {"dest": f"conformance_{key(name)}", "default": defaults.get(name),
                                  "help": help_for(name, defaults)}
        if choices:
            kwargs["choices"] = choices
        if name in BARE:
            kwargs.update(nargs="?", const=BARE[name])
        addoption(f"{prefix}{name}", **kwargs)
        if addini is not None:
            addini(f"conformance_{key(name)}", help=help_for(name), default=default)


def resolve(name: str, cli_value: str | None, ini_value: str | None) -> tuple[str | None, str]:
    """The value of option ``name`` and where it came from (for error messages)."""
    if cli_value is not None:
        return cli_value, f"--conformance-{name}"
    variable = f"CONFORMANCE_{key(name).upper()}"
    env = os.environ.get(variable)
    if env:
        return env, f"{variable} environment variable"
    default = next(d for n, d, _, _ in OPTIONS if n == name)
    if ini_value not in (None, "", default):  # the ini option's own default is the default, not the ini file
        return ini_value, f"conformance_{key(name)} ini option"
    return default, "default"
