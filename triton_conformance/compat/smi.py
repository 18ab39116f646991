"""``nvidia_smi``: the vendor's device query tool, answering for the declared target device.

Some libraries find their GPU vendor by running its tool at import (FlagGems
runs ``nvidia-smi``, ``rocm-smi``, ``cnmon``... and keeps the first that exits
0; none does on a CPU machine, so it raises "No device were detected").  Where
no ``nvidia-smi`` is on ``PATH`` this shim puts one first on it (in a
temporary folder, for this process and the processes it starts) that
describes the :class:`TargetDevice` as the real tool would:

- no arguments: the summary table, one GPU;
- ``-L``: ``GPU 0: <name> (UUID: ...)``;
- ``--query-gpu=name,memory.total,compute_cap,... --format=csv[,noheader][,nounits]``:
  the fields it knows, ``[N/A]`` for the rest (as the tool prints a field the
  device does not support).

A machine with a real ``nvidia-smi`` keeps it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import stat
import sys
import tempfile

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["apply", "TOOL"]

TOOL = "nvidia-smi"

_SCRIPT = '''#!{python}
# nvidia-smi for the compat layer of triton-conformance: the declared target device, not a real GPU.
import sys

DEVICE = {device}
args = sys.argv[1:]
fields = {{
    "name": DEVICE["name"], "index": "0", "count": "1", "uuid": DEVICE["uuid"],
    "memory.total": "%d MiB" % DEVICE["memory_mib"], "memory.used": "0 MiB",
    "memory.free": "%d MiB" % DEVICE["memory_mib"], "compute_cap": DEVICE["compute_cap"],
    "pci.bus_id": "00000000:00:00.0", "driver_version": "[N/A]",
}}
if "-L" in args or "--list-gpus" in args:
    print("GPU 0: %s (UUID: %s)" % (DEVICE["name"], DEVICE["uuid"]))
    sys.exit(0)
query = [a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")]
if query:
    form = [a.split("=", 1)[1] for a in args if a.startswith("--format=")]
    form = form[0].split(",") if form else ["csv"]
    names = [n.strip() for n in query[0].split(",") if n.strip()]
    values = [fields.get(n, "[N/A]") for n in names]
    if "nounits" in form:
        values = [v.split(" ")[0] if v.endswith(" MiB") else v for v in values]
    if "noheader" not in form:
        print(", ".join(n + (" [MiB]" if n.startswith("memory.") and "nounits" in form else "") for n in names))
    print(", ".join(values))
    sys.exit(0)
print("+-----------------------------------------------------------------------------+")
print("| NVIDIA-SMI (triton-conformance compat: declared target, not a real GPU)     |")
print("|   0  %-40s  %10s MiB                 |" % (DEVICE["name"][:40], DEVICE["memory_mib"]))
print("+-----------------------------------------------------------------------------+")
'''


def script(target: TargetDevice) -> str:
    """The text of the ``nvidia-smi`` stand-in for ``target``."""
    device = {"name": target.name, "uuid": "GPU-00000000-0000-0000-0000-000000000000",
              "memory_mib": target.total_memory >> 20, "compute_cap": "%d.%d" % target.capability}
    return _SCRIPT.format(python=sys.executable, device=json.dumps(device))


def apply(patch: Patch, target: TargetDevice) -> None:
    if shutil.which(TOOL) is not None:
        return
    folder = tempfile.mkdtemp(prefix="triton-conformance-smi-")
    path = os.path.join(folder, TOOL)
    with open(path, "w") as f:
        f.write(script(target))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    entries = os.environ.get("PATH", "")
    os.environ["PATH"] = folder + (os.pathsep + entries if entries else "")

    def cleanup() -> None:
        os.environ["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != folder)
        shutil.rmtree(folder, ignore_errors=True)

    atexit.register(shutil.rmtree, folder, True)
    patch.on_restore(cleanup)
