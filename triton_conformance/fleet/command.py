"""The ``triton-conformance fleet`` command: its options, and the run (see triton_conformance.fleet)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import time

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.fleet import plan_tasks, run_fleet
from triton_conformance.model.outcomes import FAILING
from triton_conformance.options import EXIT_USAGE, OPTIONS, help_for, key
from triton_conformance.reports.html import write_html
from triton_conformance.reports.results_json import write_results

# plugin.shards is imported in fleet(): it imports the plugin package, and so pytest, which every other
# command of the CLI (this module builds the fleet's parser) starts without.

__all__ = ["FLEET_SKIP", "add_fleet_parser", "fleet"]


# Set per shard by the fleet itself; the history is recorded once, by the fleet, from the merged matrix.
FLEET_SKIP = {"shard", "device", "device-label", "results", "history"}


def add_fleet_parser(sub) -> argparse.ArgumentParser:  # noqa: ANN001
    text = ("fan the battery's shards out over a Ray cluster (or a local one), one task per device and shard, "
            "and merge them into one cross-device report")
    parser = sub.add_parser("fleet", help=text, description=text + " (docs/fleet.md; needs "
                            "pip install 'triton-conformance[fleet]')",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default=None, help="a Ray cluster's address (auto, ray://host:10001) "
                        "[default: start a local Ray instance]")
    parser.add_argument("--devices", default="interpreter",
                        help="device labels, comma-separated: interpreter and GPU models (H100,H200); a GPU "
                        "label's shards need num_gpus=1 and that accelerator_type [default: interpreter]")
    parser.add_argument("--shards", type=int, default=4, help="shards per device [default: 4]")
    parser.add_argument("--resources", choices=("accelerator", "custom"), default="accelerator",
                        help="place a GPU label's shards by Ray's accelerator_type, or by the custom resource "
                        "device:<label> [default: accelerator]")
    parser.add_argument("--simulate-devices", action="store_true",
                        help="run every label's shards on the interpreter, placed by the custom resource "
                        "device:<label> (a cluster without GPUs; tests)")
    parser.add_argument("--local-cpus", type=int, default=None,
                        help="CPUs of a local Ray instance [default: Ray's, every core]")
    parser.add_argument("--ship", action="store_true",
                        help="upload the current directory to the cluster (Ray's working_dir) instead of "
                        "expecting the same checkout at the same path on every node")
    parser.add_argument("-o", "--output", default="conformance-results/fleet.json", metavar="MATRIX.json",
                        help="the merged results [default: conformance-results/fleet.json], results.html beside")
    parser.add_argument("--workdir", default=None, metavar="DIR",
                        help="where each shard's results are written as it finishes [default: beside --output]")
    parser.add_argument("--faults", default=None, help=argparse.SUPPRESS)  # tests: kill attempts (fleet/tasks.py)
    for name, _default, choices, _ in OPTIONS:
        if name in FLEET_SKIP - {"history"}:
            continue
        kwargs = {"dest": f"conformance_{key(name)}", "default": None, "help": help_for(name)}
        if choices:
            kwargs["choices"] = choices
        parser.add_argument(f"--{name}", **kwargs)
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for each shard's pytest, after --")
    return parser


def fleet(args: argparse.Namespace, html_path: str) -> int:
    """The ``fleet`` command; ``html_path``: where the report goes."""
    if importlib.util.find_spec("ray") is None:
        print("triton-conformance fleet: Ray is not installed: pip install 'triton-conformance[fleet]'",
              file=sys.stderr)
        return EXIT_USAGE

    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    if not devices or len(set(devices)) < len(devices) or any(c in d for d in devices for c in "/ "):
        print(f"triton-conformance fleet: --devices={args.devices!r}, expected distinct labels such as "
              "interpreter,H200", file=sys.stderr)
        return EXIT_USAGE
    if args.shards < 1:
        print(f"triton-conformance fleet: --shards={args.shards}, expected at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.conformance_seed is None and (args.conformance_profile or "ci") != "ci":
        args.conformance_seed = str(random.randrange(2**32))  # one seed for every shard, so they agree
    argv: list[str] = []
    for name, *_ in OPTIONS:
        value = None if name in FLEET_SKIP else getattr(args, f"conformance_{key(name)}")
        if value is not None:
            argv.append(f"--{name}={value}")
    collect = [a.replace("--", "--conformance-", 1) for a in argv]
    argv.append("--history=none")
    durations = None
    if args.conformance_shard_durations:
        from triton_conformance.plugin.shards import read_durations

        try:
            durations = read_durations(args.conformance_shard_durations, "--shard-durations")
        except ConformanceUsageError as exc:
            print(f"triton-conformance fleet: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.pytest_args:
        argv += ["--", *args.pytest_args]
    tasks = plan_tasks(devices, args.shards, simulate=args.simulate_devices, mode=args.resources)
    init: dict = {}
    if args.address is None:
        if args.local_cpus:
            init["num_cpus"] = args.local_cpus
        if args.simulate_devices or args.resources == "custom":
            init["resources"] = {f"device:{d}": args.local_cpus or (os.cpu_count() or 1) for d in devices}
    workdir = args.workdir or os.path.join(os.path.dirname(os.path.abspath(args.output)), "fleet-shards")
    print(f"fleet: {len(tasks)} tasks ({len(devices)} device(s) x {args.shards} shards) on "
          f"{args.address or 'a local Ray instance'}; shards in {workdir}", flush=True)
    started = time.time()
    out = run_fleet(tasks, argv=argv, workdir=workdir, address=args.address, init=init, faults=args.faults,
                    collect_argv=collect, durations=durations, ship=args.ship,
                    log=lambda line: print(line, flush=True))
    if out.document is None:
        print(f"triton-conformance fleet: the shards cannot be merged: {out.error}; each is in {workdir}",
              file=sys.stderr)
        return EXIT_USAGE

    out.document["fleet"] = {"tasks": [t.key for t in tasks], "attempts": out.attempts, "lost": out.lost}
    history = _record(args, out.document, started)
    if history is not None:
        out.document["history"] = history
    write_results(args.output, out.document)
    for line in out.document["merged"]["missing_shards"]:
        print(f"triton-conformance fleet: warning: {line}", file=sys.stderr)
    found = len(out.document.get("divergences") or ())
    print(f"{args.output}: {len(out.document['results'])} cells; {len(out.lost)} shard(s) lost"
          + (f"; {found} device divergence(s)" if "devices" in out.document else ""))
    print(f"report: {write_html(html_path, out.document)}")

    # As run: 1 when a cell fails (known bugs aside) or a shard was lost, 0 otherwise.
    failing = any(r["outcome"] in FAILING and not r.get("expected_failure") for r in out.document["results"])
    return 1 if out.lost or failing else 0


def _record(args: argparse.Namespace, document: dict, started: float) -> dict | None:
    """Record the merged matrix in the history (one run per device); its history section, or None."""
    from triton_conformance.history.location import HistoryError, history_url
    from triton_conformance.plugin.history import record_run

    value = args.conformance_history or os.environ.get("CONFORMANCE_HISTORY")
    try:
        url = history_url(value, os.getcwd(), "--history")
    except HistoryError as exc:
        print(f"triton-conformance fleet: {exc}", file=sys.stderr)
        return None
    return None if url is None else record_run(url, document, started=started, root=os.getcwd())
