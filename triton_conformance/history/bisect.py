"""The first bad commit of a cell: its recorded runs put in git order, and a ``git bisect run`` line that
replays the cell's stored reproducer at each commit between the last good one and the first bad one."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from typing import Any

import sqlalchemy as sa

from triton_conformance.history.schema import cells, reproducers, runs
from triton_conformance.history.store import HistoryStore, is_failing
from triton_conformance.model.cells import split_cell_id

__all__ = ["first_bad", "git_order"]

# `git bisect run` reads 125 as "cannot test this commit": what replay's 7 (could not run) and 4 (a canary
# failed: the environment) mean there.  0 good, 1 bad, as replay exits.
_BISECT_WRAP = 'triton-conformance replay {file} {cell}; s=$?; [ "$s" -le 1 ] && exit "$s"; exit 125'


def git_order(commits: list[str], root: str) -> list[str]:
    """``commits`` in git order, oldest first: those that are ancestors of HEAD, by ``git rev-list``
    (topological); a commit that git does not know or that HEAD does not contain is left out.

    Two git processes whatever the count: a year of nightly runs records thousands of commits."""
    wanted = list(dict.fromkeys(c for c in commits if c))
    if not wanted:
        return []
    # every name to its full hash at once (a recorded commit is full, but an older store may hold short ones)
    resolved = subprocess.run(["git", "cat-file", "--batch-check=%(objectname) %(objecttype)"], cwd=root,
                              input="".join(f"{c}^{{commit}}\n" for c in wanted), capture_output=True, text=True,
                              check=False).stdout.splitlines()
    known = {}
    for commit, line in zip(wanted, resolved):
        full, _, kind = line.partition(" ")
        if kind == "commit":
            known.setdefault(full, commit)
    if not known:
        return []
    listed = subprocess.run(["git", "rev-list", "--topo-order", "--reverse", "HEAD"], cwd=root,
                            capture_output=True, text=True, check=False).stdout.split()
    return [known[c] for c in listed if c in known]


def first_bad(store: HistoryStore, name: str, root: str, *, device: str | None = None,
              workdir: str | None = None) -> dict[str, Any]:
    """Where cell ``name`` (``subject[cell]``) turned red on ``device`` (default: the device of its newest run):
    ``last_good`` and ``first_bad`` commits (git order), ``between`` (commits between them, unrecorded),
    the runs per commit, and ``bisect``: the commands that replay the stored reproducer over them, with the
    reproducer written to ``workdir`` (a results JSON of that one cell; default ``.conformance`` in ``root``).
    ``first_bad`` is None when the cell's newest recorded commit passes."""
    named = split_cell_id(name)
    if named is None:
        raise ValueError(f"cell={name!r}, expected subject[cell], as the matrix names it")
    subject, cell = named
    with store.engine.connect() as conn:
        query = (sa.select(runs.c.id, runs.c.commit, runs.c.device, runs.c.backend, runs.c.compat, runs.c.started,
                           cells.c.outcome, cells.c.finding, cells.c.expected_failure)
                 .select_from(cells.join(runs, cells.c.run_id == runs.c.id))
                 .where(runs.c.complete.is_(True), cells.c.subject == subject, cells.c.cell == cell)
                 .order_by(runs.c.started))
        rows = [dict(r._mapping) for r in conn.execute(query)]
        if device is None and rows:
            device = rows[-1]["device"]
        rows = [r for r in rows if r["device"] == device]
        order = git_order([r["commit"] for r in rows], root)
        # A commit is bad if any run of it failed there (a flaky pass does not make it good).
        bad = {c: any(is_failing(r) for r in rows if r["commit"] == c) for c in order}
        out: dict[str, Any] = {"cell": name, "device": device, "commits": [
            {"commit": c, "bad": bad[c], "runs": sum(1 for r in rows if r["commit"] == c)} for c in order],
            "last_good": None, "first_bad": None, "between": [], "bisect": None,
            "unordered": sorted({r["commit"] or "(none)" for r in rows} - set(order))}
        if not order or not bad[order[-1]]:
            return out
        i = len(order) - 1
        while i > 0 and bad[order[i - 1]]:
            i -= 1
        out["first_bad"] = order[i]
        out["last_good"] = order[i - 1] if i > 0 else None
        if out["last_good"] is None:
            return out  # red since its first recorded run: no good commit to bisect from
        between = subprocess.run(["git", "rev-list", "--ancestry-path", f"{out['last_good']}..{out['first_bad']}"],
                                 cwd=root, capture_output=True, text=True, check=False).stdout.split()
        out["between"] = between[1:]  # rev-list lists first_bad itself first
        failing = [r for r in rows if r["commit"] == out["first_bad"] and is_failing(r)]
        script = conn.execute(sa.select(reproducers.c.script).where(
            reproducers.c.run_id == failing[-1]["id"], reproducers.c.subject == subject,
            reproducers.c.cell == cell)).scalar()
    if script is None:
        return out  # this failure cannot be rebuilt from a spec: nothing to replay
    last = failing[-1]
    folder = workdir or os.path.join(root, ".conformance")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "bisect-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") + ".json")
    document = {"schema": "triton-conformance/results", "version": 1,
                "environment": {"device": last["backend"] or "interpreter", "device_label": device,
                                "compat": json.loads(last["compat"]) if last["compat"] else None},
                "results": [{"subject": subject, "family": subject, "cell": cell, "outcome": last["outcome"],
                             "finding": last["finding"], "reproducer": script}]}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=1)
    shown = os.path.relpath(path, root) if path.startswith(os.path.abspath(root)) else path
    replay = _BISECT_WRAP.format(file=shlex.quote(shown), cell=shlex.quote(name))
    out["bisect"] = {"reproducer": path, "commands": [
        f"git bisect start {out['first_bad']} {out['last_good']}",
        f"git bisect run sh -c {shlex.quote(replay)}", "git bisect reset"]}
    return out
