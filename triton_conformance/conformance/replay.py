"""What a reproducer calls: rebuild a failing example and judge it again, as its cell did.

Each function imports the subject's module, runs the example on the back end
named by ``device``, prints what it found, and raises StillFails (an AssertionError) if the
example still fails.  Every one runs under the cell's own guards, poison and
sentinels, so a memory bug reproduces as the verdict, never as a crash first.
"""

from __future__ import annotations

import importlib

from triton_conformance.conformance.backend import current_backend
from triton_conformance.conformance.checks import run_example
from triton_conformance.conformance.kinds import judge_for, stochastic_plan
from triton_conformance.conformance.large_index import run_large_index_example
from triton_conformance.conformance.stochastic import run_stochastic_cell
from triton_conformance.errors import StillFails
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.spec import Spec
from triton_conformance.model.subject import get_subject
from triton_conformance.strategies._internal.tensors import build_inputs

__all__ = ["replay", "replay_stochastic", "replay_large_index"]


def _subject_and_backend(module: str, name: str, device: str):  # noqa: ANN202
    importlib.import_module(module)
    return get_subject(name), current_backend("cuda" if device.startswith("cuda") else "interpreter")


def replay(module: str, name: str, spec: Spec | dict, *, device: str = "cpu", determinism: bool = False,
           check: bool = True):
    """Rebuild ``spec``'s inputs and re-run the battery on them: the same guards, poison and sentinels.

    ``determinism``: also compare repeated calls bit for bit, as the determinism
    cell does.  Prints each input's shape, strides and offset, and the verdict.  With
    ``check``, raises AssertionError carrying the finding if the example still
    fails.  Returns ``(inputs, verdict)``: the inputs as the launcher saw them,
    and ``"honoured"``, ``"rejected"`` or the Finding.
    """
    subject, backend = _subject_and_backend(module, name, device)
    spec = spec if isinstance(spec, Spec) else Spec.from_dict(spec)
    built = build_inputs(subject.contract, spec, device=backend.device)
    for n, t in built.views.items():
        print(f"{n}: shape={tuple(t.shape)} stride={t.stride()} offset={t.storage_offset()} dtype={t.dtype}")
    verdict = run_example(subject, spec, backend, judge_for(subject, backend), determinism=determinism)
    print(f"verdict: {verdict if isinstance(verdict, str) else verdict.outcome + ' / ' + verdict.kind}")
    if check and isinstance(verdict, Finding):
        raise StillFails(f"{subject.name}: {verdict.outcome} ({verdict.kind}): {verdict.message}")
    return built.views, verdict


def replay_stochastic(module: str, name: str, cell: str, *, seed: int, device: str = "cpu"):
    """Re-run a stochastic cell with the seed of a failure; raise AssertionError if it fails again."""
    subject, backend = _subject_and_backend(module, name, device)
    result = run_stochastic_cell(subject, cell, seed=seed, plan=stochastic_plan(subject.contract), backend=backend)
    for t in result.details.get("tests", []):
        print(f"{'REJECT' if t['rejected'] else 'ok    '} {t['description']}: observed {t['statistic']:.6g}, "
              f"expected {t['expected']:.6g}, n={t['n']}, p-value={t['p_value']:.3g}")
    print(f"{name}[{cell}]: {result.outcome} {result.message}")
    if not result.passed:
        raise StillFails(f"{name}: {result.outcome} ({result.finding}): {result.message}")
    return result


def replay_large_index(module: str, name: str, device: str = "cpu", *, check: bool = True):
    """Run the large-index example of subject ``name``; print the verdict, raise AssertionError if it fails."""
    subject, backend = _subject_and_backend(module, name, device)
    verdict = run_large_index_example(subject, backend, judge_for(subject, backend))
    print(f"verdict: {verdict if isinstance(verdict, str) else verdict.outcome + ' / ' + verdict.kind}: "
          f"{getattr(verdict, 'message', '')}")
    if check and isinstance(verdict, Finding):
        raise StillFails(f"{subject.name}: {verdict.outcome} ({verdict.kind}): {verdict.message}")
    return verdict
