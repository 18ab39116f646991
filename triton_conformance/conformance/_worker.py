"""Entry point of a worker process: ``python -m triton_conformance.conformance._worker IN OUT``.

Reads requests from fd IN and answers on fd OUT (see :mod:`.isolation`).
"""

from __future__ import annotations

import os
import sys
import traceback


def main(argv: list[str]) -> int:
    from triton_conformance.conformance.isolation import receive, send

    inbox, outbox = int(argv[0]), int(argv[1])
    init = receive(inbox)
    if init is None:
        return 0
    sys.path[:] = init["sys_path"]
    from triton_conformance.conformance.backend import current_backend, select_device

    device = select_device(init["device"])  # before any kernel module is imported
    import importlib

    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.conformance.subject import get_subject

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
                result = run_cell(
                    subject, request["cell"], backend=backend, profile=request["profile"],
                    seed=request.get("seed"), max_examples=request.get("max_examples"),
                    on_example=lambda spec: send(outbox, {"type": "example", "spec": spec.to_dict()}),
                )
                send(outbox, {"type": "result", "value": result.to_dict()})
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
