"""What runs on the cluster: one shard of the battery in a subprocess, and the ledger of attempts.

:func:`run_shard` is a plain function; the driver wraps it with ``ray.remote``
(with ``max_retries`` and ``retry_exceptions``), so that importing this module
needs no Ray.  A subprocess that writes no results file raises
:class:`ShardFailed`, which Ray retries like a dead worker or a lost node.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

__all__ = ["ShardFailed", "run_shard", "Ledger", "TAIL"]

TAIL = 4000  # characters of the subprocess's output sent back


class ShardFailed(RuntimeError):
    """The shard's subprocess wrote no results (it was killed, or the battery could not start)."""


def _node() -> dict[str, str]:
    try:
        import ray  # an optional dependency (the fleet extra), present wherever a shard runs as a Ray task

        node_id = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (a unit test): no node id
        node_id = None
    return {"node_id": node_id or "", "host": socket.gethostname(), "pid": str(os.getpid())}


def _fault(faults: str | None, key: str) -> bool:
    """Test hook: whether this attempt must die (a count in ``faults/<key>``, decremented per attempt)."""
    if not faults:
        return False
    path = os.path.join(faults, key.replace("/", "of"))
    try:
        left = int(open(path).read().strip() or 0)
    except (OSError, ValueError):
        return False
    if left <= 0:
        return False
    with open(path, "w") as fh:
        fh.write(str(left - 1))
    return True


def with_options(argv: list[str], *options: str) -> list[str]:
    """``argv`` with ``options`` added to the command's own, before any ``--`` and the pytest arguments after it."""
    if "--" not in argv:
        return [*argv, *options]
    i = argv.index("--")
    return [*argv[:i], *options, *argv[i:]]


def run_shard(argv: list[str], *, label: str, shard: str, cwd: str | None, ledger: Any = None,
              faults: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``triton-conformance run <argv> --shard <shard> --results <tmp>``; return its document and where it ran.

    ``ledger``: the :class:`Ledger` actor, told first where this attempt runs.
    ``faults``: a directory of test faults (see :func:`_fault`): the attempt
    kills its own worker process mid-run, as a lost worker would die.
    """
    node = _node()
    key = f"{label} {shard}"
    if ledger is not None:
        import ray

        ray.get(ledger.started.remote(key, node))
    workdir = tempfile.mkdtemp(prefix="conformance-shard-")
    results = os.path.join(workdir, "results.json")
    command = [sys.executable, "-m", "triton_conformance.cli", "run",
               *with_options(argv, "--shard", shard, "--results", results, "--fresh")]
    started = time.time()
    proc = subprocess.Popen(command, cwd=cwd or os.getcwd(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, **(env or {})})
    if _fault(faults, key):
        time.sleep(1.0)  # mid-run
        proc.kill()
        os._exit(1)  # the Ray worker dies: Ray sees a crashed worker and retries the task
    output, _ = proc.communicate()
    if not os.path.exists(results):
        raise ShardFailed(f"shard {shard} on {label} ({node['host']}): the run exited {proc.returncode} and "
                          f"wrote no results: {output[-TAIL:]}")
    with open(results, encoding="utf-8") as fh:
        doc = json.load(fh)
    return {"label": label, "shard": shard, "node": node, "returncode": proc.returncode,
            "seconds": round(time.time() - started, 3), "output": output[-TAIL:], "document": doc}


class Ledger:
    """A Ray actor (the driver makes it one): where each attempt of each shard started."""

    def __init__(self) -> None:
        self.attempts: dict[str, list[dict[str, str]]] = {}

    def started(self, key: str, node: dict[str, str]) -> int:
        self.attempts.setdefault(key, []).append(node)
        return len(self.attempts[key])

    def get(self) -> dict[str, list[dict[str, str]]]:
        return self.attempts
