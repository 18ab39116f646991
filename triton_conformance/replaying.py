"""The child process of ``triton-conformance replay``: the run's back end, its compat shims, the canaries,
then the stored reproducer, and an exit status that says which of these happened.

- 0: the reproducer ran and its example passed (the failure is gone);
- 1: it still fails (:class:`~triton_conformance.errors.StillFails`, raised by the replay functions);
- 4: a canary kernel failed: this environment cannot run kernels (said in one line);
- 7: the reproducer could not run: it raised something else before reaching a verdict (an import, a
  missing module), which says nothing about the kernel.

It imports nothing of torch or triton before the back end is chosen.
"""

from __future__ import annotations

import json
import sys

from triton_conformance.options import EXIT_COULD_NOT_RUN, EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["REPLAY_CHILD", "environment_of", "replay_child"]


def environment_of(doc: dict, result: dict) -> dict:
    """The environment ``result`` ran in: its device's, in a cross-device document."""
    for device in doc.get("devices") or ():
        if isinstance(device, dict) and device.get("device") == result.get("device"):
            return device.get("environment") or {}
    return doc.get("environment") or {}


# What `replay` runs in a fresh Python: replay_child(device, shims, script); nothing imported before it.
REPLAY_CHILD = ("import sys; from triton_conformance.replaying import replay_child; "
                "sys.exit(replay_child(sys.argv[1:]))")


def replay_child(argv: list[str]) -> int:
    """The child process of ``replay``: ``argv`` is the run's device, its compat shims (JSON: a list, or null
    where the results do not say), the reproducer and, for ``--dump``, the file to save the example's tensors
    in (:func:`~.conformance.replay.dumping_to`).  Sets up the back end as the run had it, runs the
    canaries, then the reproducer: 0 honoured, 1 it still fails (:class:`~.errors.StillFails`), 7 it could
    not run (any other exception), 4 a canary failed (the environment cannot run kernels)."""
    import contextlib
    import traceback

    from triton_conformance.errors import StillFails

    device, shims, script = argv[0], json.loads(argv[1]), argv[2]
    dump = argv[3] if len(argv) > 3 else None
    try:
        from triton_conformance.conformance.backend import select_device

        device = select_device(device)
        if device == "interpreter" and shims is not None:  # before the reproducer imports the subject
            from triton_conformance.conformance.interpreter_layer import install_compat

            install_compat(shims)
        from triton_conformance.conformance.canary import environment_failure

        broken = environment_failure(device)
    except Exception:  # noqa: BLE001 - torch or triton cannot even be set up here
        traceback.print_exc()
        print("triton-conformance replay: could not set up the back end to run the reproducer on",
              file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    if broken is not None:
        print(f"triton-conformance replay: {broken}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from triton_conformance.conformance.replay import dumping_to

        with dumping_to(dump) if dump else contextlib.nullcontext():
            exec(compile(script, "<reproducer>", "exec"), {"__name__": "__main__"})  # noqa: S102 - our own snippet
    except StillFails:
        traceback.print_exc()
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - it never reached a verdict
        traceback.print_exc()
        print(f"triton-conformance replay: the reproducer could not run: it raised {type(exc).__name__} before "
              "reaching a verdict, so this says nothing about the kernel", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    return EXIT_OK
