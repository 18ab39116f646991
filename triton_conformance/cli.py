"""The ``triton-conformance`` command: run the conformance battery, and read, compare and replay its results.

- ``run``: the battery over the subjects declared in this project (conftest.py,
  the ``conformance_modules`` ini option or entry points), then ``results.html``;
- ``nightly``: the same on CUDA with the nightly profile, pytest-xdist
  workers pinned to the visible GPUs, several sharing each by default
  (both in :mod:`triton_conformance.running`);
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

from triton_conformance.fleet.command import add_fleet_parser, fleet
from triton_conformance.history.command import add_history_parser, history_command
from triton_conformance.model.cells import cell_id, split_cell_id
from triton_conformance.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from triton_conformance.reports.combine import MergeConflict, merge_results
from triton_conformance.reports.diff import diff_documents
from triton_conformance.reports.formats import load_format_modules, report_format, write_report
from triton_conformance.reports.html import write_html
from triton_conformance.reports.results_json import write_results
from triton_conformance.reports.terminal import document_lines
from triton_conformance.running import (
    add_baseline,
    add_battery_parsers,
    html_path_for,
    nightly_command,
    read_document,
    run_command,
)

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
class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors exit with pytest's usage-error status (4), as every usage error
    of the command does."""

    def error(self, message: str):  # noqa: ANN201 - never returns
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="triton-conformance", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_battery_parsers(sub)
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
    add_baseline(report)
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


def _show(args: argparse.Namespace) -> int:
    doc = read_document("show", args.results)
    env = doc["environment"]
    print(f"{env.get('device_name')} | triton {env.get('triton')} | torch {env.get('torch')} | "
          f"profile {env.get('profile')} | {doc.get('created')}")
    for line in document_lines(doc):
        print(line)
    return 0


def _merge(args: argparse.Namespace) -> int:
    named = [(path, read_document("merge", path)) for path in args.files]
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
    doc = read_document("report", args.results)
    baseline = read_document("report", args.baseline) if args.baseline else None
    output = args.output or os.path.splitext(args.results)[0] + fmt.suffix
    try:
        page = write_report(output, doc, fmt, baseline=baseline)
    except OSError as exc:
        print(f"triton-conformance report: cannot write {args.output!r}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(page)
    return 0


def _diff(args: argparse.Namespace) -> int:
    diff = diff_documents(read_document("diff", args.old), read_document("diff", args.new))
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
    doc = read_document("replay", args.results)
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
    commands = {"run": run_command, "nightly": nightly_command, "show": _show, "report": _report, "diff": _diff,
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
