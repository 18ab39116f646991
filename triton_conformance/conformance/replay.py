"""Reproducers: a runnable snippet for a counterexample, and the function it calls."""

from __future__ import annotations

import importlib
from typing import Any

from triton_conformance.model.subject import Subject, get_subject
from triton_conformance.model.spec import Spec

__all__ = ["reproducer", "replay"]

_TEMPLATE = '''\
# {subject}[{cell}]: {outcome} ({finding})
# {message}
{env}import torch
from triton_conformance.conformance.replay import replay
from triton_conformance.strategies import Layout, Spec

spec = {spec!r}
inputs, outputs = replay({module!r}, {subject!r}, spec, device={device!r})
'''


def reproducer(subject: Subject, cell: str, spec: Spec, finding: Any, backend: Any) -> str:
    """A short script that rebuilds the exact tensors, calls the launcher and re-checks."""
    env = 'import os\nos.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported\n' \
        if backend.name == "interpreter" else ""
    message = finding.message.splitlines()[0][:300] if finding.message else ""
    return _TEMPLATE.format(subject=subject.name, cell=cell, outcome=finding.outcome, finding=finding.kind,
                            message=message, env=env, spec=spec, module=subject.module,
                            device="cpu" if backend.name == "interpreter" else "cuda")


def replay(module: str, name: str, spec: Spec | dict, *, device: str = "cpu", check: bool = True):
    """Rebuild ``spec``'s inputs, call subject ``name`` from ``module`` and re-run the battery.

    Prints the tensors' shapes, strides and offsets.  With ``check``, raises
    AssertionError carrying the finding if the example still fails.  Returns
    ``(inputs, outputs)`` for inspection.
    """
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.checks import run_example
    from triton_conformance.model.outcomes import Finding
    from triton_conformance.strategies._internal.tensors import build_inputs

    importlib.import_module(module)
    subject = get_subject(name)
    spec = spec if isinstance(spec, Spec) else Spec.from_dict(spec)
    backend = current_backend("cuda" if device.startswith("cuda") else "interpreter")
    built = build_inputs(subject.contract, spec, device=backend.device)
    for n, t in built.views.items():
        print(f"{n}: shape={tuple(t.shape)} stride={t.stride()} offset={t.storage_offset()} dtype={t.dtype}")
    try:
        outputs = subject.launcher(**built.views, **spec.scalars)
    except Exception as exc:  # noqa: BLE001
        outputs = exc
    verdict = run_example(subject, spec, backend)
    print(f"verdict: {verdict if isinstance(verdict, str) else verdict.outcome + ' / ' + verdict.kind}")
    if check and isinstance(verdict, Finding):
        raise AssertionError(f"{subject.name}: {verdict.outcome} ({verdict.kind}): {verdict.message}")
    return built.views, outputs
