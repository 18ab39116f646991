"""The ``triton-conformance`` command: run the conformance battery, and read, compare and replay its results.

- ``run``: the battery over the subjects declared in this project (conftest.py,
  the ``conformance_modules`` ini option or entry points), then ``results.html``;
- ``nightly``: the same on CUDA with the nightly profile, pytest-xdist
  workers pinned to the visible GPUs, several sharing each by default;
- ``show`` / ``report`` / ``diff``: the matrix, the HTML page, what changed;
- ``replay``: run a failing cell's stored reproducer again;
- ``merge``: shards of a run into the whole run, runs on several devices into
  a cross-device matrix.

Exit statuses (:mod:`triton_conformance.options`, the same as pytest's where they meet): 0 every cell
passed (known bugs are xfail; replay: the failure is gone); 1 a kernel verdict failed (replay: the failure
is still there; diff: a regression); 4 a usage error, said in one line (a bad option or argument, an
unreadable, malformed or foreign results file, a canary kernel that failed: the environment is broken);
6 a harness error (triton-conformance's own code raised in a cell: our bug); 7 replay: the reproducer
could not run (it raised before reaching a verdict).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import time
from importlib.metadata import entry_points

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.fleet.command import add_fleet_parser, fleet
from triton_conformance.history.command import add_history_parser, history_command
from triton_conformance.model.cells import cell_id, split_cell_id
from triton_conformance.options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    HELP_CELL,
    HELP_FRESH,
    OPTIONS,
    add_conformance_options,
    key,
)
from triton_conformance.reports.combine import MergeConflict, merge_results
from triton_conformance.reports.diff import diff_documents
from triton_conformance.reports.formats import load_format_modules, report_format, write_report
from triton_conformance.reports.html import write_html
from triton_conformance.reports.results_json import check_cells, read_results, write_results
from triton_conformance.reports.terminal import document_lines
from triton_conformance.workers.gpus import slots_per_gpu, visible_gpus, workers_per_gpu

__all__ = ["main"]

EXIT_SIGPIPE = 141  # 128 + SIGPIPE: what a shell reports for a command whose reader went away
DESCRIPTION = "Run the conformance battery over your Triton kernels, and read, compare and replay its results."
EPILOG = """\
examples:
  triton-conformance run -n 2                      the battery on the Triton interpreter (CPU), 2 workers
  triton-conformance run --cell 'add[shape:tiny]'  one cell again; the results merge into results.json
  triton-conformance run --fresh -- -k softmax     start a new results file; pytest arguments after --
  triton-conformance nightly --gpus 0,1            on CUDA, nightly profile, workers sharing each GPU
  triton-conformance show conformance-results/results.json
  triton-conformance report conformance-results/results.json --baseline last.json
  triton-conformance diff last.json conformance-results/results.json   exit 1 on a regression
  triton-conformance replay conformance-results/results.json 'add[shape:tiny]'
  triton-conformance run --shard 2/4 --results shard2.json   one shard of four (one per machine)
  triton-conformance merge shard*.json -o results.json        the shards into the whole run
  triton-conformance merge cpu.json h200.json -o matrix.json  a cross-device matrix, divergences listed
  triton-conformance fleet --address auto --devices interpreter,H200 --shards 4   shards on a Ray cluster
  triton-conformance history new                   what went red since the last green run (history trend,
                                                   flaky, first-bad, slower: see history --help)

Every run option is also a pytest flag --conformance-NAME, an ini option
conformance_NAME and an environment variable CONFORMANCE_NAME.

exit status: 0 passed, 1 a kernel failed (replay: still fails; diff: a regression), 4 usage error
(a bad option or file, a failing canary), 6 a harness error (our bug), 7 replay could not run.
"""
# The nightly command's own defaults: shown in its --help, and what it runs with.
NIGHTLY_DEFAULTS = {"device": "cuda", "profile": "nightly"}
HELP_BASELINE = "an earlier results JSON: the report also shows what changed since then"
HELP_PER_GPU = ("xdist workers sharing each GPU, a number >= 1 or auto: three quarters of the cores per GPU, 1 to 12; "
                "performance cells still take their GPU alone; -n overrides it [default: auto]")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors exit with pytest's usage-error status (4), as every usage error
    of the command does."""

    def error(self, message: str):  # noqa: ANN201 - never returns
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", metavar="OLD.json", default=None, help=HELP_BASELINE)


def _battery(sub, name: str, help_text: str, *, defaults: dict[str, str] | None = None,  # noqa: ANN001
             workers: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_conformance_options(parser.add_argument, prefix="--", defaults=defaults)
    parser.add_argument("-n", "--workers", default=None, help=f"pytest-xdist workers [default: {workers}]")
    parser.add_argument("--fresh", action="store_true", help=HELP_FRESH)
    parser.add_argument("--cell", action="append", default=[], metavar="SUBJECT[CELL]", help=HELP_CELL)
    _add_baseline(parser)
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest, after --")
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="triton-conformance", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _battery(sub, "run", "run the conformance battery (pytest --conformance-only), then write results.html",
             workers="none: one pytest process ('auto': one per CPU, or per GPU with --device cuda)")
    nightly = _battery(sub, "nightly", "the battery on CUDA with the nightly profile, xdist workers sharing "
                       "each GPU", defaults=NIGHTLY_DEFAULTS,
                       workers="--workers-per-gpu for each GPU in --gpus, else each visible GPU")
    nightly.add_argument("--workers-per-gpu", metavar="N", default="auto", help=HELP_PER_GPU)
    show = sub.add_parser("show", help="print the matrix of a results file", description="print the matrix of a "
                          "results file (pipe it into head or less freely)")
    show.add_argument("results", help="a results JSON written by a run")
    report = sub.add_parser("report", help="render the report of a results file (the HTML page, or another format)")
    report.add_argument("results", help="a results JSON written by a run")
    report.add_argument("-o", "--output", metavar="REPORT", default=None,
                        help="where to write it [default: the results path with the format's suffix]")
    report.add_argument("--format", default="html", help="the report format: html, text, or one a --format-module "
                        "or an installed package registers [default: html]")
    report.add_argument("--format-module", action="append", default=[], metavar="MODULE",
                        help="a module to import first, which registers report formats (repeatable)")
    _add_baseline(report)
    diff = sub.add_parser("diff", help="compare two results files; exit status 1 on any regression")
    diff.add_argument("old", help="the baseline results JSON")
    diff.add_argument("new", help="the results JSON to judge")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON instead of text")

    add_fleet_parser(sub)
    add_history_parser(sub)
    merge = sub.add_parser(
        "merge", help="merge results files: the shards of a run, or runs on several devices into one matrix",
        description="Merge results files into one: the shards of one run (--shard K/N) into the whole run, or "
                    "runs on several devices into a cross-device matrix (subject x cell x device) that lists "
                    "the cells whose verdicts differ between devices. Files of different commits, profiles, "
                    "seeds or schema versions, or with one cell on one device twice with different outcomes, "
                    "are refused (exit 2) unless --allow-mixed.")
    merge.add_argument("files", nargs="+", metavar="RESULTS.json", help="results files written by runs")
    merge.add_argument("-o", "--output", metavar="MERGED.json", required=True, help="where to write the result")
    merge.add_argument("--allow-mixed", action="store_true",
                       help="merge files of different runs anyway; the later file wins a conflicting cell")
    merge.add_argument("--html", action="store_true", help="also write the HTML report beside the output")
    replay = sub.add_parser(
        "replay", help="run a failing cell's reproducer again, with this Python; exit 1 if it still fails",
        description="Run the reproducer stored for CELL in RESULTS with this Python, from the current "
                    "directory (the project root, so that the subject's module imports), with the interpreter "
                    "compat shims the run used. It prints what the reproducer prints, and exits 1 if the "
                    "failure is still there, 0 if not, 7 if the reproducer could not run (it raised before "
                    "reaching a verdict: an import, a missing module), 4 if a canary kernel fails here.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_argument("results", help="a results JSON written by a run")
    replay.add_argument("cell", metavar="SUBJECT[CELL]", help="the cell, as the matrix names it: add[shape:tiny]")
    replay.add_argument("--dump", metavar="FILE", help="also torch.save the example's inputs, scalars and "
                        "grad_outputs (a dict with its spec) to FILE, as counterexample_inputs() builds them")
    return parser


def _read(command: str, path: str) -> dict:
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
    return argv + ["-q", "-rN"] + list(args.pytest_args)


def _pytest(command: str, argv: list[str], baseline: dict | None) -> int:
    """Run pytest, then write the HTML report beside the results JSON it wrote."""
    import pytest  # only run and nightly need it (and the plugin package): show, report and diff start without

    started = time.time()
    where = _ResultsPath()
    code = pytest.main(argv, plugins=[where])
    # Failing cells are the report, not an error of the run; known bugs are xfail.
    if where.path and os.path.exists(where.path) and os.path.getmtime(where.path) >= started - 1:
        page = write_html(html_path_for(where.path), _read(command, where.path), baseline=baseline)
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


def _run(args: argparse.Namespace) -> int:
    _check_shard("run", args)
    baseline = _read("run", args.baseline) if args.baseline else None
    return _pytest("run", _pytest_argv(args, xdist=args.workers not in (None, "0", "1")), baseline)


def _nightly(args: argparse.Namespace) -> int:
    """``--workers-per-gpu`` xdist workers per GPU, each claiming a slot (see triton_conformance.workers.gpus)."""
    _check_shard("nightly", args)
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


def _show(args: argparse.Namespace) -> int:
    doc = _read("show", args.results)
    env = doc["environment"]
    print(f"{env.get('device_name')} | triton {env.get('triton')} | torch {env.get('torch')} | "
          f"profile {env.get('profile')} | {doc.get('created')}")
    for line in document_lines(doc):
        print(line)
    return 0


def _merge(args: argparse.Namespace) -> int:
    named = [(path, _read("merge", path)) for path in args.files]
    try:
        doc = merge_results(named, allow_mixed=args.allow_mixed)
    except MergeConflict as exc:
        print(f"triton-conformance merge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        write_results(args.output, doc)
    except OSError as exc:
        print(f"triton-conformance merge: cannot write {args.output!r}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for line in doc["merged"]["mixed"]:
        print(f"triton-conformance merge: --allow-mixed: {line}", file=sys.stderr)
    for line in doc["merged"]["missing_shards"]:
        print(f"triton-conformance merge: warning: {line}; the merged file is not the whole run", file=sys.stderr)
    devices = [d["device"] for d in doc.get("devices") or ()] or [doc["environment"].get("device_label")
                                                                  or doc["environment"].get("device")]
    found = len(doc.get("divergences") or ())
    print(f"{args.output}: {len(doc['results'])} cells from {len(named)} files on {len(devices)} "
          f"device{'s' if len(devices) > 1 else ''} ({', '.join(map(str, devices))})"
          + (f"; {found} device divergence{'s' if found != 1 else ''}" if len(devices) > 1 else ""))
    if args.html:
        print(f"report: {write_html(html_path_for(args.output), doc)}")
    return 0


def _report(args: argparse.Namespace) -> int:
    try:
        load_format_modules(args.format_module)
        fmt = report_format(args.format)
    except (ImportError, ValueError) as exc:
        print(f"triton-conformance report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    doc = _read("report", args.results)
    baseline = _read("report", args.baseline) if args.baseline else None
    output = args.output or os.path.splitext(args.results)[0] + fmt.suffix
    try:
        page = write_report(output, doc, fmt, baseline=baseline)
    except OSError as exc:
        print(f"triton-conformance report: cannot write {args.output!r}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(page)
    return 0


def _diff(args: argparse.Namespace) -> int:
    diff = diff_documents(_read("diff", args.old), _read("diff", args.new))
    if args.json:
        print(json.dumps(diff.to_dict(), indent=1, default=str))
    else:
        print("\n".join(diff.summary_lines()))
    return EXIT_FAILED if diff.has_regressions else EXIT_OK


def _find_cell(doc: dict, path: str, wanted: str) -> dict:
    """The result of ``wanted`` (``subject[cell]``) in ``doc``; SystemExit(EXIT_USAGE) naming it otherwise."""
    names = {cell_id(r["subject"], r["cell"]): r for r in doc["results"]}
    if wanted in names:
        return names[wanted]
    close = difflib.get_close_matches(wanted, list(names), n=3)
    hint = f"; closest: {', '.join(close)}" if close else ""
    named = split_cell_id(wanted)
    if named is None:
        hint = f"; expected subject[cell], as the matrix names it{hint}"
    elif not any(r["subject"] == named[0] for r in doc["results"]):
        hint = f"; the file has no subject {named[0]!r}{hint}"
    print(f"triton-conformance replay: cell={wanted!r} is not in {path!r}{hint}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _fleet(args: argparse.Namespace) -> int:
    return fleet(args, html_path_for(args.output))


def _replay(args: argparse.Namespace) -> int:
    doc = _read("replay", args.results)
    result = _find_cell(doc, args.results, args.cell)
    script = result.get("reproducer")
    if not script:
        why = "only failing cells carry one" if result.get("outcome") in ("honoured", "rejected", "skipped") \
            else "this cell's failure cannot be rebuilt from a spec"
        print(f"triton-conformance replay: cell={args.cell!r} ({result.get('outcome')}"
              f"{', ' + result['finding'] if result.get('finding') else ''}) has no reproducer in "
              f"{args.results!r}: {why}", file=sys.stderr)
        return EXIT_USAGE
    from triton_conformance.replaying import REPLAY_CHILD, environment_of

    env = environment_of(doc, result)
    shims = env.get("compat") if env.get("device", "interpreter") == "interpreter" else []
    print(f"replaying {args.cell} ({result.get('outcome')}, {result.get('finding')}) with {sys.executable}"
          + (f", compat shims {', '.join(shims)}" if shims else ""), file=sys.stderr, flush=True)
    sys.stdout.flush()
    # -c puts the current directory first on sys.path, as the reproducer expects (run from the project root).
    child = [sys.executable, "-c", REPLAY_CHILD, str(env.get("device") or "interpreter"), json.dumps(shims), script,
             *([args.dump] if args.dump else [])]
    code = subprocess.run(child).returncode
    if code < 0:  # killed by a signal, as a kernel that corrupts memory does: the failure is there
        print(f"triton-conformance replay: the reproducer's process was killed by signal {-code}, as a crashing "
              "kernel's is: the failure is still there", file=sys.stderr)
        return EXIT_FAILED
    return code


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"run": _run, "nightly": _nightly, "show": _show, "report": _report, "diff": _diff,
                "replay": _replay, "merge": _merge, "fleet": _fleet,
                "history": history_command}
    try:
        code = commands[args.command](args)
        sys.stdout.flush()  # a reader that went away is found here, not at exit
        return code
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    except BrokenPipeError:
        # `triton-conformance show RESULTS | head`: the reader has what it wanted. Stop quietly, as cat does;
        # point stdout at devnull so that the interpreter's last flush at exit does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
