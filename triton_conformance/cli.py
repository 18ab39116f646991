"""The ``triton-conformance`` command.

- ``triton-conformance run [options] [-- pytest args]``: run the battery over the
  subjects declared in the current project (its conftest.py, ini option or
  entry points) and write the results JSON.
- ``triton-conformance show RESULTS``: print the matrix of a results file.
"""

from __future__ import annotations

import argparse
import sys

from triton_conformance.options import add_conformance_options

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="triton-conformance", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the conformance battery (pytest --conformance-only)")
    add_conformance_options(run.add_argument, prefix="--")
    run.add_argument("-n", "--workers", default=None,
                     help="pytest-xdist workers ('auto' for one per CPU, or per GPU with --device cuda)")
    run.add_argument("pytest_args", nargs="*", help="extra arguments for pytest, after --")
    show = sub.add_parser("show", help="print the matrix of a results file")
    show.add_argument("results", help="a results JSON written by a run")
    return parser


def _run(args: argparse.Namespace) -> int:
    import pytest

    argv = ["--conformance-only"]
    for name in ("device", "profile", "results", "seed", "isolation", "timeout"):
        value = getattr(args, f"conformance_{name}")
        if value is not None:
            argv.append(f"--conformance-{name}={value}")
    if args.workers not in (None, "0", "1"):
        argv += ["-p", "xdist", "-n", str(args.workers)]
    argv += ["-q", "-rN"] + list(args.pytest_args)
    code = pytest.main(argv)
    # Failing cells are the report, not an error of the run; known bugs are xfail.
    return int(code)


def _show(args: argparse.Namespace) -> int:
    from triton_conformance.conformance.outcomes import CellResult
    from triton_conformance.reports.results_json import read_results
    from triton_conformance.reports.terminal import matrix_lines

    try:
        doc = read_results(args.results)
    except (FileNotFoundError, ValueError) as exc:
        print(f"triton-conformance show: {exc}", file=sys.stderr)
        return 2
    env = doc["environment"]
    print(f"{env.get('device_name')} | triton {env.get('triton')} | torch {env.get('torch')} | "
          f"profile {env.get('profile')} | {doc.get('created')}")
    for line in matrix_lines(CellResult.from_dict(r) for r in doc["results"]):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    return _show(args)


if __name__ == "__main__":
    sys.exit(main())
