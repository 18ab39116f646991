"""pytest-benchmark integration: time a subject's performance contract inside your own benchmark tests.

With pytest-benchmark installed, its ``benchmark`` fixture is available to
every test; hand it to :func:`measure_subject` with a subject that declares
``performance=Performance(...)``::

    from kernels_under_test.vector_add import add
    from triton_conformance.benchmark import measure_subject

    def test_add_speed(benchmark):
        result = measure_subject(benchmark, add)
        assert result.details["fraction"] > 0.5

It runs the subject's ``performance`` cell (correct at the measured size,
then CUDA-event timings against the measured peak and the torch baseline),
stores the figures in ``benchmark.extra_info`` (so ``--benchmark-json`` and
``--benchmark-save`` keep them), and lets pytest-benchmark time the launcher
(followed by a device synchronize) at the same size for its own table.  A
subject that fails the cell fails the test; off CUDA the test is skipped.

Nothing here imports pytest-benchmark: the fixture is used through its public
``extra_info`` and ``pedantic`` attributes.
"""

from __future__ import annotations

from typing import Any

from triton_conformance.errors import InvalidArgument

__all__ = ["measure_subject", "EXTRA_INFO_KEYS"]

# Keys measure_subject writes to benchmark.extra_info (figures missing from a result are left out).
EXTRA_INFO_KEYS = ("subject", "bound", "unit", "achieved", "peak", "fraction", "kernel_ms", "baseline_ms",
                   "speedup", "dims", "dtypes", "bytes", "flops")


def measure_subject(benchmark: Any, subject: Any, *, backend: Any = None, timer: Any = None, peaks: Any = None,
                    rounds: int = 20) -> Any:
    """Measure ``subject``'s performance contract and record it on pytest-benchmark's ``benchmark`` fixture.

    - ``benchmark``: the pytest-benchmark fixture (anything with ``extra_info`` and ``pedantic``).
    - ``subject``: a :class:`~triton_conformance.Subject`, or a declared subject's name.
    - ``backend``: where to run (default: CUDA; the test is skipped when torch sees no GPU).
    - ``timer``, ``peaks``: override the CUDA-event timer and the measured peaks (tests use fakes).
    - ``rounds``: pytest-benchmark rounds of the launcher, after one warm-up round.

    Returns the cell's :class:`~triton_conformance.model.outcomes.CellResult`.
    """
    import pytest

    from triton_conformance.plugin.items import format_result
    from triton_conformance.conformance.kinds.performance.cell import measured_spec, run_performance_cell
    from triton_conformance.model.subject import Subject, get_subject

    if not (isinstance(getattr(benchmark, "extra_info", None), dict) and callable(getattr(benchmark, "pedantic",
                                                                                              None))):
        raise InvalidArgument(f"measure_subject: benchmark={benchmark!r}, expected pytest-benchmark's "
                              "`benchmark` fixture (with .extra_info and .pedantic)")
    if isinstance(subject, str):
        subject = get_subject(subject)
    if not isinstance(subject, Subject):
        raise InvalidArgument(f"measure_subject: subject={subject!r}, expected a Subject or a declared name")
    if not (isinstance(rounds, int) and rounds >= 1):
        raise InvalidArgument(f"measure_subject: rounds={rounds!r}, expected a positive int")
    if backend is None:
        backend = _cuda_backend()
        if backend is None:
            pytest.skip("measure_subject: torch sees no CUDA device; performance is measured on CUDA only")
    result = run_performance_cell(subject, backend=backend, timer=timer, peaks=peaks)
    if result.outcome == "skipped":
        pytest.skip(result.message)
    if not result.passed:
        raise AssertionError(format_result(result))
    figures = {"subject": subject.name, **result.details}
    benchmark.extra_info.update({k: figures[k] for k in EXTRA_INFO_KEYS if figures.get(k) is not None})
    benchmark.pedantic(_launch(subject, measured_spec(subject), backend), rounds=rounds,
                       warmup_rounds=1, iterations=1)
    return result


def _cuda_backend() -> Any:
    import torch

    if not torch.cuda.is_available():
        return None
    from triton_conformance.conformance.backend import current_backend

    return current_backend("cuda")


def _launch(subject: Any, spec: Any, backend: Any) -> Any:
    """A no-argument call of the launcher on the measured inputs that waits for the device."""
    from triton_conformance.strategies._internal.tensors import build_inputs

    views = build_inputs(subject.contract, spec, device=backend.device).views

    def call() -> Any:
        out = subject.launcher(**views, **spec.scalars, **subject.contract.keyword_values(spec.dims))
        backend.synchronize()  # pytest-benchmark times on the host: wait for the kernel
        return out

    return call
