"""``triton-conformance history``: what the recorded runs say (trend, new, flaky, first-bad, slower), as text
or, with ``--json``, as JSON for CI bots.  SQLAlchemy loads only when the command runs."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from typing import Any

from triton_conformance.history.location import DEFAULT_PATH, FLAKE_LEVEL, FLAKE_RUNS, HistoryError
from triton_conformance.model.outcomes import OUTCOME_TABLE
from triton_conformance.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["add_history_parser", "history_command"]

_LETTERS = {o.name: o.letter for o in OUTCOME_TABLE}

HELP_STORE = (f"the history database: a SQLite path or a postgresql:// URL [default: $CONFORMANCE_HISTORY, else "
              f"{DEFAULT_PATH} in the current directory]")


def add_history_parser(sub: Any) -> argparse.ArgumentParser:  # noqa: ANN401 - argparse's subparsers action
    parser = sub.add_parser("history", help="what the recorded runs say: a cell's trend, what is new, flaky "
                            "cells, the first bad commit, slower cells",
                            description="Query the results history every run records (--history).")
    verbs = parser.add_subparsers(dest="history_command", required=True, metavar="QUERY")

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        p = verbs.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--history", metavar="URL", default=None, help=HELP_STORE)
        p.add_argument("--device", default=None, help="only runs on this device label (interpreter, H200, ...)")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
        return p

    trend = verb("trend", "the last runs' outcomes of a cell (subject[cell]) or of every cell of a subject")
    trend.add_argument("name", metavar="CELL_OR_SUBJECT")
    trend.add_argument("-n", "--last", type=int, default=10, help="runs shown [default: 10]")
    verb("new", "what the newest run changed since the last green run on the same device: new failures, new "
         "passes, changed findings; exit 1 if there is a new failure")
    flaky = verb("flaky", "cells whose outcome differs between runs at the same commit and device")
    flaky.add_argument("--all", action="store_true", dest="include_stable",
                       help="also the cells that never flipped (to compare a stochastic cell's rate)")
    flaky.add_argument("-n", "--last", type=int, default=FLAKE_RUNS,
                       help=f"only each device's newest N runs (0: every recorded run) [default: {FLAKE_RUNS}]")
    flaky.add_argument("--level", type=float, default=FLAKE_LEVEL,
                       help="flag a cell whose flip count has a binomial p-value, under its declared rate, below "
                            f"LEVEL / the stochastic cells tested [default: {FLAKE_LEVEL}]")
    first = verb("first-bad", "the commit where a cell turned red, in git order, and a git bisect run line "
                 "that replays its stored reproducer between the last good commit and that one")
    first.add_argument("cell", metavar="SUBJECT[CELL]")
    slower = verb("slower", "cells of the newest run whose duration or compile count grew past a threshold "
                  "against their median")
    slower.add_argument("--threshold", type=float, default=1.5, help="ratio to the median [default: 1.5]")
    slower.add_argument("--min-seconds", type=float, default=0.5,
                        help="a duration must also grow by this much [default: 0.5]")
    slower.add_argument("-n", "--last", type=int, default=20, help="runs the median is over [default: 20]")
    return parser


def _when(started: float | None) -> str:
    if started is None:
        return "?"
    return _dt.datetime.fromtimestamp(started, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _commit(c: str | None) -> str:
    return (c or "?")[:10]


def _trend_lines(out: dict[str, Any]) -> list[str]:
    if not out["runs"]:
        return [f"no recorded run has {out['name']!r}"]
    lines = [f"{out['name']}: the last {len(out['runs'])} runs, oldest first"]
    lines += [f"  run {r['id']:>5}  {_when(r['started'])}  {_commit(r['commit'])}{'+' if r['dirty'] else ' '} "
              f"{r['device']}" for r in out["runs"]]
    width = max(len(n) for n in out["cells"])
    for name, strip in out["cells"].items():
        letters = "".join(_LETTERS.get(c["outcome"], "?") if c else "-" for c in strip)
        last = next((c for c in reversed(strip) if c), None)
        note = f"  {last['outcome']}{' ' + last['finding'] if last and last['finding'] else ''}" if last else ""
        lines.append(f"  {name:<{width}}  {letters}{note}")
    return lines


def _new_lines(out: dict[str, Any]) -> list[str]:
    run, base = out["run"], out["baseline"]
    if run is None:
        return ["no recorded run"]
    since = f"the last green run {base['id']} at {_commit(base['commit'])}" if base else \
        "no green run on this device (every failure is new)"
    lines = [f"run {run['id']} at {_commit(run['commit'])} on {run['device']}, since {since}:"]
    for key, label in (("new_failures", "new failure"), ("new_passes", "new pass"),
                       ("changed_findings", "changed finding")):
        for e in out[key]:
            then = f"{e['then']['outcome']} {e['then']['finding'] or ''}".strip() if e["then"] else "not run"
            lines.append(f"  {label}: {e['cell']}: {then} -> {e['now']['outcome']} {e['now']['finding'] or ''}"
                         .rstrip())
    return lines if len(lines) > 1 else lines + ["  nothing changed"]


def _flaky_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no cell's outcome differs between runs at the same commit and device"]
    lines = []
    for r in rows:
        declared = f", declared false-positive rate {r['false_positive_rate']:.3g}" \
            if r["false_positive_rate"] is not None else ""
        seen = ", ".join(f"{k} {v}" for k, v in sorted(r["outcomes"].items()))
        lines.append(f"{'FLAGGED ' if r['flagged'] else ''}{r['cell']} on {r['device']}: {r['flips']} of "
                     f"{r['runs']} runs flipped (rate {r['rate']:.3g}{declared}, p-value {r['p_value']:.2g} against "
                     f"{r['level']:.2g}; {seen})")
    return lines


def _first_bad_lines(out: dict[str, Any]) -> list[str]:
    if out["first_bad"] is None:
        if not out["commits"]:
            return [f"{out['cell']}: no recorded run at a commit of this checkout's history"]
        return [f"{out['cell']} on {out['device']}: passes at the newest recorded commit "
                f"{_commit(out['commits'][-1]['commit'])}"]
    if out["last_good"] is None:
        return [f"{out['cell']} on {out['device']}: red since its first recorded commit {out['first_bad']}"]
    lines = [f"{out['cell']} on {out['device']}: first bad commit {out['first_bad']} (last good "
             f"{out['last_good']}; {len(out['between'])} unrecorded commit(s) between)"]
    if out["bisect"]:
        lines += ["bisect the commits between, replaying the stored reproducer:"]
        lines += [f"  {c}" for c in out["bisect"]["commands"]]
    else:
        lines.append("(no stored reproducer: this failure cannot be rebuilt from a spec)")
    return lines


def _slower_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no cell got slower"]
    return [f"{r['cell']} on {r['device']}: {r['what']} {r['now']:.3g} vs median {r['median']:.3g} over "
            f"{r['runs']} runs" + (f" (x{r['ratio']:.2f})" if r["ratio"] else "") for r in rows]


def history_command(args: argparse.Namespace) -> int:
    """Run ``triton-conformance history QUERY``; 4 on a usage error (a bad store, an unknown cell)."""
    value = args.history or os.environ.get("CONFORMANCE_HISTORY") or DEFAULT_PATH
    where = "--history" if args.history else "CONFORMANCE_HISTORY" if os.environ.get("CONFORMANCE_HISTORY") \
        else "the default history"
    try:
        from triton_conformance.history.location import history_url

        url = history_url(value, os.getcwd(), where)
        if url is None:
            raise HistoryError(f"{where}={value!r}: the history is off, nothing to query")
        if url.startswith("sqlite") and not os.path.exists(url.split(":///", 1)[-1]):
            raise HistoryError(f"{where}={value!r}: no history database there (a run records one)")
        from triton_conformance.history import queries
        from triton_conformance.history.bisect import first_bad
        from triton_conformance.history.flakes import flaky
        from triton_conformance.history.store import HistoryStore

        with HistoryStore(url) as store:
            verb = args.history_command
            if verb == "trend":
                out: Any = queries.trend(store, args.name, last=args.last, device=args.device)
                lines, code = _trend_lines(out), EXIT_OK
            elif verb == "new":
                out = queries.new_since_green(store, device=args.device)
                lines, code = _new_lines(out), EXIT_FAILED if out["new_failures"] else EXIT_OK
            elif verb == "flaky":
                out = flaky(store, device=args.device, include_stable=args.include_stable,
                            last=args.last or None, level=args.level)
                lines, code = _flaky_lines(out), EXIT_OK
            elif verb == "first-bad":
                out = first_bad(store, args.cell, os.getcwd(), device=args.device)
                lines, code = _first_bad_lines(out), EXIT_OK
            else:
                out = queries.slower(store, device=args.device, threshold=args.threshold, last=args.last,
                                     min_seconds=args.min_seconds)
                lines, code = _slower_lines(out), EXIT_FAILED if out else EXIT_OK
    except (HistoryError, ValueError) as exc:
        print(f"triton-conformance history: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(out, indent=1, default=str) if args.json else "\n".join(lines))
    return code
