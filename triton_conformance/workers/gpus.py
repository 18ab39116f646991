"""pytest-xdist workers over the GPUs: which GPUs there are, which one a worker takes, and whose turn it is.

A worker must choose its GPU before CUDA initialises in it, and its cells'
worker processes must see the same one; setting ``CUDA_VISIBLE_DEVICES`` in
the xdist worker early does both (subprocesses inherit it).

Numbering workers does not work: xdist replaces a crashed worker under a new
id (gw2 dies, gw4 starts), so ``gw index % n_gpus`` can put two workers on
one GPU and leave another idle.  Instead each worker *claims* a GPU: it takes
an exclusive ``flock`` on a lock file per GPU slot, in a directory keyed by
the run, and holds it for its lifetime.  The kernel drops the lock when the
process dies, however it dies, so a replacement worker finds the slot free.
A GPU has ``ceil(workers / n_gpus)`` slots (:func:`workers_per_gpu` picks the
nightly's count: its cost is mostly Python and compiles on the CPU).

Workers sharing a GPU take turns (:class:`~triton_conformance.conformance.gpu_turns.GpuTurns`,
example by example in the processes that run cells): what times the GPU must
have it alone, or another worker's kernels distort its figures.

Standard library only: the plugin imports this before torch.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile

from triton_conformance.conformance.gpu_turns import GpuTurns
from triton_conformance.errors import ConformanceUsageError

__all__ = ["visible_gpus", "parse_gpus", "claim_gpu", "lock_dir", "Claim", "GpuTurns", "slots_per_gpu", "workers_per_gpu"]

_held: list["Claim"] = []  # claims live as long as the process


class Claim:
    """A GPU slot held by this process: ``gpu`` is the CUDA_VISIBLE_DEVICES entry, ``slot`` its lock index,
    ``slots`` how many slots each GPU of the run has (the most workers that share one)."""

    def __init__(self, gpu: str, slot: int, fd: int, path: str, slots: int = 1):
        self.gpu, self.slot, self.fd, self.path, self.slots = gpu, slot, fd, path, slots

    def turns(self) -> "GpuTurns | None":
        """The turns on this GPU among the workers sharing it; None when it has one slot (nothing to share)."""
        return GpuTurns(os.path.dirname(self.path), self.gpu) if self.slots > 1 else None

    def release(self) -> None:
        os.close(self.fd)  # closing the only descriptor drops the flock

    def __repr__(self) -> str:
        return f"Claim(gpu={self.gpu!r}, slot={self.slot}, path={self.path!r})"


def parse_gpus(text: str, *, where: str = "--conformance-gpus") -> list[str]:
    """A comma-separated list of device ids or UUIDs (``0,1`` / ``GPU-...``), or a count (``4`` means 0..3;
    ``0`` means GPU 0)."""
    text = (text or "").strip()
    if not text:
        raise ConformanceUsageError(f"{where}={text!r}, expected a count or a comma-separated list of GPU ids")
    if "," not in text and text.isdigit():
        # A count; "0" cannot be one, so it names GPU 0 (the CLI hands single ids on this way).
        return [str(i) for i in range(int(text))] if int(text) else ["0"]
    gpus = [g.strip() for g in text.split(",")]
    if any(not g or not re.fullmatch(r"[\w.:-]+", g) for g in gpus) or len(set(gpus)) != len(gpus):
        _bad(where, text)
    return gpus


def _bad(where: str, text: str) -> list[str]:
    raise ConformanceUsageError(
        f"{where}={text!r}, expected a positive count or a comma-separated list of distinct GPU ids (0,1 or GPU-uuid)")


def visible_gpus(requested: str | None = None, *, where: str = "--conformance-gpus") -> list[str]:
    """The GPUs to spread workers over, as ``CUDA_VISIBLE_DEVICES`` entries, without initialising CUDA.

    From ``requested`` if given; else ``CUDA_VISIBLE_DEVICES`` if set; else
    ``nvidia-smi``'s UUIDs (immune to CUDA's device ordering); else a count
    from torch in a subprocess.  An empty list means no GPU.
    """
    if requested:
        return parse_gpus(requested, where=where)
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=60)
            uuids = [line.strip() for line in out.stdout.splitlines() if line.strip().startswith("GPU-")]
            if out.returncode == 0 and uuids:
                return uuids
        except (OSError, subprocess.SubprocessError):
            pass
    return _torch_count()


def _torch_count() -> list[str]:
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        return [str(i) for i in range(int(out.stdout.strip().splitlines()[-1]))]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return []


def slots_per_gpu(workers: int | None, gpus: int) -> int:
    """The slots each of ``gpus`` GPUs has for ``workers`` workers (default one each): the most that share one."""
    return max(1, -(-(workers or gpus) // max(1, gpus)))


def workers_per_gpu(cpus: int | None, gpus: int) -> int:
    """How many xdist workers the nightly starts on each GPU by default: three quarters of the cores per GPU,
    1 to 12.

    A nightly worker's cost is mostly on the CPU (Python, Hypothesis, compiles)
    while its GPU idles: on an H200 with 16 cores, the nightly's pytest time was
    141.7 s with one worker, 69.5-77.5 s with four and 51.3 s with twelve
    (seed 23, cold caches).  A quarter of the cores stays free for the
    controller, the compiler's subprocesses and the canaries.  So 16 cores and
    one GPU give 12, 8 cores 6, 2 cores 1; at most 12 (more were not measured).
    ``gpus`` is their number.
    """
    return max(1, min(12, (cpus or 1) * 3 // (4 * max(1, gpus))))


def lock_dir(run_key: str) -> str:
    """The directory of a run's GPU lock files (shared by every worker of the run, and only by them)."""
    safe = re.sub(r"[^\w.-]", "_", run_key)
    return os.path.join(tempfile.gettempdir(), f"triton-conformance-gpus-{os.getuid()}", safe)


def claim_gpu(gpus: list[str], run_key: str, *, workers: int | None = None) -> Claim:
    """Take a free GPU slot for this process and return it (held until the process exits).

    With more workers than GPUs each GPU gets ``ceil(workers / len(gpus))``
    slots; slots are tried GPU-first, so the load spreads evenly.  Raises
    ConformanceUsageError if every slot is taken.
    """
    if not gpus:
        raise ConformanceUsageError("no GPU to pin the worker to: none visible (CUDA_VISIBLE_DEVICES, nvidia-smi)")
    per_gpu = slots_per_gpu(workers, len(gpus))
    directory = lock_dir(run_key)
    os.makedirs(directory, exist_ok=True)
    for rank in range(per_gpu):
        for index, gpu in enumerate(gpus):
            slot = rank * len(gpus) + index
            path = os.path.join(directory, f"slot{slot}.lock")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {gpu}\n".encode())
            claim = Claim(gpu, slot, fd, path, slots=per_gpu)
            _held.append(claim)
            return claim
    raise ConformanceUsageError(
        f"every GPU slot of this run is taken ({len(gpus)} GPUs x {per_gpu} in {directory}): more workers "
        "than slots; give -n at most the number of GPUs")
