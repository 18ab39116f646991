"""The nightly command and GPU pinning, on the interpreter with stand-in GPU ids.

Pinning does not need a GPU to be tested: a worker claims one of the ids in
``--conformance-gpus`` and exports it as ``CUDA_VISIBLE_DEVICES``; the toy
launchers below log what they see, from inside the cell worker processes.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from triton_conformance.options import EXIT_USAGE

SUBJECTS = '''
import os
import torch
from triton_conformance import Dim, Tensor, subject

def log(event):
    with open(os.environ["PIN_LOG"], "a") as f:
        f.write(f"{event} {os.environ.get('PYTEST_XDIST_WORKER')} {os.environ.get('CUDA_VISIBLE_DEVICES')} "
                f"{os.getpid()}\\n")

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="toy")
def toy_double(x):
    log("cell")
    if x.dtype != torch.float32:
        raise TypeError(f"toy_double: x.dtype={x.dtype}, expected float32")
    if not 1 <= x.shape[0] <= 16:
        raise ValueError(f"toy_double: x.shape={tuple(x.shape)}, expected (N,) with 1 <= N <= 16")
    return x * 2
'''

KILLER = '''
import os
from triton_conformance import Dim, Tensor, subject
from toy_subjects import log

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="contiguous")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="bad")
def a_kills_its_worker(x):
    """Without isolation this takes the pytest-xdist worker down with it (once, or every time)."""
    marker = os.environ["PIN_LOG"] + ".killed"
    if os.environ.get("KILL_EVERY_TIME") or not os.path.exists(marker):
        open(marker, "w").close()
        log("kill")
        os._exit(1)
    return x * 2
'''

CONFTEST = '''
import os

def pytest_conformance_modules(config):
    return {modules!r}

def pytest_sessionstart(session):
    # After every plugin's pytest_configure: the worker has claimed its GPU by now.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        with open(os.environ["PIN_LOG"], "a") as f:
            f.write(f"start {{os.environ['PYTEST_XDIST_WORKER']}} {{os.environ.get('CUDA_VISIBLE_DEVICES')}} "
                    f"{{os.getpid()}}\\n")
'''


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, modules: dict[str, str]) -> None:
    for name, source in modules.items():
        pytester.makepyfile(**{name: textwrap.dedent(source)})
    pytester.makeconftest(CONFTEST.format(modules=list(modules)))
    monkeypatch.setenv("PIN_LOG", str(pytester.path / "pins.log"))
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # When these tests run under xdist themselves, the child's controller must not look like a worker.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def _log(pytester: pytest.Pytester) -> list[tuple[str, str, str, str]]:
    return [tuple(line.split()) for line in (pytester.path / "pins.log").read_text().splitlines()]


def test_nightly_runs_one_worker_per_gpu_each_pinned_to_its_own(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, monkeypatch, {"toy_subjects": SUBJECTS})
    result = pytester.run(sys.executable, "-m", "triton_conformance.cli", "nightly", "--device", "interpreter",
                          "--profile", "ci", "--gpus", "g0,g1", "--workers-per-gpu", "1", "--", "-k",
                          "layout or shape", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["nightly: 2 worker(s) over GPUs ?'g0', 'g1'?, 1 per GPU,*", "*report: *results.html"])
    assert result.ret == 0
    log = _log(pytester)
    started = {worker: gpu for event, worker, gpu, _ in log if event == "start"}
    assert sorted(started) == ["gw0", "gw1"] and sorted(started.values()) == ["g0", "g1"], log
    cells = [(worker, gpu) for event, worker, gpu, _ in log if event == "cell"]
    assert cells and all(gpu == started[worker] for worker, gpu in cells), "cell workers inherit the pin"
    assert len({worker for worker, _ in cells}) == 1, "one subject's cells share a worker (its compile budget)"
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    counts = result.parseoutcomes()
    assert doc["environment"]["profile"] == "ci"
    assert len(doc["results"]) == counts.get("passed", 0) + counts.get("skipped", 0) >= 13


def test_nightly_puts_workers_per_gpu_workers_on_each_gpu(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, monkeypatch, {"toy_subjects": SUBJECTS})
    result = pytester.run(sys.executable, "-m", "triton_conformance.cli", "nightly", "--device", "interpreter",
                          "--profile", "ci", "--gpus", "g0", "--workers-per-gpu", "2", "--", "-k",
                          "layout:contiguous or shape", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["nightly: 2 worker(s) over GPUs ?'g0'?, 2 per GPU,*"])
    assert result.ret == 0
    log = _log(pytester)
    started = {worker: gpu for event, worker, gpu, _ in log if event == "start"}
    assert sorted(started) == ["gw0", "gw1"] and set(started.values()) == {"g0"}, log
    assert {gpu for event, _, gpu, _ in log if event == "cell"} == {"g0"}


# toy_double's cells, and one cell of the subject that kills its worker.
ONE_KILLER_CELL = "(toy_double and (layout:contiguous or shape)) or (a_kills_its_worker and layout:contiguous)"


@pytest.mark.parametrize("dist", ["load", "loadgroup"])
def test_a_replacement_worker_claims_the_gpu_its_predecessor_held(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch, dist) -> None:
    # xdist names the replacement gw2: a gw-index % n_gpus rule would put it on gw0's GPU.
    _project(pytester, monkeypatch, {"toy_subjects": SUBJECTS, "killer_subjects": KILLER})
    result = pytester.runpytest_subprocess(
        "--conformance-only", "--conformance-isolation=none", "--conformance-gpus=g0,g1", "-n", "2",
        "--dist", dist, "-p", "no:randomly", "-k", ONE_KILLER_CELL)
    log = _log(pytester)
    killed = [(worker, gpu) for event, worker, gpu, _ in log if event == "kill"]
    assert len(killed) == 1, log
    dead_worker, dead_gpu = killed[0]
    started = [(worker, gpu) for event, worker, gpu, _ in log if event == "start"]
    assert len(started) == 3, log
    survivor = next(gpu for worker, gpu in started[:2] if worker != dead_worker)
    replacement_worker, replacement_gpu = started[2]
    assert replacement_worker not in ("gw0", "gw1")
    assert replacement_gpu == dead_gpu != survivor, log
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    by_cell = {(r["subject"], r["cell"]): r for r in doc["results"]}
    # A worker's death is not a verdict: the cell ran again, to the end, and its result says what happened.
    again = by_cell[("a_kills_its_worker", "layout:contiguous")]
    assert again["outcome"] == "honoured" and again["details"]["worker_died"]["deaths"] == 1, again
    assert "crashed while running" in again["details"]["worker_died"]["message"]
    assert not [r for r in doc["results"] if r["finding"] == "worker-died"]
    assert by_cell[("toy_double", "layout:contiguous")]["outcome"] == "honoured"
    assert result.parseoutcomes().get("rerun") == 1 and "failed" not in result.parseoutcomes()
    assert result.ret == 0


@pytest.mark.parametrize("dist", ["load", "loadgroup"])
def test_a_cell_whose_worker_dies_twice_is_a_crash_cell(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch, dist) -> None:
    _project(pytester, monkeypatch, {"toy_subjects": SUBJECTS, "killer_subjects": KILLER})
    monkeypatch.setenv("KILL_EVERY_TIME", "1")
    result = pytester.runpytest_subprocess(
        "--conformance-only", "--conformance-isolation=none", "--conformance-gpus=g0,g1", "-n", "2",
        "--dist", dist, "-p", "no:randomly", "-k", ONE_KILLER_CELL)
    kills = [line for line in _log(pytester) if line[0] == "kill"]
    assert len(kills) == 2, kills  # it ran once more, not a third time
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    died = [r for r in doc["results"] if r["finding"] == "worker-died"]
    assert len(died) == 1 and died[0]["subject"] == "a_kills_its_worker" and died[0]["outcome"] == "crash"
    assert {r["subject"] for r in doc["results"]} >= {"toy_double", "a_kills_its_worker"}
    assert result.ret == 1


def test_nightly_without_a_gpu_says_so(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, monkeypatch, {"toy_subjects": SUBJECTS})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = pytester.run(sys.executable, "-m", "triton_conformance.cli", "nightly")
    result.stderr.fnmatch_lines(["triton-conformance nightly: no GPU visible (CUDA_VISIBLE_DEVICES=''*--gpus*"])
    assert result.ret == EXIT_USAGE
    bad = pytester.run(sys.executable, "-m", "triton_conformance.cli", "nightly", "--gpus", "0,0")
    bad.stderr.fnmatch_lines(["*--gpus='0,0', expected a positive count or a comma-separated list of distinct*"])
    assert bad.ret == EXIT_USAGE


def test_the_sanitizer_needs_cuda_and_says_so(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, monkeypatch, {"toy_subjects": SUBJECTS})
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-sanitizer")
    result.stderr.fnmatch_lines(["*--conformance-sanitizer='memcheck' needs --conformance-device=cuda and process "
                                 "isolation (got device 'interpreter', isolation 'process')*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
