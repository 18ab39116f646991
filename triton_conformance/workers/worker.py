"""Entry point of a worker process: ``python -m triton_conformance.workers.worker IN OUT``.

Reads requests from fd IN and answers on fd OUT (see :mod:`.isolation`); IN
and OUT may also be the paths of named pipes, for a worker started through a
wrapper such as compute-sanitizer.

On CUDA an illegal address or a device-side assert leaves the context
unusable: every later CUDA call fails with the same error.  So before each
example and after each cell the worker checks its context; once it is lost
the worker reports the example that lost it ("poisoned") and exits, and the
pool starts a fresh one, instead of shrinking or running other cells on a
dead context.

An exception that escapes the runner is judged by
:mod:`triton_conformance.conformance.harness` (the kernel's crash if it left
the launcher call, else a ``harness-error``); one raised by the worker's own
code around a cell is sent as an error, which the executor records as the
cell's ``harness-error``.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from dataclasses import replace

from triton_conformance.model.config import on_cuda
from triton_conformance.model.subject import get_subject
from triton_conformance.workers.isolation import receive, send

# The engine and the compat layer are imported inside main(), in order: select_device sets
# TRITON_INTERPRET and compat.install patches triton before anything imports a kernel.

# Exit status of a worker that lost its CUDA context (it has told the pool why).
EXIT_POISONED = 3


def _exit_poisoned(outbox: int, error: str, spec: dict | None) -> None:
    send(outbox, {"type": "poisoned", "error": error, "spec": spec})
    os._exit(EXIT_POISONED)  # no cleanup: it would touch the dead context


def open_channels(argv: list[str]) -> tuple[int, int]:
    """The request and reply fds: inherited ones (``IN OUT`` as numbers), or named pipes (paths)."""
    if argv[0].isdigit() and argv[1].isdigit():
        return int(argv[0]), int(argv[1])
    outbox = os.open(argv[1], os.O_WRONLY)  # the pool's read end is open already
    inbox = os.open(argv[0], os.O_RDONLY)  # waits for the pool's write end
    return inbox, outbox


def _flight_recorder(outbox: int, backend):  # noqa: ANN001, ANN202
    """An observer that reports each example before it runs, and exits once the context is lost."""
    from triton_conformance.conformance.observe import Observer

    class FlightRecorder(Observer):
        spec: dict | None = None

        def example_started(self, subject, cell, spec) -> None:  # noqa: ANN001
            # The previous example ran to completion: if the context is gone now, that example did it.
            lost = backend.context_lost()
            if lost is not None:
                _exit_poisoned(outbox, lost, self.spec)
            self.spec = spec.to_dict()
            send(outbox, {"type": "example", "spec": self.spec})

    return FlightRecorder()


def _bound_memory(setting, device: str):  # noqa: ANN001, ANN202
    """Bound what this worker may allocate from now on (see :mod:`~.conformance.memory_bound`): start-up
    (torch, triton, probes) is neither charged to a cell nor counted in the bound."""
    from triton_conformance.conformance import memory_bound, memory_cgroup

    # The workers of one run share the host: xdist tells each how many there are.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    cgroup = memory_cgroup.probe()
    return memory_bound.apply(memory_bound.bound_for(setting, device, workers=workers, cgroup=cgroup),
                              cgroup=cgroup)


def main(argv: list[str]) -> int:
    inbox, outbox = open_channels(argv)
    init = receive(inbox)
    if init is None:
        return 0
    sys.path[:] = init["sys_path"]
    from triton_conformance.conformance.backend import current_backend, select_device

    device = select_device(init["device"])  # before any kernel module is imported
    if not on_cuda(device):  # the compat layer, also before kernel modules (None: every shim)
        from triton_conformance.conformance.interpreter_layer import install_compat

        install_compat(init.get("compat_shims"))

    from triton_conformance.conformance.harness import escaped_cell
    from triton_conformance.conformance.runner import run_cell

    from triton_conformance.conformance import gpu_turns

    gpu_turns.share(init.get("gpu_turns"))  # the GPU's turns, example by example, when workers share it
    for module in init["modules"]:
        importlib.import_module(module)
    backend = current_backend(device)
    bound = _bound_memory(init.get("memory"), device)
    send(outbox, {"type": "ready", "memory_bound": None if bound is None else bound.to_dict()})
    while True:
        request = receive(inbox)
        if request is None:
            return 0
        try:
            if request["op"] == "run_cell":
                if "sys_path" in request:  # the pool's, now: it may have grown since this worker started
                    sys.path[:] = request["sys_path"]
                for module in request.get("modules", ()):
                    importlib.import_module(module)
                subject = get_subject(request["subject"])
                recorder = _flight_recorder(outbox, backend)
                try:
                    result = run_cell(subject, request["cell"], backend=backend, config=request["config"],
                                      observer=recorder)
                except Exception as exc:  # noqa: BLE001 - it escaped the runner: judged by where it came from
                    lost = backend.context_lost()
                    if lost is not None:
                        _exit_poisoned(outbox, lost + "\n" + traceback.format_exc()[-2000:], recorder.spec)
                    result = escaped_cell(subject, request["cell"], exc)
                lost = backend.context_lost()
                if lost is not None:  # the cell's last example (or its shrinking) lost the context
                    result = replace(result, details=dict(result.details, context_lost=lost))
                send(outbox, {"type": "result", "value": result.to_dict()})
                if lost is not None:
                    os._exit(EXIT_POISONED)
            elif request["op"] == "backend":
                send(outbox, {"type": "result", "value": {"name": backend.name,
                                                          "untestable": backend.untestable}})
            else:
                send(outbox, {"type": "error", "error": f"unknown op {request['op']!r}"})
        except Exception:  # noqa: BLE001 - our own code around a cell: the executor makes it a harness-error
            send(outbox, {"type": "error", "error": traceback.format_exc()})


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
