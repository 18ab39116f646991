"""End to end: the plugin in a fresh pytest process, on pure-torch subjects.

Pure-torch launchers exercise the whole pipeline (collection, isolation,
results JSON, terminal matrix) in seconds; the Triton kernels are exercised
by tests/quality.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from triton_conformance.options import EXIT_USAGE

SUBJECTS = '''
import os
import time
import torch
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any"),
                 "y": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(0, 64)}, oracle=lambda x, y: x + y, family="toy")
def toy_add(x, y):
    if x.dtype != torch.float32 or y.dtype != torch.float32:
        raise TypeError(f"toy_add: x.dtype={x.dtype}, expected float32")
    if not (0 <= x.shape[0] <= 64) or x.shape != y.shape:
        raise ValueError(f"toy_add: x.shape={tuple(x.shape)}, expected (N,) with N <= 64")
    return x + y

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any"),
                 "y": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(0, 64)}, oracle=lambda x, y: x + y, family="toy")
def toy_add_off_by_one(x, y):
    """Drops the last element for N > 5: silently wrong."""
    if x.dtype != torch.float32:
        raise TypeError(f"toy_add_off_by_one: x.dtype={x.dtype}, expected float32")
    if not (0 <= x.shape[0] <= 64):
        raise ValueError("toy_add_off_by_one: N out of range")
    out = x + y
    if x.shape[0] > 5:
        out[-1] = 0.0
    return out
'''

CRASHING = '''
import os
import time
import torch
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="bad")
def aborts_past_8(x):
    """Stands for a kernel whose out-of-bounds store corrupts the heap."""
    if x.shape[0] > 8:
        os.abort()
    return x * 2

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="bad")
def hangs(x):
    time.sleep(600)
    return x * 2
'''

CONFTEST = '''
def pytest_conformance_modules(config):
    return {modules!r}
'''


def _project(pytester: pytest.Pytester, modules: dict[str, str]) -> None:
    for name, source in modules.items():
        pytester.makepyfile(**{name: textwrap.dedent(source)})
    pytester.makeconftest(CONFTEST.format(modules=list(modules)))


def _results(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "conformance-results" / "results.json").read_text())


def test_plugin_import_does_not_import_torch_or_triton(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_light='''
        import sys
        def test_light():
            assert "triton_conformance.plugin" in sys.modules
            assert "torch" not in sys.modules
            assert "triton" not in sys.modules
            assert "sqlalchemy" not in sys.modules  # the history loads it when a run is recorded
    ''')
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)


def test_battery_reports_every_cell_and_catches_the_wrong_subject(pytester: pytest.Pytester) -> None:
    _project(pytester, {"toy_subjects": SUBJECTS})
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-profile=ci")
    result.stdout.fnmatch_lines([
        "*conformance matrix*",
        "*toy_add *",
        "*toy_add_off_by_one*",
        "*toy_add_off_by_one[[]layout:contiguous*]: wrong (mismatch)*",  # with the cells of the same finding
        "slowest cells (5 of *, * s in all):",  # the run's summary names its slowest cells
        "  toy_add*[[]*[]] * s  *, * examples",
    ])
    doc = _results(pytester)
    assert doc["schema"] == "triton-conformance/results" and doc["version"] == 1
    by_cell = {(r["subject"], r["cell"]): r for r in doc["results"]}
    assert by_cell[("toy_add", "layout:contiguous")]["outcome"] == "honoured"
    assert by_cell[("toy_add", "dtype:float16")]["outcome"] == "rejected"
    assert by_cell[("toy_add", "layout:transposed")]["outcome"] == "skipped"  # 1-D only
    bad = by_cell[("toy_add_off_by_one", "layout:contiguous")]
    assert bad["outcome"] == "wrong"
    assert bad["counterexample"]["dims"] == {"N": 6}, "shrinks to the smallest failing size"
    assert "toy_add_off_by_one" in bad["reproducer"] and "Spec(" in bad["reproducer"]
    # Every collected cell has a result: nothing is lost between worker and controller.
    counts = result.parseoutcomes()
    assert len(doc["results"]) == sum(counts.get(k, 0) for k in ("passed", "failed", "skipped"))
    assert result.ret == 1


def test_crash_and_hang_are_recorded_and_nothing_else_is_lost(pytester: pytest.Pytester) -> None:
    _project(pytester, {"toy_subjects": SUBJECTS, "bad_subjects": CRASHING})
    result = pytester.runpytest_subprocess(
        "--conformance-only", "--conformance-timeout=10", "-k", "layout and contiguous",
    )
    doc = _results(pytester)
    by_cell = {(r["subject"], r["cell"]): r for r in doc["results"]}
    crash = by_cell[("aborts_past_8", "layout:contiguous")]
    assert crash["outcome"] == "crash" and crash["finding"] == "process-died"
    assert "SIGABRT" in crash["message"]
    assert crash["counterexample"]["dims"]["N"] > 8, "records the example that was running"
    assert "aborts_past_8" in crash["reproducer"]
    hang = by_cell[("hangs", "layout:contiguous")]
    assert hang["outcome"] == "timeout"
    # The other subjects' cells ran to completion after the crash and the hang.
    assert by_cell[("toy_add", "layout:contiguous")]["outcome"] == "honoured"
    assert by_cell[("toy_add_off_by_one", "layout:contiguous")]["outcome"] == "wrong"
    assert result.ret == 1


def test_results_merge_across_xdist_workers(pytester: pytest.Pytester) -> None:
    _project(pytester, {"toy_subjects": SUBJECTS})
    serial = pytester.runpytest_subprocess("--conformance-only", "-k", "layout or shape",
                                           "--conformance-results=serial.json")
    parallel = pytester.runpytest_subprocess("--conformance-only", "-k", "layout or shape", "-n", "2",
                                             "--conformance-results=parallel.json")
    one = json.loads((pytester.path / "serial.json").read_text())
    two = json.loads((pytester.path / "parallel.json").read_text())
    strip = lambda doc: sorted((r["subject"], r["cell"], r["outcome"]) for r in doc["results"])  # noqa: E731
    assert strip(one) == strip(two)
    per_subject = 8 + 6  # 7 layout classes and mixed; 5 searched shape classes and large-index
    assert len(strip(two)) == 2 * per_subject
    assert serial.ret == parallel.ret == 1


def test_no_subjects_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("")
    result = pytester.runpytest_subprocess("--conformance-only")
    result.stderr.fnmatch_lines(["*no subject is declared*pytest_conformance_modules*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--conformance-profile=fast"], "*--conformance-profile*invalid choice*"),
        (["--conformance-timeout=soon"], "*--conformance-timeout='soon', expected a positive number of seconds*"),
        (["--conformance-seed=abc"], "*--conformance-seed='abc', expected an integer*"),
        (["--conformance-worker-memory=lots"], "*--conformance-worker-memory='lots', expected auto, none, or a "
                                               "positive number of GiB*"),
        (["--conformance-batch=0"], "*--conformance-batch='0', expected a positive number of examples a test case*"),
    ],
    ids=["profile", "timeout", "seed", "worker-memory", "batch"],
)
def test_bad_options_name_the_option(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    _project(pytester, {"toy_subjects": SUBJECTS})
    result = pytester.runpytest_subprocess("--conformance-only", *args)
    result.stderr.fnmatch_lines([message])
    assert result.ret in (pytest.ExitCode.USAGE_ERROR, 2)


def test_cli_show_prints_the_matrix_and_rejects_bad_files(pytester: pytest.Pytester) -> None:
    _project(pytester, {"toy_subjects": SUBJECTS})
    pytester.runpytest_subprocess("--conformance-only", "-k", "layout")
    shown = pytester.run(sys.executable, "-m", "triton_conformance.cli", "show", "conformance-results/results.json")
    shown.stdout.fnmatch_lines(["*H honoured*", "toy_add *", "toy_add_off_by_one *"])
    assert shown.ret == 0
    (pytester.path / "broken.json").write_text("{not json")
    broken = pytester.run(sys.executable, "-m", "triton_conformance.cli", "show", "broken.json")
    broken.stderr.fnmatch_lines(["*broken.json* is not valid JSON*"])
    assert broken.ret == EXIT_USAGE
    missing = pytester.run(sys.executable, "-m", "triton_conformance.cli", "show", "nope.json")
    missing.stderr.fnmatch_lines(["*nope.json* does not exist*"])
    assert missing.ret == EXIT_USAGE


ONE_SUBJECT = '''
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="toy")
def {name}(x):
    return x * 2
'''


def test_subjects_are_discovered_from_the_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ini_subjects=ONE_SUBJECT.replace("{name}", "from_ini"))
    pytester.makeini("[pytest]\nconformance_modules =\n    ini_subjects\n")
    result = pytester.runpytest_subprocess("--conformance-only", "-k", "contiguous", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*from_ini *H*"])
    assert result.ret == 0


def test_subjects_are_discovered_from_an_entry_point(pytester: pytest.Pytester, monkeypatch) -> None:
    # A distribution on sys.path that advertises a subject module in our entry-point group.
    site = pytester.mkdir("site")
    (site / "ep_subjects.py").write_text(ONE_SUBJECT.replace("{name}", "from_entry_point"))
    dist = site / "ep_subjects-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-subjects\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[triton_conformance.subjects]\nep = ep_subjects\n")
    pytester.makeconftest("")
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = pytester.runpytest_subprocess("--conformance-only", "-k", "contiguous", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*from_entry_point *H*"])
    assert result.ret == 0


def test_a_bad_declaration_is_a_usage_error_naming_the_field(pytester: pytest.Pytester) -> None:
    _project(pytester, {"broken_subjects": '''
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("M", "K"))}, dims={"M": Dim(1, 8)}, oracle=lambda x: x)
def broken(x):
    return x
'''})
    result = pytester.runpytest_subprocess("--conformance-only")
    result.stderr.fnmatch_lines(["ERROR: Contract: inputs*shape='K', expected a dim declared in dims=*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
