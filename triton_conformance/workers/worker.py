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
"""

from __future__ import annotations

import os
import sys
import traceback

# Exit status of a worker that lost its CUDA context (it has told the pool why).
EXIT_POISONED = 3


def context_lost(backend_name: str) -> str | None:
    """The error text if this process's CUDA context is unusable, else None (always None off CUDA)."""
    if backend_name != "cuda":
        return None
    import torch

    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - torch.AcceleratorError, RuntimeError: any failure here is fatal
        return f"{type(exc).__name__}: {exc}"
    return None


def _exit_poisoned(outbox: int, error: str, spec: dict | None) -> None:
    from triton_conformance.workers.isolation import send

    send(outbox, {"type": "poisoned", "error": error, "spec": spec})
    os._exit(EXIT_POISONED)  # no cleanup: it would touch the dead context


def open_channels(argv: list[str]) -> tuple[int, int]:
    """The request and reply fds: inherited ones (``IN OUT`` as numbers), or named pipes (paths)."""
    if argv[0].isdigit() and argv[1].isdigit():
        return int(argv[0]), int(argv[1])
    outbox = os.open(argv[1], os.O_WRONLY)  # the pool's read end is open already
    inbox = os.open(argv[0], os.O_RDONLY)  # waits for the pool's write end
    return inbox, outbox


class _FlightRecorder:
    """``on_example`` for a cell: reports each example before it runs, and exits once the context is lost."""

    def __init__(self, outbox: int, backend_name: str):
        self.outbox, self.backend_name = outbox, backend_name
        self.spec: dict | None = None

    def __call__(self, spec) -> None:  # noqa: ANN001 - a strategies Spec
        from triton_conformance.workers.isolation import send

        # The previous example ran to completion: if the context is gone now, that example did it.
        lost = context_lost(self.backend_name)
        if lost is not None:
            _exit_poisoned(self.outbox, lost, self.spec)
        self.spec = spec.to_dict()
        send(self.outbox, {"type": "example", "spec": self.spec})


def main(argv: list[str]) -> int:
    from triton_conformance.workers.isolation import receive, send

    inbox, outbox = open_channels(argv)
    init = receive(inbox)
    if init is None:
        return 0
    sys.path[:] = init["sys_path"]
    from triton_conformance.conformance.backend import current_backend, select_device

    device = select_device(init["device"])  # before any kernel module is imported
    import importlib

    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.subject import get_subject

    for module in init["modules"]:
        importlib.import_module(module)
    backend = current_backend(device)
    send(outbox, {"type": "ready"})  # start-up (torch, triton, probes) is not charged to a cell
    while True:
        request = receive(inbox)
        if request is None:
            return 0
        try:
            if request["op"] == "run_cell":
                for module in request.get("modules", ()):
                    importlib.import_module(module)
                subject = get_subject(request["subject"])
                recorder = _FlightRecorder(outbox, backend.name)
                try:
                    result = run_cell(
                        subject, request["cell"], backend=backend, profile=request["profile"],
                        seed=request.get("seed"), max_examples=request.get("max_examples"),
                        on_example=recorder,
                    )
                except Exception:
                    lost = context_lost(backend.name)
                    if lost is not None:
                        _exit_poisoned(outbox, lost + "\n" + traceback.format_exc()[-2000:], recorder.spec)
                    raise
                lost = context_lost(backend.name)
                if lost is not None:  # the cell's last example (or its shrinking) lost the context
                    result.details["context_lost"] = lost
                send(outbox, {"type": "result", "value": result.to_dict()})
                if lost is not None:
                    os._exit(EXIT_POISONED)
            elif request["op"] == "backend":
                send(outbox, {"type": "result", "value": {"name": backend.name,
                                                          "untestable": backend.untestable}})
            else:
                send(outbox, {"type": "error", "error": f"unknown op {request['op']!r}"})
        except Exception:  # noqa: BLE001 - report, keep serving
            send(outbox, {"type": "error", "error": traceback.format_exc()})


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
