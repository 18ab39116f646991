"""Every option, defined once: the pytest plugin and the CLI both add them from here.

Each flag is ``--conformance-*`` with an ini twin ``conformance_*``; a value
resolves from the command line, then the environment, then the ini file.
"""

from __future__ import annotations

import os
from typing import Any, Callable

__all__ = ["OPTIONS", "BARE", "add_conformance_options", "resolve"]

# name, default, choices, help
OPTIONS: tuple[tuple[str, str | None, tuple[str, ...] | None, str], ...] = (
    ("device", "interpreter", ("interpreter", "cuda", "auto"),
     "where kernels run: the Triton interpreter on the CPU (default), cuda, or auto"),
    ("profile", "ci", ("dev", "ci", "nightly"),
     "hypothesis profile: dev (few examples), ci (derandomized), nightly (many, with an example database)"),
    ("results", "conformance-results/results.json", None, "where the results JSON is written"),
    ("seed", None, None, "hypothesis seed for non-derandomized profiles (default: fresh each run, printed)"),
    ("isolation", "process", ("process", "none"),
     "run cells in a replaceable worker process (default), or in the pytest process"),
    ("timeout", "300", None, "seconds a cell may run before it is recorded as a timeout"),
    ("gpus", None, None,
     "GPUs for the xdist workers, one worker pinned to each (a count or ids such as 0,1; "
     "default with --conformance-device=cuda: every visible GPU)"),
    ("sanitizer", "off", ("off", "memcheck"),
     "run each cell's worker under compute-sanitizer (memcheck; CUDA only, slow); the bare flag means memcheck"),
    ("compiles", None, None,
     ("most new Triton specializations each subject may compile on CUDA; examples needing more are discarded "
      "and counted (default: the profile's, 16 for nightly, none otherwise; 0: no limit)")),
)
# Options that may be given bare: the flag alone means this value.
BARE = {"sanitizer": "memcheck"}

HELP_ENABLE = "run the conformance battery over the declared subjects"


def add_conformance_options(addoption: Callable[..., Any], addini: Callable[..., Any] | None = None,
                            prefix: str = "--conformance-") -> None:
    """Add the options with ``addoption`` (argparse or pytest) and, if given, their ini twins."""
    for name, default, choices, help_text in OPTIONS:
        kwargs: dict[str, Any] = {"dest": f"conformance_{name}", "default": None,
                                  "help": f"{help_text} [default: {default}]"}
        if choices:
            kwargs["choices"] = choices
        if name in BARE:
            kwargs.update(nargs="?", const=BARE[name])
        addoption(f"{prefix}{name}", **kwargs)
        if addini is not None:
            addini(f"conformance_{name}", help=help_text, default=default)


def resolve(name: str, cli_value: str | None, ini_value: str | None) -> tuple[str | None, str]:
    """The value of option ``name`` and where it came from (for error messages)."""
    if cli_value is not None:
        return cli_value, f"--conformance-{name}"
    env = os.environ.get(f"CONFORMANCE_{name.upper()}")
    if env:
        return env, f"CONFORMANCE_{name.upper()} environment variable"
    default = next(d for n, d, _, _ in OPTIONS if n == name)
    if ini_value not in (None, ""):
        return ini_value, f"conformance_{name} ini option"
    return default, "default"
