"""Canary kernels: is this environment able to run Triton kernels at all, before any cell runs?

A broken environment fails every kernel, correct or not: triton 3.6's
interpreter with numpy >= 2.5 raises ``InterpreterError: TypeError('only
0-dimensional arrays can be converted to Python scalars')`` in every kernel
with a loop or a reduction, and a whole battery then ends as 153 ``crash``
cells that say nothing about the kernels.  So before the first cell a few
canaries run on the chosen back end, each a textbook kernel with a known
answer:

- ``loop``: a ``for`` loop over blocks, accumulating;
- ``reduction``: ``tl.sum`` and ``tl.max`` over a block;
- ``scalar``: a float and an int scalar argument;
- ``bf16``: a bf16 load, arithmetic in fp32, a bf16 store (its value is
  checked only where the back end can be trusted with bf16);
- ``autotune``: an ``@triton.autotune`` kernel with two configs (on CUDA, or
  on the interpreter with the compat layer's ``autotune`` shim).

:func:`environment_failure` returns the one line a failing canary gives: the
versions (torch, triton, numpy, python, device), the canary and its error, and
where the cause is known a hint (:data:`KNOWN_CAUSES`).  The plugin raises it
as a usage error (exit 4) before any cell, once per run on the controller.
On CUDA the canaries run in a child process (:class:`EnvironmentCheck`), so that
pytest's own process never initialises CUDA; the child also says whether torch
sees a GPU, and runs while pytest-xdist starts its workers.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Callable

from triton_conformance.model.config import on_cuda

__all__ = ["CANARIES", "KNOWN_CAUSES", "CanaryFailure", "run_canaries", "versions", "failure_line",
           "environment_failure", "EnvironmentCheck", "EnvironmentReport", "check_in_child", "cuda_probe",
           "child_main"]


@dataclass(frozen=True)
class CanaryFailure:
    """A canary that raised, or computed a wrong answer."""

    canary: str
    error: str


# (what the error says, a predicate on the versions, the hint): causes seen on real machines.
KNOWN_CAUSES: tuple[tuple[str, Callable[[dict[str, str]], bool], str], ...] = (
    ("only 0-dimensional arrays can be converted to Python scalars",
     lambda v: _release(v.get("numpy", "")) >= (2, 5),
     "triton's interpreter (seen with triton 3.6) fails with numpy >= 2.5: install a compatible numpy, "
     "pip install 'numpy<2.5'"),
    ("Cannot call @triton.jit'd outside of the scope of a kernel", lambda v: v.get("device") == "interpreter",
     "triton was imported before the interpreter was switched on (by a conftest.py or a plugin loaded before "
     "triton-conformance's): set TRITON_INTERPRET=1 in the environment"),
)


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# -- the canaries: textbook kernels, defined when they run, so that importing this module imports no triton
# (triton imported before the interpreter is switched on breaks its loops and reductions) -----------------

def _kernels() -> tuple:
    global triton, tl  # in the module's globals, where the interpreter looks for triton.language
    import triton
    import triton.language as tl

    @triton.jit
    def loop_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)

    @triton.jit
    def reduction_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr, tl.sum(x, axis=0))
        tl.store(out_ptr + 1, tl.max(tl.where(offs < n, x, -float("inf")), axis=0))

    @triton.jit
    def scalar_kernel(x_ptr, out_ptr, alpha, shift, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha + shift, mask=mask)

    @triton.jit
    def bf16_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        tl.store(out_ptr + offs, (x * 2.0 + 1.0).to(tl.bfloat16), mask=mask)

    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def autotuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    return loop_kernel, reduction_kernel, scalar_kernel, bf16_kernel, autotuned_kernel


def _canaries(backend: Any) -> list[tuple[str, Callable[[], str | None]]]:
    """(name, check) for each canary that applies on ``backend``; a check returns None or what was wrong."""
    import torch

    loop_kernel, reduction_kernel, scalar_kernel, bf16_kernel, autotuned_kernel = _kernels()
    device = backend.device
    x = torch.arange(37, dtype=torch.float32, device=device)  # small integers: every answer is exact

    def expect(got: Any, want: Any) -> str | None:
        if torch.equal(got.float().cpu(), want.float().cpu()):
            return None
        return f"computed {got.float().cpu().tolist()[:8]}, expected {want.float().cpu().tolist()[:8]}"

    def loop() -> str | None:
        out = torch.empty(16, dtype=torch.float32, device=device)
        loop_kernel[(1,)](x, out, x.numel(), BLOCK=16)
        backend.synchronize()
        padded = torch.cat([x, x.new_zeros(48 - x.numel())]).view(3, 16)
        return expect(out, padded.sum(0))

    def reduction() -> str | None:
        out = torch.empty(2, dtype=torch.float32, device=device)
        reduction_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        backend.synchronize()
        return expect(out, torch.stack([x.sum(), x.max()]))

    def scalar() -> str | None:
        out = torch.empty_like(x)
        scalar_kernel[(triton.cdiv(x.numel(), 16),)](x, out, 0.5, 3, x.numel(), BLOCK=16)
        backend.synchronize()
        return expect(out, x * 0.5 + 3)

    def bf16() -> str | None:
        xb = x.to(torch.bfloat16)
        out = torch.empty_like(xb)
        bf16_kernel[(1,)](xb, out, xb.numel(), BLOCK=64)
        backend.synchronize()
        if "bfloat16" in backend.untestable:  # runs, but its values cannot be trusted here
            return None
        return expect(out, (xb.float() * 2 + 1).to(torch.bfloat16))

    def autotune() -> str | None:
        out = torch.empty_like(x)
        autotuned_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        backend.synchronize()
        return expect(out, x + 1)

    checks = [("loop", loop), ("reduction", reduction), ("scalar", scalar), ("bf16", bf16)]
    import triton_conformance.compat as compat

    if backend.compiles or "autotune" in compat.installed():  # the bare interpreter has no driver to tune with
        checks.append(("autotune", autotune))
    return checks


CANARIES = ("loop", "reduction", "scalar", "bf16", "autotune")


def run_canaries(backend: Any) -> CanaryFailure | None:
    """Run the canaries on ``backend`` (a :class:`~.backend.Backend`); the first that fails, or None."""
    for name, check in _canaries(backend):
        try:
            wrong = check()
        except Exception as exc:  # noqa: BLE001 - whatever it is, the environment cannot run this kernel
            return CanaryFailure(name, f"{type(exc).__name__}: {exc}".splitlines()[0][:400])
        if wrong is not None:
            return CanaryFailure(name, wrong)
    return None


def versions(device: str) -> dict[str, str]:
    """torch, triton, numpy and python versions, and the device (the GPU's name on CUDA)."""
    import numpy
    import torch
    import triton

    name = device
    if on_cuda(device) and torch.cuda.is_available():
        name = f"cuda ({torch.cuda.get_device_name()})"
    return {"torch": torch.__version__, "triton": triton.__version__, "numpy": numpy.__version__,
            "python": platform.python_version(), "device": name}


def failure_line(failure: CanaryFailure, found: dict[str, str]) -> str:
    """The one line a failing canary gives: what failed, the versions, and a hint where the cause is known."""
    seen = ", ".join(f"{k} {v}" for k, v in found.items())
    hints = [hint for needle, applies, hint in KNOWN_CAUSES if needle in failure.error and applies(found)]
    hint = f"; hint: {hints[0]}" if hints else ""
    return (f"this environment cannot run Triton kernels: the {failure.canary!r} canary failed before any cell "
            f"ran ({failure.error}) with {seen}{hint}; no cell was judged (--conformance-canary=off runs them "
            "anyway)")


def environment_failure(device: str) -> str | None:
    """Run the canaries here on ``device`` ('interpreter' or 'cuda', after select_device and the compat
    layer); the one line of the first failure, or None."""
    from triton_conformance.conformance.backend import current_backend

    failure = run_canaries(current_backend(device))
    return None if failure is None else failure_line(failure, versions(device))


# The child of EnvironmentCheck: the back end is chosen before this module (and its kernels) is imported.
_CHILD = ("import sys; from triton_conformance.conformance.backend import select_device; "
          "device = select_device(sys.argv[1]); from triton_conformance.conformance.canary import child_main; "
          "sys.exit(child_main(device, sys.argv[2], sys.argv[3]))")


@dataclass(frozen=True)
class EnvironmentReport:
    """What the child found: ``probe`` (on CUDA: torch's version, its CUDA build, the GPUs it sees; else None),
    ``failure`` (the one line of a failing canary, or of a child that could not run; else None) and
    ``torch_missing`` (on CUDA the child died before its probe: ``failure`` is then its last line)."""

    probe: dict[str, Any] | None = None
    failure: str | None = None
    torch_missing: bool = False


class EnvironmentCheck:
    """The CUDA probe and the canaries in a fresh Python, started now and read later (:meth:`report`), so
    that they run beside whatever the caller does meanwhile (pytest-xdist starting its workers) and this
    process initialises no CUDA context.  ``canaries=False`` runs the probe alone."""

    def __init__(self, device: str, compat: tuple[str, ...] | None = None, *, canaries: bool = True,
                 timeout: float = 300.0):
        self.timeout = timeout
        self._device_is_cuda = on_cuda(device)
        argv = [sys.executable, "-c", _CHILD, device, json.dumps(None if compat is None else list(compat)),
                "on" if canaries else "off"]
        self._start_error: OSError | None = None
        try:
            self._child: subprocess.Popen | None = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                                                     stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            self._child = None
            self._start_error = exc
        self._report: EnvironmentReport | None = None

    def report(self) -> EnvironmentReport:
        """Wait for the child (once) and say what it found."""
        if self._report is None:
            self._report = self._wait()
        return self._report

    def _wait(self) -> EnvironmentReport:
        if self._child is None:
            return EnvironmentReport(failure="this environment cannot run Triton kernels: the canaries could "
                                             f"not be started ({self._start_error})")
        try:
            out, err = self._child.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.communicate()
            return EnvironmentReport(failure="this environment cannot run Triton kernels: the canaries did not "
                                             f"finish in {self.timeout:g} s before any cell ran")
        found: dict[str, Any] = {}
        for line in out.splitlines():  # the child's JSON lines: its probe first, then the canaries' line
            if line.startswith("{"):
                found.update(json.loads(line))
        if self._child.returncode == 0 and "failure" in found:
            return EnvironmentReport(probe=found.get("probe"), failure=found["failure"])
        last = (err.strip().splitlines() or ["no output"])[-1][:400]
        if "probe" not in found and self._device_is_cuda:  # it died importing torch
            return EnvironmentReport(failure=last, torch_missing=True)
        return EnvironmentReport(probe=found.get("probe"),
                                 failure=f"this environment cannot run Triton kernels: the canaries' process "
                                         f"exited with status {self._child.returncode} ({last}) before any cell "
                                         "ran")


def check_in_child(device: str, compat: tuple[str, ...] | None = None, timeout: float = 300.0) -> str | None:
    """:func:`environment_failure` in a fresh Python (so that this process initialises no CUDA context)."""
    return EnvironmentCheck(device, compat, timeout=timeout).report().failure


def cuda_probe() -> dict[str, Any]:
    """torch's version, the CUDA it was built with, and the GPUs it can use here (0 without CUDA)."""
    import torch

    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "devices": devices}


def child_main(device: str, compat: str, canaries: str = "on") -> int:
    """The child's work: on CUDA the probe (no canary runs without a GPU), the compat layer as the run has it
    (``compat``: JSON), the canaries; one line of JSON with what it found."""
    probe = cuda_probe() if on_cuda(device) else None
    print(json.dumps({"probe": probe}), flush=True)
    if not on_cuda(device):
        from triton_conformance.conformance.interpreter_layer import install_compat

        install_compat(json.loads(compat))
    usable = probe is None or probe["devices"] > 0
    failure = environment_failure(device) if usable and canaries == "on" else None
    print(json.dumps({"failure": failure}))
    return 0
