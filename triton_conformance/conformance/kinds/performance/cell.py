"""The ``performance`` cell: check a subject once at its measured size, then time it.

:func:`measure` times the launcher and the torch baseline on contiguous inputs
of the declared size and turns the medians into figures: achieved GB/s (from
``bytes``) or TFLOP/s (from ``flops``), the fraction of the device's measured
peak, and the speed ratio against the baseline.  :func:`run_performance_cell`
wraps it as a cell: skipped off CUDA, ``wrong``/``unsafe``/``crash`` if the
subject fails the battery at that size, else ``honoured`` with the figures in
``details``.  A slow kernel does not fail the cell; the nightly diff flags a
drop in its fraction (:mod:`triton_conformance.reports.diff`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from triton_conformance.conformance import gpu_turns
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.battery.forward import run_example
from triton_conformance.conformance.judge import Judge, exception_text
from triton_conformance.conformance.kinds.performance.peaks import (
    CudaEventTimer,
    Peaks,
    Timer,
    measured_peaks,
    median_ms,
)
from triton_conformance.conformance.results import cell_result, failed, reproducer, skipped
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding, SkipReason
from triton_conformance.model.performance import (
    Performance,
    check_performance,
    figures_line,
)
from triton_conformance.model.spec import Spec
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.tensors import build_inputs

__all__ = ["NOT_CUDA", "NO_CONTRACT", "Measurement", "measure", "measured_spec", "run_performance_cell"]

NOT_CUDA = SkipReason("performance is measured on CUDA only: this run uses the Triton interpreter, whose timings "
                      "say nothing about a GPU (run with --conformance-device=cuda)", code="performance:not-cuda")
NO_CONTRACT = SkipReason("subject declares no performance contract (performance=Performance(...))",
                         code="performance:no-contract")


@dataclass
class Measurement:
    """The figures of one timed subject at its measured size."""

    dims: dict[str, int]
    dtypes: dict[str, str]
    bytes: float | None
    flops: float | None
    bound: str  # "memory" or "compute": which roofline term the kernel is judged on
    unit: str  # "GB/s" or "TFLOP/s"
    achieved: float
    peak: float
    fraction: float
    kernel_ms: float
    baseline_ms: float | None
    speedup: float | None  # baseline_ms / kernel_ms: above 1 is faster than torch
    reps: int
    timer: str
    peaks: dict[str, Any]

    def details(self) -> dict[str, Any]:
        return asdict(self)


def measured_spec(subject: Subject) -> Spec:
    """The example at the declared size: contiguous inputs, ordinary values, fixed seed."""
    contract = subject.contract
    perf: Performance = contract.performance
    return Spec(dims=dict(perf.dims), dtypes={n: str(d) for n, d in perf.dtypes_for(contract).items()},
                layouts={}, scalars=perf.scalars_for(contract), values="ordinary",
                mask="all" if contract.mask_name else None, seed=0)


def figures(*, bytes_: float | None, flops: float | None, kernel_ms: float, baseline_ms: float | None,
            bandwidth_gbs: float | None, tflops: float | None) -> dict[str, Any]:
    """The roofline arithmetic: which term binds, achieved rate, fraction of peak, speedup.

    With both ``bytes_`` and ``flops`` the bound is the term that takes longer
    at peak; the fraction is then the roofline's best time over the kernel's.
    """
    if not (kernel_ms > 0):
        raise InvalidArgument(f"figures: kernel_ms={kernel_ms!r}, expected a positive time")
    seconds = kernel_ms * 1e-3
    memory_s = bytes_ / (bandwidth_gbs * 1e9) if bytes_ is not None else -1.0
    compute_s = flops / (tflops * 1e12) if flops is not None else -1.0
    if memory_s >= compute_s:
        bound, unit, achieved, peak = "memory", "GB/s", bytes_ / seconds / 1e9, bandwidth_gbs
    else:
        bound, unit, achieved, peak = "compute", "TFLOP/s", flops / seconds / 1e12, tflops
    return {"bound": bound, "unit": unit, "achieved": achieved, "peak": peak, "fraction": achieved / peak,
            "kernel_ms": kernel_ms, "baseline_ms": baseline_ms,
            "speedup": None if baseline_ms is None else baseline_ms / kernel_ms}


def measure(subject: Subject, *, device: str = "cuda", timer: Timer | None = None,
            peaks: Peaks | None = None) -> Measurement:
    """Time ``subject`` and its baseline at the declared size on ``device``.

    - ``timer``: runs a callable repeatedly, returns per-call ms (default: :class:`CudaEventTimer`).
    - ``peaks``: the device's peaks (default: measured once per process, :func:`measured_peaks`).
    """
    contract = subject.contract
    perf = contract.performance
    if not isinstance(perf, Performance):
        raise InvalidArgument(f"measure: subject={subject.name!r} has performance={perf!r}, expected "
                              f"Performance(...)")
    check_performance(contract)
    timer = timer or CudaEventTimer(device=device)
    peaks = peaks or measured_peaks(device)
    spec = measured_spec(subject)
    built = build_inputs(contract, spec, device=device)
    keyword = contract.keyword_values(spec.dims)  # dims a relation hands over by keyword
    launch = lambda: subject.launcher(**built.views, **spec.scalars, **keyword)  # noqa: E731
    baseline = None if perf.baseline is None else lambda: perf.baseline(**built.views, **spec.scalars, **keyword)
    bytes_, flops = perf.work(contract)
    for warm_up in (launch, baseline):  # compiles, autotuning, library handles: beside the other workers
        if warm_up is not None:
            warm_up()
    with gpu_turns.exclusive():  # one turn alone for all of this cell's timings (each timer's nests in it)
        kernel = timer(launch)
        baseline_ms = None if baseline is None else median_ms(timer(baseline))
        out = figures(bytes_=bytes_, flops=flops, kernel_ms=median_ms(kernel), baseline_ms=baseline_ms,
                      bandwidth_gbs=peaks.bandwidth_gbs() if bytes_ is not None else None,
                      tflops=peaks.tflops(perf.main_dtype) if flops is not None else None)
    return Measurement(dims=dict(spec.dims), dtypes=dict(spec.dtypes), bytes=bytes_, flops=flops,
                       reps=len(kernel), timer=getattr(timer, "description", type(timer).__name__),
                       peaks=peaks.describe(), **out)


def run_performance_cell(subject: Subject, *, backend: Backend, judge: Judge | None = None,
                         timer: Timer | None = None, peaks: Peaks | None = None) -> CellResult:
    """The ``performance`` cell of ``subject`` on ``backend`` (skipped unless it is CUDA)."""
    cell = "performance"
    if subject.contract.performance is None:
        return skipped(subject, cell, NO_CONTRACT)
    if not backend.compiles:
        return skipped(subject, cell, NOT_CUDA)
    spec = measured_spec(subject)
    where = f"at the measured size dims={spec.dims}, dtypes={spec.dtypes}"
    if subject.contract.model is None:  # stochastic subjects are judged by their own cells
        verdict = run_example(subject, spec, backend, judge)
        if isinstance(verdict, Finding):
            return failed(subject, cell, verdict, message=f"not timed: {where}: {verdict.message}",
                          counterexample=Counterexample(spec.to_dict()), examples=1,
                          reproducer=reproducer(subject, cell, backend, spec, verdict))
    try:
        m = measure(subject, device=backend.device, timer=timer, peaks=peaks)
    except Exception as exc:  # noqa: BLE001 - a launch that fails while timed is a crash of the cell
        finding = Finding("crash", "exception", f"while timing {where}: {exc!r}", {"traceback": exception_text(exc)})
        return failed(subject, cell, finding, counterexample=Counterexample(spec.to_dict()), examples=1)
    details = m.details()
    return cell_result(subject, cell, "honoured", f"{where}: {figures_line(details)}", details=details, examples=1)
