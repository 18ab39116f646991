"""Performance contracts: declaration errors, the work formulas, the figures, the cell, the diff, pytest-benchmark.

Nothing here needs a GPU.  The cell's CUDA path runs on the CPU with a
``Backend(name="cuda", device="cpu")`` and a fake timer that returns fixed
per-call times, so the arithmetic is checked against hand-computed numbers.
"""

from __future__ import annotations

import json

import pytest
import torch

from triton_conformance import Dim, InvalidArgument, InvalidContract, Performance, Scalar, Tensor, register
from triton_conformance.conformance.kinds import cells_for
from triton_conformance.conformance.backend import Backend
from triton_conformance.model.outcomes import CellResult
from triton_conformance.conformance.kinds.performance.peaks import CudaEventTimer, FixedPeaks, MeasuredPeaks, median_ms
from triton_conformance.model.performance import DtypeName, figures_line, junit_properties
from triton_conformance.conformance.kinds.performance.cell import NO_CONTRACT, NOT_CUDA, figures, run_performance_cell
from triton_conformance.conformance.runner import run_cell

FAKE_CUDA = Backend(name="cuda", device="cpu")  # the CUDA code path, on CPU tensors
PEAKS = FixedPeaks(bandwidth=4000.0, matmul={"float32": 50.0, "float16": 680.0})
ADD_BYTES = Performance(dims={"N": 1000}, dtype="float32",
                        bytes=lambda dims, dtypes: 3 * dims["N"] * dtypes["x"].itemsize,
                        baseline=lambda x, y: torch.add(x, y))


class FakeTimer:
    """Calls each timed function once (so it must work) and answers the next fixed time in ``ms``."""

    description = "fake timer"

    def __init__(self, *ms: float, reps: int = 7):
        self.ms = list(ms)
        self.reps = reps
        self.calls = 0

    def __call__(self, fn):
        fn()
        value = self.ms[self.calls]
        self.calls += 1
        return [value] * self.reps


def declare_add(*, performance=ADD_BYTES, launcher=None, name="perf_add"):
    def add(x, y):
        return x + y

    return register(launcher or add, name=name,
                    inputs={"x": Tensor(("N",), dtypes=("float32",)), "y": Tensor(("N",), dtypes=("float32",))},
                    dims={"N": Dim(1, 4096)}, oracle=lambda x, y: x + y, performance=performance)


# %%
# Declaration errors name the field
# ---------------------------------

@pytest.mark.parametrize("kwargs, field", [
    ({"dims": {}}, "dims={}"),
    ({"dims": {"N": 0}}, "dims['N']=0"),
    ({"dims": {"N": 2.5}}, "dims['N']=2.5"),
    ({"dims": {"N": True}}, "dims['N']=True"),
    ({"dtype": "float8"}, "dtype='float8'"),
    ({"dtype": {"x": "complex64"}}, "dtype='complex64'"),
    ({"bytes": None}, "bytes=None and flops=None"),
    ({"bytes": 12}, "bytes=12"),
    ({"bytes": lambda dims: 1}, "bytes="),
    ({"flops": lambda a, b, c: 1}, "flops="),
    ({"baseline": "torch.add"}, "baseline='torch.add'"),
    ({"scalars": {"s": float("nan")}}, "scalars['s']=nan"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_performance_fields_are_named(kwargs, field):
    declared = {"dims": {"N": 8}, "bytes": lambda dims, dtypes: 1, **kwargs}
    with pytest.raises(InvalidContract, match="Performance: " + field.replace("[", r"\[").replace("(", r"\(")):
        Performance(**declared)


@pytest.mark.parametrize("performance, message", [
    (Performance(dims={"M": 8}, bytes=lambda d, t: 1), r"dims=\['M'\], expected a size for every contract dim"),
    (Performance(dims={"N": 5000}, bytes=lambda d, t: 1), r"dims\['N'\]=5000, expected a size inside .*Dim\(1, 4096\)"),
    (Performance(dims={"N": 8}, dtype="float16", bytes=lambda d, t: 1), "dtype='float16', expected a dtype input 'x'"),
    (Performance(dims={"N": 8}, dtype={"z": "float32"}, bytes=lambda d, t: 1), r"dtype=\['z'\], expected input names"),
    (Performance(dims={"N": 8}, bytes=lambda d, t: d["K"]), "bytes=.*it raised KeyError"),
    (Performance(dims={"N": 8}, flops=lambda d, t: 0), r"flops\(dims, dtypes\)=0, expected a positive"),
    (Performance(dims={"N": 8}, bytes=lambda d, t: "8"), r"bytes\(dims, dtypes\)='8'"),
    (Performance(dims={"N": 8}, bytes=lambda d, t: 1, baseline=lambda a, b: a), "baseline=.*does not accept"),
    (Performance(dims={"N": 8}, bytes=lambda d, t: 1, scalars={"alpha": 1.0}), r"scalars=\['alpha'\]"),
    (42, "performance=42, expected Performance"),
])
def test_a_performance_contract_must_fit_its_subject(performance, message):
    with pytest.raises(InvalidContract, match=message):
        declare_add(performance=performance)


def test_scalars_default_to_the_middle_of_their_range_and_must_lie_inside_it():
    def scaled(x, alpha):
        return x * alpha

    common = dict(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)}, oracle=lambda x, alpha: x * alpha,
                  scalars={"alpha": Scalar(1.0, 3.0)})
    s = register(scaled, name="perf_scaled", **common,
                 performance=Performance(dims={"N": 64}, bytes=lambda d, t: 8 * d["N"]))
    assert s.contract.performance.scalars_for(s.contract) == {"alpha": 2.0}
    with pytest.raises(InvalidContract, match=r"scalars\['alpha'\]=4.0, expected a value inside Scalar\(1.0, 3.0\)"):
        register(scaled, name="perf_scaled2", **common,
                 performance=Performance(dims={"N": 64}, bytes=lambda d, t: 1, scalars={"alpha": 4.0}))


def test_dtype_names_know_their_size():
    assert DtypeName("bfloat16").itemsize == 2 and DtypeName("float64").itemsize == 8
    assert DtypeName("float32") == "float32"  # still a string for dict keys and messages


# %%
# The work each kernel under test declares
# ----------------------------------------

def test_bytes_and_flops_of_the_kernels_under_test():
    from kernels_under_test.flash_attention import flash_attention, flash_attention_causal
    from kernels_under_test.gemv import gemv_strided, gemv_textbook
    from kernels_under_test.matmul import matmul
    from kernels_under_test.vector_add import add

    def work(s):
        return s.contract.performance.work(s.contract)

    n = add.contract.performance.dims["N"]
    assert n == min(add.contract.dims["N"].max, 1 << 26)  # capped: the fp64 check must fit in memory
    assert work(add) == (3 * n * 4, None)  # x, y read and out written, fp32
    gemv = 4096 * 8192 * 2 + 8192 * 2 + 4096 * 4  # A and x in fp16, y in fp32
    assert work(gemv_textbook) == work(gemv_strided) == (gemv, None)
    assert work(matmul) == (None, 2 * 1024 ** 3)
    assert work(flash_attention) == (None, 4 * 4 * 2048 * 2048 * 64)
    assert work(flash_attention_causal) == (None, 4 * 4 * 64 * (2048 * 2049 // 2))  # about half
    for s in (add, gemv_textbook, matmul, flash_attention):
        assert cells_for(s)[-1] == "performance"


@pytest.mark.parametrize("M, N", [(1, 1), (5, 3), (3, 5), (64, 64), (7, 1)])
def test_causal_pairs_count_the_keys_each_query_may_attend(M, N):
    from kernels_under_test.flash_attention import attended_pairs

    brute = sum(1 for i in range(M) for j in range(N) if j <= i)
    assert attended_pairs(M, N, causal=True) == brute
    assert attended_pairs(M, N, causal=False) == M * N


def test_cells_for_includes_performance_only_when_declared():
    assert "performance" in cells_for(declare_add())
    assert "performance" not in cells_for(declare_add(performance=None, name="perf_none"))


# %%
# The figures
# -----------

def test_memory_bound_figures():
    out = figures(bytes_=12e6, flops=None, kernel_ms=0.01, baseline_ms=0.02, bandwidth_gbs=4000.0, tflops=None)
    assert out["bound"] == "memory" and out["unit"] == "GB/s"
    assert out["achieved"] == pytest.approx(1200.0)  # 12e6 B / 1e-5 s = 1.2e12 B/s
    assert out["fraction"] == pytest.approx(0.3)
    assert out["speedup"] == pytest.approx(2.0)


def test_compute_bound_figures_and_the_roofline_choice():
    out = figures(bytes_=None, flops=2e9, kernel_ms=0.01, baseline_ms=None, bandwidth_gbs=None, tflops=680.0)
    assert (out["bound"], out["unit"]) == ("compute", "TFLOP/s")
    assert out["achieved"] == pytest.approx(200.0) and out["fraction"] == pytest.approx(200 / 680)
    assert out["speedup"] is None
    # Both declared: 8e6 B at 4000 GB/s is 2 us, 2e9 flop at 680 TFLOP/s about 2.9 us: compute binds.
    both = figures(bytes_=8e6, flops=2e9, kernel_ms=0.01, baseline_ms=0.01, bandwidth_gbs=4000.0, tflops=680.0)
    assert both["bound"] == "compute" and both["speedup"] == pytest.approx(1.0)
    memory = figures(bytes_=8e8, flops=2e9, kernel_ms=1.0, baseline_ms=None, bandwidth_gbs=4000.0, tflops=680.0)
    assert memory["bound"] == "memory" and memory["fraction"] == pytest.approx(0.2)


def test_figures_refuse_a_non_positive_time():
    with pytest.raises(InvalidArgument, match="kernel_ms=0"):
        figures(bytes_=1.0, flops=None, kernel_ms=0, baseline_ms=None, bandwidth_gbs=1.0, tflops=None)
    with pytest.raises(InvalidArgument, match="median_ms"):
        median_ms([])


def test_measured_peaks_are_computed_from_the_timings_and_cached():
    timer = FakeTimer(0.5, 2.0)
    peaks = MeasuredPeaks(timer, device="cpu", copy_bytes=4 << 20, matmul_size=64)
    assert peaks.bandwidth_gbs() == pytest.approx(2 * (4 << 20) / 0.5e-3 / 1e9)  # read + write
    assert peaks.tflops("float32") == pytest.approx(2 * 64 ** 3 / 2e-3 / 1e12)
    assert timer.calls == 2
    # Asked again: the same hand-computed figures, from the cache (16.777216 GB/s, 0.000262144 TFLOP/s)
    assert peaks.bandwidth_gbs() == pytest.approx(16.777216) and peaks.tflops("float32") == pytest.approx(2.62144e-4)
    assert timer.calls == 2  # once per figure per process
    assert peaks.describe()["matmul_tflops"] == {"float32": pytest.approx(2 * 64 ** 3 / 2e-3 / 1e12)}


def test_timer_and_peak_arguments_are_validated():
    with pytest.raises(InvalidArgument, match="rep_ms=0"):
        CudaEventTimer(rep_ms=0)
    with pytest.raises(InvalidArgument, match="min_reps=0"):
        CudaEventTimer(min_reps=0)
    with pytest.raises(InvalidArgument, match="bandwidth=-1"):
        FixedPeaks(bandwidth=-1)
    with pytest.raises(InvalidArgument, match="no matmul rate for dtype='bfloat16'"):
        PEAKS.tflops("bfloat16")


# %%
# The performance cell
# --------------------

def test_the_cell_reports_fraction_of_peak_and_speedup():
    calls = []

    def add(x, y):
        calls.append(x.shape)
        return x + y

    s = declare_add(launcher=add)
    timer = FakeTimer(0.003, 0.006)  # the launcher first, then the torch baseline
    r = run_performance_cell(s, backend=FAKE_CUDA, timer=timer, peaks=PEAKS)
    assert r.outcome == "honoured" and r.cell == "performance", r.message
    d = r.details
    assert d["bytes"] == 12000 and d["bound"] == "memory" and d["unit"] == "GB/s"
    assert d["achieved"] == pytest.approx(4.0)  # 12000 B in 3 us
    assert d["peak"] == 4000.0 and d["fraction"] == pytest.approx(0.001)
    assert (d["kernel_ms"], d["baseline_ms"]) == (0.003, 0.006) and d["speedup"] == pytest.approx(2.0)
    assert d["dims"] == {"N": 1000} and d["reps"] == 7 and d["timer"] == "fake timer"
    assert timer.calls == 2 and (1000,) in calls
    assert "= 0.1% of 4000 GB/s" in r.message and "2x torch" in r.message
    json.dumps(r.to_dict())  # goes into the results JSON as it is


def test_a_kernel_wrong_at_the_measured_size_is_wrong_and_not_timed():
    def add(x, y):
        out = x + y
        if x.shape[0] >= 512:
            out[511] += 1.0
        return out

    timer = FakeTimer(1.0, 1.0)
    r = run_performance_cell(declare_add(launcher=add), backend=FAKE_CUDA, timer=timer, peaks=PEAKS)
    assert (r.outcome, r.finding) == ("wrong", "mismatch")
    assert r.message.startswith("not timed: at the measured size dims={'N': 1000}")
    assert r.counterexample["dims"] == {"N": 1000} and timer.calls == 0


def test_a_launch_that_fails_while_timed_is_a_crash():
    class Exploding(FakeTimer):
        def __call__(self, fn):
            raise RuntimeError("illegal memory access")

    r = run_performance_cell(declare_add(), backend=FAKE_CUDA, timer=Exploding(), peaks=PEAKS)
    assert (r.outcome, r.finding) == ("crash", "exception") and "illegal memory access" in r.message


def test_the_cell_is_skipped_on_the_interpreter_and_without_a_contract():
    r = run_cell(declare_add(), "performance", backend=Backend())
    assert (r.outcome, r.message) == ("skipped", NOT_CUDA)
    assert "interpreter" in NOT_CUDA and "CUDA only" in NOT_CUDA
    bare = run_performance_cell(declare_add(performance=None, name="perf_bare"), backend=FAKE_CUDA)
    assert (bare.outcome, bare.message) == ("skipped", NO_CONTRACT)


# %%
# Reports: JUnit properties, terminal lines, the nightly diff
# -----------------------------------------------------------

def measured(fraction, *, subject="k", outcome="honoured"):
    details = figures(bytes_=8e9 * fraction, flops=None, kernel_ms=1.0, baseline_ms=1.5, bandwidth_gbs=8000.0,
                      tflops=None)
    return CellResult(subject=subject, family="f", cell="performance", outcome=outcome, details=details)


def test_junit_properties_carry_the_figures_of_measured_cells_only():
    props = dict(junit_properties(measured(0.25)))
    assert props["conformance_perf_fraction"] == "0.25" and props["conformance_perf_unit"] == "GB/s"
    assert float(props["conformance_perf_speedup"]) == 1.5
    assert junit_properties(CellResult(subject="k", family="f", cell="memory", outcome="honoured")) == []
    assert junit_properties(CellResult(subject="k", family="f", cell="performance", outcome="skipped")) == []


def test_the_terminal_matrix_lists_performance_figures():
    from triton_conformance.reports.terminal import matrix_lines

    lines = matrix_lines([measured(0.25, subject="add"),
                          CellResult(subject="add", family="f", cell="memory", outcome="honoured")])
    assert "  add  memory-bound: 2000 GB/s = 25.0% of 8000 GB/s; 1 ms; 1.5x torch (1.5 ms)" in lines
    assert figures_line({}) == ""


def write_doc(path, cells):
    from triton_conformance.reports.results_json import results_document, write_results

    write_results(str(path), results_document(cells, {"device": "cuda", "device_name": "NVIDIA H200"}))
    return str(path)


def test_a_drop_in_fraction_of_peak_is_a_regression(tmp_path):
    from triton_conformance.reports.diff import diff_documents
    from triton_conformance.reports.results_json import read_results

    old = write_doc(tmp_path / "old.json", [measured(0.80, subject="a"), measured(0.80, subject="b"),
                                            measured(0.50, subject="c"), measured(0.60, subject="d")])
    new = write_doc(tmp_path / "new.json", [measured(0.70, subject="a"), measured(0.73, subject="b"),
                                            measured(0.70, subject="c"), measured(0.30, subject="d",
                                                                                  outcome="skipped")])
    diff = diff_documents(read_results(old), read_results(new))
    assert [(c.subject, c.old, c.new) for c in diff.regressions] == [("a", "honoured", "honoured")]
    assert diff.regressions[0].line() == \
        "a[performance]: honoured -> honoured (fraction of peak 80.0% -> 70.0%, -12.5%)"
    assert [c.subject for c in diff.changed] == ["c", "d"]  # c got faster; d was not measured
    assert "+40.0%" in diff.changed[0].line()
    lenient = diff_documents(read_results(old), read_results(new), perf_threshold=0.2)
    assert not lenient.regressions
    strict = diff_documents(read_results(old), read_results(new), perf_threshold=0.05)
    assert [c.subject for c in strict.regressions] == ["a", "b"]  # 0.80 -> 0.73 is -8.75%
    with pytest.raises(InvalidArgument, match="perf_threshold=1.5"):
        diff_documents(read_results(old), read_results(new), perf_threshold=1.5)


def test_the_diff_command_fails_on_a_performance_regression(tmp_path, capsys):
    from triton_conformance.cli import main

    old = write_doc(tmp_path / "old.json", [measured(0.9)])
    new = write_doc(tmp_path / "new.json", [measured(0.5)])
    assert main(["diff", old, new]) == 1
    assert "k[performance]: honoured -> honoured (fraction of peak 90.0% -> 50.0%, -44.4%)" in capsys.readouterr().out
    assert main(["diff", old, old]) == 0


def test_the_html_report_shows_the_percent_and_a_performance_table():
    from triton_conformance.reports.html import render_html
    from triton_conformance.reports.results_json import results_document

    page = render_html(results_document([measured(0.731, subject="add")], {"device": "cuda"}))
    assert 'title="add[performance]: honoured: 5848 GB/s = 73.1% of 8000 GB/s; 1 ms; 1.5x torch (1.5 ms)">73</a>' \
        in page
    assert '<section class="performance-section" id="performance">' in page and "<td>73.1%</td>" in page
    assert "<td>1.50x</td>" in page


# %%
# pytest-benchmark
# ----------------

class FakeBenchmark:
    """The two attributes of pytest-benchmark's ``benchmark`` fixture that measure_subject uses."""

    def __init__(self):
        self.extra_info = {}
        self.pedantic_calls = []

    def pedantic(self, target, args=(), kwargs=None, setup=None, rounds=1, warmup_rounds=0, iterations=1):
        self.pedantic_calls.append({"rounds": rounds, "warmup_rounds": warmup_rounds, "iterations": iterations})
        for _ in range(warmup_rounds + rounds):
            result = target(*args, **(kwargs or {}))
        return result


def test_measure_subject_records_the_figures_in_extra_info():
    from triton_conformance.benchmark import measure_subject

    bench = FakeBenchmark()
    r = measure_subject(bench, declare_add(), backend=FAKE_CUDA, timer=FakeTimer(0.004, 0.002), peaks=PEAKS,
                        rounds=3)
    info = bench.extra_info
    assert info["subject"] == "perf_add" and info["unit"] == "GB/s" and info["bound"] == "memory"
    assert info["achieved"] == pytest.approx(3.0) and info["fraction"] == pytest.approx(0.00075)
    assert info["speedup"] == pytest.approx(0.5) and info["kernel_ms"] == 0.004
    assert "flops" not in info  # only figures the subject declares
    assert bench.pedantic_calls == [{"rounds": 3, "warmup_rounds": 1, "iterations": 1}]
    assert r.details["fraction"] == info["fraction"]


def test_measure_subject_by_name_fails_the_test_on_a_wrong_kernel_and_checks_its_arguments():
    from triton_conformance.benchmark import measure_subject

    def add(x, y):
        return x - y

    declare_add(launcher=add, name="perf_sub")
    with pytest.raises(AssertionError, match=r"perf_sub\[performance\]: WRONG \(mismatch\)"):
        measure_subject(FakeBenchmark(), "perf_sub", backend=FAKE_CUDA, timer=FakeTimer(1, 1), peaks=PEAKS)
    with pytest.raises(InvalidArgument, match="benchmark=None, expected pytest-benchmark's `benchmark` fixture"):
        measure_subject(None, "perf_sub")
    with pytest.raises(InvalidArgument, match="rounds=0"):
        measure_subject(FakeBenchmark(), "perf_sub", rounds=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip when there is no GPU")
def test_measure_subject_skips_without_a_gpu():
    from triton_conformance.benchmark import measure_subject

    with pytest.raises(pytest.skip.Exception, match="CUDA only"):
        measure_subject(FakeBenchmark(), declare_add())



REAL_BENCHMARK_TEST = '''
from triton_conformance import Dim, Performance, Tensor, register
from triton_conformance.benchmark import measure_subject
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.kinds.performance.peaks import FixedPeaks


def add(x, y):
    return x + y


ADD = register(add, name="pb_add", inputs={"x": Tensor(("N",)), "y": Tensor(("N",))}, dims={"N": Dim(1, 4096)},
               oracle=lambda x, y: x + y,
               performance=Performance(dims={"N": 4096}, bytes=lambda d, t: 3 * d["N"] * t["x"].itemsize))


class Timer:
    description = "fixed"

    def __call__(self, fn):
        fn()
        return [0.002] * 5


def test_add_speed(benchmark):
    measure_subject(benchmark, ADD, backend=Backend(name="cuda", device="cpu"), timer=Timer(),
                    peaks=FixedPeaks(4000.0), rounds=3)
'''


def test_measure_subject_with_the_real_pytest_benchmark(pytester):
    pytest.importorskip("pytest_benchmark")
    pytester.makepyfile(test_pb=REAL_BENCHMARK_TEST)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    (entry,) = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    assert entry["extra_info"]["fraction"] == pytest.approx(3 * 4096 * 4 / 2e-6 / 1e9 / 4000)  # 6.1 GB/s of 4000
    assert entry["extra_info"]["unit"] == "GB/s" and entry["stats"]["rounds"] == 3
