"""The ``triton-conformance`` command.

- ``triton-conformance run [options] [-- pytest args]``: run the battery over the
  subjects declared in the current project (its conftest.py, ini option or
  entry points) and write the results JSON, with the HTML report beside it.
- ``triton-conformance nightly [options] [-- pytest args]``: the same on CUDA
  with the nightly profile, one pytest-xdist worker pinned to each visible GPU.
- ``triton-conformance show RESULTS``: print the matrix of a results file.
- ``triton-conformance report RESULTS [-o report.html] [--baseline OLD]``:
  render the self-contained HTML report, with the diff against OLD.
- ``triton-conformance diff OLD NEW``: print what changed; exit status 1 if
  any cell regressed, so a nightly job can fail on it.

Unreadable, malformed or foreign results files exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from triton_conformance.options import OPTIONS, add_conformance_options

__all__ = ["main"]

EXIT_USAGE = 2
HELP_BASELINE = "an earlier results JSON: the report also shows what changed since then"


def _add_baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", metavar="OLD.json", default=None, help=HELP_BASELINE)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="triton-conformance", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the conformance battery (pytest --conformance-only)")
    add_conformance_options(run.add_argument, prefix="--")
    run.add_argument("-n", "--workers", default=None,
                     help="pytest-xdist workers ('auto' for one per CPU, or per GPU with --device cuda)")
    _add_baseline(run)
    run.add_argument("pytest_args", nargs="*", help="extra arguments for pytest, after --")
    nightly = sub.add_parser("nightly", help="the battery on CUDA, nightly profile, one xdist worker per GPU")
    add_conformance_options(nightly.add_argument, prefix="--")
    nightly.set_defaults(conformance_device="cuda", conformance_profile="nightly")
    nightly.add_argument("-n", "--workers", default=None,
                         help="pytest-xdist workers [default: one per GPU in --gpus, else per visible GPU]")
    _add_baseline(nightly)
    nightly.add_argument("pytest_args", nargs="*", help="extra arguments for pytest, after --")
    show = sub.add_parser("show", help="print the matrix of a results file")
    show.add_argument("results", help="a results JSON written by a run")
    report = sub.add_parser("report", help="render the HTML report of a results file")
    report.add_argument("results", help="a results JSON written by a run")
    report.add_argument("-o", "--output", metavar="REPORT.html", default=None,
                        help="where to write the page [default: the results path with .html]")
    _add_baseline(report)
    diff = sub.add_parser("diff", help="compare two results files; exit status 1 on any regression")
    diff.add_argument("old", help="the baseline results JSON")
    diff.add_argument("new", help="the results JSON to judge")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON instead of text")
    return parser


def _read(command: str, path: str) -> dict:
    """The document at ``path``; raises SystemExit(2) with the reason if it cannot be used."""
    from triton_conformance.reports.results_json import check_cells, read_results

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
    from importlib.metadata import entry_points

    return any(ep.value == "triton_conformance.plugin" for ep in entry_points(group="pytest11"))


def _pytest_argv(args: argparse.Namespace, *, xdist: bool) -> list[str]:
    argv = ["--conformance-only"]
    for name, *_ in OPTIONS:
        value = getattr(args, f"conformance_{name}")
        if value is not None:
            argv.append(f"--conformance-{name}={value}")
    if xdist:
        argv += ["-p", "xdist", "-n", str(args.workers)]
    if not _plugin_installed():  # run from a checkout (e.g. a GPU machine where nothing installs)
        argv += ["-p", "triton_conformance.plugin"]
    return argv + ["-q", "-rN"] + list(args.pytest_args)


def _pytest(command: str, argv: list[str], baseline: dict | None) -> int:
    """Run pytest, then write the HTML report beside the results JSON it wrote."""
    import pytest

    started = time.time()
    where = _ResultsPath()
    code = pytest.main(argv, plugins=[where])
    # Failing cells are the report, not an error of the run; known bugs are xfail.
    if where.path and os.path.exists(where.path) and os.path.getmtime(where.path) >= started - 1:
        from triton_conformance.reports.html import write_html

        page = write_html(html_path_for(where.path), _read(command, where.path), baseline=baseline)
        print(f"report: {page}")
    return int(code)


def _run(args: argparse.Namespace) -> int:
    baseline = _read("run", args.baseline) if args.baseline else None
    return _pytest("run", _pytest_argv(args, xdist=args.workers not in (None, "0", "1")), baseline)


def _nightly(args: argparse.Namespace) -> int:
    """One xdist worker per GPU, each claiming its own (see triton_conformance.workers.gpus)."""
    from triton_conformance.workers.gpus import visible_gpus
    from triton_conformance.errors import ConformanceUsageError

    baseline = _read("nightly", args.baseline) if args.baseline else None
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
    if args.workers in (None, "auto"):
        args.workers = str(len(gpus))
    if not args.workers.isdigit() or int(args.workers) < 1:
        print(f"triton-conformance nightly: -n={args.workers!r}, expected a positive number of workers",
              file=sys.stderr)
        return EXIT_USAGE
    threads = share_cores(int(args.workers))
    print(f"nightly: {args.workers} worker(s) over GPUs {gpus}, device {args.conformance_device}, "
          f"profile {args.conformance_profile}, {threads} CPU threads each", flush=True)
    # --dist loadgroup: a subject's cells run on one worker, so its compile budget holds for the run.
    return _pytest("nightly", _pytest_argv(args, xdist=True) + ["--dist", "loadgroup"], baseline)


def share_cores(workers: int, environ: dict | None = None) -> str:
    """Give each worker its share of the host's cores for torch's CPU threads (unless the user set them).

    Every torch process otherwise starts one spinning thread per core: two
    workers on a 32-core host made CPU-side cells up to ten times slower.
    """
    environ = os.environ if environ is None else environ
    share = str(max(1, (os.cpu_count() or 1) // max(1, workers)))
    return environ.setdefault("OMP_NUM_THREADS", share)


def _show(args: argparse.Namespace) -> int:
    from triton_conformance.model.outcomes import CellResult
    from triton_conformance.reports.terminal import matrix_lines

    doc = _read("show", args.results)
    env = doc["environment"]
    print(f"{env.get('device_name')} | triton {env.get('triton')} | torch {env.get('torch')} | "
          f"profile {env.get('profile')} | {doc.get('created')}")
    for line in matrix_lines(CellResult.from_dict(r) for r in doc["results"]):
        print(line)
    return 0


def _report(args: argparse.Namespace) -> int:
    from triton_conformance.reports.html import write_html

    doc = _read("report", args.results)
    baseline = _read("report", args.baseline) if args.baseline else None
    try:
        page = write_html(args.output or html_path_for(args.results), doc, baseline=baseline)
    except OSError as exc:
        print(f"triton-conformance report: cannot write {args.output!r}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(page)
    return 0


def _diff(args: argparse.Namespace) -> int:
    from triton_conformance.reports.diff import diff_documents

    diff = diff_documents(_read("diff", args.old), _read("diff", args.new))
    if args.json:
        print(json.dumps(diff.to_dict(), indent=1, default=str))
    else:
        print("\n".join(diff.summary_lines()))
    return 1 if diff.has_regressions else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"run": _run, "nightly": _nightly, "show": _show, "report": _report, "diff": _diff}
    try:
        return commands[args.command](args)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
