"""The sanitizer mode, without a GPU: parsing memcheck's report, folding it into a cell, finding the tool."""

from __future__ import annotations

import os
import stat

import pytest

from triton_conformance.model.outcomes import CellResult
from triton_conformance.workers.sanitizer import Sanitizer, find_sanitizer, fold_into, parse_report
from triton_conformance.errors import ConformanceUsageError

# The shape of compute-sanitizer 12/13 memcheck output for a store far outside an allocation.
OOB_WRITE = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at wild_store_kernel+0x1f0 in /work/main/tests/hazards/hazard_crash.py:36
=========     by thread (3,0,0) in block (0,0,0)
=========     Address 0x7f3a40000000 is out of bounds
=========     and is 17592186044416 bytes after the nearest allocation at 0x7f2a40000000 of size 256 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f3b51] in libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at wild_store_kernel+0x1f0 in /work/main/tests/hazards/hazard_crash.py:36
=========     by thread (4,0,0) in block (0,0,0)
=========     Address 0x7f3a40000004 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" {api_call}
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 3 errors
""".format(api_call="on CUDA API call to cuStreamSynchronize.")  # the tool does not wrap its lines
MISALIGNED_READ = """\
========= Invalid __global__ read of size 16 bytes
=========     at 0x2a0 in add_kernel
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f00000001 is misaligned
========= ERROR SUMMARY: 1 error
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_parse_report_reads_each_invalid_access_the_api_errors_and_the_summary() -> None:
    report = parse_report(OOB_WRITE)
    assert report.error_count == 3 and len(report.records) == 2
    first = report.records[0]
    assert (first.kind, first.access, first.space, first.size) == ("sanitizer-oob", "write", "global", 4)
    assert first.kernel == "wild_store_kernel" and first.location.endswith("hazard_crash.py:36")
    assert (first.thread, first.block, first.address) == ("3,0,0", "0,0,0", "0x7f3a40000000")
    assert "nearest allocation" in first.text
    assert report.api_errors == ["cudaErrorLaunchFailure (error 719): unspecified launch failure"]


def test_parse_report_old_location_format_and_misalignment() -> None:
    (record,) = parse_report(MISALIGNED_READ).records
    assert (record.kind, record.access, record.size, record.kernel) == ("sanitizer-misaligned", "read", 16,
                                                                       "add_kernel")


def test_parse_report_of_a_clean_run_and_of_a_truncated_log() -> None:
    clean = parse_report(CLEAN)
    assert clean.records == [] and clean.error_count == 0
    cut = parse_report(OOB_WRITE.split("========= Program hit")[0])
    assert len(cut.records) == 2 and cut.error_count is None  # the tool never wrote its summary


def _cell(outcome: str, finding: str | None = None) -> CellResult:
    return CellResult(subject="k", family="f", cell="memory", outcome=outcome, finding=finding, message="was")


@pytest.mark.parametrize(("before", "after"), [
    ("honoured", "unsafe"), ("wrong", "unsafe"), ("crash", "unsafe"), ("timeout", "timeout"),
    ("compile-error", "compile-error"),
])
def test_fold_into_makes_an_invalid_access_unsafe(before: str, after: str) -> None:
    result = fold_into(_cell(before, None if before == "honoured" else "x"), parse_report(OOB_WRITE))
    assert result.outcome == after
    assert result.details["sanitizer"]["error_count"] == 3
    if after == "unsafe":
        assert result.finding == "sanitizer-oob"
        assert result.message.startswith("compute-sanitizer sanitizer-oob: invalid __global__ write of 4 bytes "
                                         "at 0x7f3a40000000 in wild_store_kernel")
        assert "(+1 more)" in result.message
        assert ("the battery alone saw" in result.message) == (before != "honoured")


def test_fold_into_leaves_a_clean_cell_as_it_was() -> None:
    result = fold_into(_cell("honoured"), parse_report(CLEAN))
    assert (result.outcome, result.message) == ("honoured", "was") and result.details["sanitizer"]["records"] == []
    assert fold_into(_cell("wrong", "mismatch"), None).outcome == "wrong"


def test_find_sanitizer_says_where_it_looked(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    if os.access("/usr/local/cuda/bin/compute-sanitizer", os.X_OK):
        pytest.skip("this machine has compute-sanitizer in /usr/local/cuda")
    with pytest.raises(ConformanceUsageError, match=r"--conformance-sanitizer: compute-sanitizer not found on "
                                                    r"PATH or in .*cuda/bin.*CUDA toolkit"):
        find_sanitizer()
    with pytest.raises(ConformanceUsageError, match=r"'/nope' is not an executable file"):
        find_sanitizer("/nope")
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    assert find_sanitizer() == str(tool)


def test_find_sanitizer_looks_in_cuda_home(monkeypatch, tmp_path) -> None:
    # Not on PATH, only under $CUDA_HOME/bin: the toolkit's own layout.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    tool = tmp_path / "cuda" / "bin" / "compute-sanitizer"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    assert find_sanitizer() == str(tool)
    monkeypatch.delenv("CUDA_HOME")
    if not os.access("/usr/local/cuda/bin/compute-sanitizer", os.X_OK):
        with pytest.raises(ConformanceUsageError, match=r"in \['/usr/local/cuda/bin'\]"):
            find_sanitizer()  # without CUDA_HOME its folder is not searched


def test_sanitizer_prefix_gives_each_worker_its_own_log(tmp_path) -> None:
    sanitizer = Sanitizer("/opt/cs", print_limit=5)
    first = sanitizer.prefix()
    assert first[:3] == ("/opt/cs", "--tool", "memcheck") and first[-2:] == ("--print-limit", "5")
    log = first[first.index("--log-file") + 1]
    with open(log, "w") as f:
        f.write(OOB_WRITE)
    report = sanitizer.collect()
    assert report is not None and len(report.records) == 2 and not os.path.exists(log)
    assert sanitizer.collect() is None, "a log is read once"
    second = sanitizer.prefix()
    assert second[second.index("--log-file") + 1] != log


FAKE_TOOL = """#!{python}
# Stands in for compute-sanitizer: writes a memcheck log, then runs the worker command it wraps.
# The findings appear only if the caching allocator is off, as the sanitizer mode requires.
# It closes every inherited descriptor, the worst a real wrapper could do.
import os, sys
os.closerange(3, 4096)
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
command = args[args.index("--print-limit") + 2:]
with open(log, "w") as f:
    f.write({report!r} if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1" else {clean!r})
os.execv(command[0], command)
"""


def test_a_worker_runs_under_the_wrapper_and_its_findings_reach_the_cell(tmp_path) -> None:
    import sys

    from triton_conformance import get_subject
    from triton_conformance.model.config import RunConfig
    from triton_conformance.workers.executor import CellExecutor

    tool = tmp_path / "compute-sanitizer"
    tool.write_text(FAKE_TOOL.format(python=sys.executable, report=OOB_WRITE, clean=CLEAN))
    tool.chmod(0o755)
    module = tmp_path / "sanitized_subjects.py"
    module.write_text("from triton_conformance import Dim, Tensor, subject\n\n"
                      "@subject(inputs={'x': Tensor(('N',), dtypes=('float32',))}, dims={'N': Dim(1, 8)},\n"
                      "         oracle=lambda x: x * 2, family='toy')\n"
                      "def sanitized_double(x):\n    return x * 2\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import sanitized_subjects  # noqa: F401 - registers the subject

        executor = CellExecutor(RunConfig(), sanitizer=Sanitizer(str(tool)))
        try:
            result = executor.run(get_subject("sanitized_double"), "layout:contiguous")
        finally:
            executor.close()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("sanitized_subjects", None)
    assert result.examples > 0, "the cell really ran, in the wrapped worker"
    assert (result.outcome, result.finding) == ("unsafe", "sanitizer-oob")
    assert result.details["sanitizer"]["error_count"] == 3


def test_a_wrapper_that_never_starts_the_worker_is_a_dead_worker_not_a_hang() -> None:
    from triton_conformance.workers.isolation import WorkerPool

    pool = WorkerPool("interpreter", prefix=lambda: ("/bin/false",))
    try:
        status, detail, spec = pool.call({"op": "backend"}, timeout=30)
    finally:
        pool.close()
    assert (status, spec) == ("died", None)
    assert "never opened its channel" in detail


def test_killing_a_wrapped_worker_kills_the_worker_under_the_wrapper(tmp_path) -> None:
    import sys
    import time

    from triton_conformance.workers.isolation import _Worker

    pids = tmp_path / "pids"
    stuck = tmp_path / "stuck.py"  # opens its channels like a worker, then hangs (a spinning kernel)
    stuck.write_text(f"import os, sys, time\nos.open(sys.argv[2], os.O_WRONLY)\nos.open(sys.argv[1], os.O_RDONLY)\n"
                     f"open({str(pids)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
    wrapper = tmp_path / "wrapper"  # forks the program it wraps and waits, as compute-sanitizer does
    wrapper.write_text(f"#!{sys.executable}\nimport subprocess, sys\n"
                       f"sys.exit(subprocess.call([sys.executable, {str(stuck)!r}, *sys.argv[-2:]]))\n")
    wrapper.chmod(0o755)
    worker = _Worker("interpreter", [], dict(os.environ), (str(wrapper),))
    try:
        assert "did not start within 3 s" in worker.wait_ready(timeout=3)  # gives up and kills it
        stuck_pid = int(pids.read_text())
        for _ in range(100):
            try:
                os.kill(stuck_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the wrapped process {stuck_pid} outlived the kill")
    finally:
        worker.close()
