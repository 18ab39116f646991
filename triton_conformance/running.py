"""The battery's commands, ``run`` and ``nightly``: pytest over the conformance cells, then the HTML page.

- ``run``: the battery over the subjects declared in this project, one pytest
  process or ``-n`` xdist workers;
- ``nightly``: the same on CUDA with the nightly profile, ``--workers-per-gpu``
  xdist workers sharing each visible GPU, each claiming a slot
  (:mod:`triton_conformance.workers.gpus`).

Also what every command of :mod:`triton_conformance.cli` reads a results file
with (:func:`read_document`), and where a results file's page goes
(:func:`html_path_for`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib.metadata import entry_points

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.options import EXIT_USAGE, HELP_CELL, HELP_FRESH, OPTIONS, add_conformance_options, key
from triton_conformance.reports.html import write_html
from triton_conformance.reports.results_json import check_cells, read_results
from triton_conformance.workers.gpus import slots_per_gpu, visible_gpus, workers_per_gpu

__all__ = ["add_battery_parsers", "add_baseline", "read_document", "html_path_for", "run_command",
           "nightly_command", "nightly_per_gpu", "share_cores", "NIGHTLY_DEFAULTS"]

# The nightly command's own defaults: shown in its --help, and what it runs with.
NIGHTLY_DEFAULTS = {"device": "cuda", "profile": "nightly"}
HELP_BASELINE = "an earlier results JSON: the report also shows what changed since then"
HELP_PER_GPU = ("xdist workers sharing each GPU, a number >= 1 or auto: three quarters of the cores per GPU, 1 to 12; "
                "performance cells still take their GPU alone; -n overrides it [default: auto]")


def add_baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", metavar="OLD.json", default=None, help=HELP_BASELINE)


def _battery(sub, name: str, help_text: str, *, defaults: dict[str, str] | None = None,  # noqa: ANN001
             workers: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_conformance_options(parser.add_argument, prefix="--", defaults=defaults)
    parser.add_argument("-n", "--workers", default=None, help=f"pytest-xdist workers [default: {workers}]")
    parser.add_argument("--fresh", action="store_true", help=HELP_FRESH)
    parser.add_argument("--cell", action="append", default=[], metavar="SUBJECT[CELL]", help=HELP_CELL)
    add_baseline(parser)
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest, after --")
    return parser


def add_battery_parsers(sub) -> None:  # noqa: ANN001 - argparse's subparsers action
    """The ``run`` and ``nightly`` subcommands, with every conformance option."""
    _battery(sub, "run", "run the conformance battery (pytest --conformance-only), then write results.html",
             workers="none: one pytest process ('auto': one per CPU, or per GPU with --device cuda)")
    nightly = _battery(sub, "nightly", "the battery on CUDA with the nightly profile, xdist workers sharing "
                       "each GPU", defaults=NIGHTLY_DEFAULTS,
                       workers="--workers-per-gpu for each GPU in --gpus, else each visible GPU")
    nightly.add_argument("--workers-per-gpu", metavar="N", default="auto", help=HELP_PER_GPU)


def read_document(command: str, path: str) -> dict:
    """The document at ``path``; raises SystemExit(EXIT_USAGE) with the reason if it cannot be used."""
    try:
        return check_cells(read_results(path), path)
    except (OSError, ValueError) as exc:
        print(f"triton-conformance {command}: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def html_path_for(results: str) -> str:
    """``results.json`` -> ``results.html``, beside it."""
    root, ext = os.path.splitext(results)
    return (root if ext.lower() == ".json" else results) + ".html"


class _ResultsPath:
    """A pytest plugin that learns where the session writes the results JSON."""

    path: str | None = None

    def pytest_configure(self, config) -> None:  # noqa: ANN001
        session = config.pluginmanager.get_plugin("triton_conformance_session")
        self.path = getattr(session, "results_path", None)


def _plugin_installed() -> bool:
    return any(ep.value == "triton_conformance.plugin" for ep in entry_points(group="pytest11"))


def _pytest_argv(args: argparse.Namespace, *, xdist: bool) -> list[str]:
    argv = ["--conformance-only"]
    for name, *_ in OPTIONS:
        value = getattr(args, f"conformance_{key(name)}")
        if value is not None:
            argv.append(f"--conformance-{name}={value}")
    if args.fresh:
        argv.append("--conformance-fresh")
    argv += [f"--conformance-cell={cell}" for cell in args.cell]
    if xdist:
        argv += ["-p", "xdist", "-n", str(args.workers)]
    if not _plugin_installed():  # run from a checkout (e.g. a GPU machine where nothing installs)
        argv += ["-p", "triton_conformance.plugin"]
    # --assert=plain: verdicts come from the plugin's reports, not assert introspection, so pytest need not
    # rewrite the ~240 plugin modules (in every pytest process, each run where bytecode is not cached, about
    # 0.9 s of CPU each); the caller's own --assert, in pytest_args, comes later and wins.
    return argv + ["-q", "-rN", "--assert=plain"] + list(args.pytest_args)


def _pytest(command: str, argv: list[str], baseline: dict | None) -> int:
    """Run pytest, then write the HTML report beside the results JSON it wrote."""
    import pytest  # only run and nightly need it (and the plugin package): show, report and diff start without

    started = time.time()
    where = _ResultsPath()
    code = pytest.main(argv, plugins=[where])
    # Failing cells are the report, not an error of the run; known bugs are xfail.
    if where.path and os.path.exists(where.path) and os.path.getmtime(where.path) >= started - 1:
        page = write_html(html_path_for(where.path), read_document(command, where.path), baseline=baseline)
        print(f"report: {page}")
    return int(code)


def _check_shard(command: str, args: argparse.Namespace) -> None:
    """A bad --shard is a one-line usage error here, before pytest starts (SystemExit(EXIT_USAGE))."""
    from triton_conformance.plugin.shards import parse_shard  # the plugin package loads pytest

    try:
        parse_shard(args.conformance_shard, "--shard")
    except ConformanceUsageError as exc:
        print(f"triton-conformance {command}: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def run_command(args: argparse.Namespace) -> int:
    _check_shard("run", args)
    baseline = read_document("run", args.baseline) if args.baseline else None
    return _pytest("run", _pytest_argv(args, xdist=args.workers not in (None, "0", "1")), baseline)


def nightly_command(args: argparse.Namespace) -> int:
    """``--workers-per-gpu`` xdist workers per GPU, each claiming a slot (see triton_conformance.workers.gpus)."""
    _check_shard("nightly", args)
    baseline = read_document("nightly", args.baseline) if args.baseline else None
    if args.conformance_isolation == "none":
        print("triton-conformance nightly: --isolation=none cannot survive a crashing kernel; "
              "nightly runs need process isolation", file=sys.stderr)
        return EXIT_USAGE
    try:
        gpus = visible_gpus(args.conformance_gpus, where="--gpus")
    except ConformanceUsageError as exc:
        print(f"triton-conformance nightly: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not gpus:
        print("triton-conformance nightly: no GPU visible (CUDA_VISIBLE_DEVICES="
              f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}, nvidia-smi, torch); give --gpus to choose them",
              file=sys.stderr)
        return EXIT_USAGE
    args.conformance_gpus = ",".join(gpus)  # the workers claim from exactly this list
    per_gpu = nightly_per_gpu(args.workers_per_gpu, os.cpu_count(), len(gpus))
    if per_gpu is None:
        print(f"triton-conformance nightly: --workers-per-gpu={args.workers_per_gpu!r}, expected a positive "
              "number of workers per GPU or 'auto'", file=sys.stderr)
        return EXIT_USAGE
    if args.workers in (None, "auto"):
        args.workers = str(len(gpus) * per_gpu)
    if not args.workers.isdigit() or int(args.workers) < 1:
        print(f"triton-conformance nightly: -n={args.workers!r}, expected a positive number of workers",
              file=sys.stderr)
        return EXIT_USAGE
    slots = slots_per_gpu(int(args.workers), len(gpus))  # as claim_gpu counts them
    shared = f"{slots} per GPU" if int(args.workers) % len(gpus) == 0 else f"up to {slots} per GPU"
    threads = share_cores(int(args.workers))
    print(f"nightly: {args.workers} worker(s) over GPUs {gpus}, {shared}, device {args.conformance_device}, "
          f"profile {args.conformance_profile}, {threads} CPU threads each", flush=True)
    # --dist loadgroup: a subject's cells run on one worker, so its compile budget holds for the run.
    return _pytest("nightly", _pytest_argv(args, xdist=True) + ["--dist", "loadgroup"], baseline)


def nightly_per_gpu(text: str | None, cpus: int | None, gpus: int) -> int | None:
    """The workers per GPU that ``--workers-per-gpu`` asks for: ``auto`` (or none) by
    :func:`~triton_conformance.workers.gpus.workers_per_gpu`, else the number; None if it is neither."""
    text = "auto" if text is None else str(text).strip()
    if text == "auto":
        return workers_per_gpu(cpus, gpus)
    return int(text) if text.isdigit() and int(text) >= 1 else None


def share_cores(workers: int, environ: dict | None = None) -> str:
    """Give each worker its share of the host's cores for torch's CPU threads (unless the user set them).

    Every torch process otherwise starts one spinning thread per core: two
    workers on a 32-core host made CPU-side cells up to ten times slower.
    """
    environ = os.environ if environ is None else environ
    share = str(max(1, (os.cpu_count() or 1) // max(1, workers)))
    return environ.setdefault("OMP_NUM_THREADS", share)
