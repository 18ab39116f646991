"""A long subject's cells split between xdist workers (plugin/splitting.py, plugin/scheduling.py).

On the interpreter with toy launchers that log, from wherever they run (the
cell worker, or with ``--conformance-isolation=none`` the pytest worker), which
pytest worker ran them and whether their subject's shared ledger was there.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest

import triton_conformance
from triton_conformance.reports.results_json import SCHEMA, VERSION

SUBJECTS = '''
import os
import torch
from triton_conformance import Dim, Tensor, subject

def log(event, name):
    directory = os.environ.get("TRITON_CONFORMANCE_SHARED_LEDGER")
    shared = bool(directory) and os.path.exists(os.path.join(directory, name + ".ledger"))
    with open(os.environ["SPLIT_LOG"], "a") as f:
        f.write(f"{event} {name} {os.environ.get('PYTEST_XDIST_WORKER')} {shared} "
                f"{os.environ.get('PYTEST_CURRENT_TEST', '-').split()[0]}\\n")

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="toy")
def toy_long(x):
    log("cell", "toy_long")
    if x.shape[0] > 1 and x.stride(0) == 0 and os.environ.get("KILL_BROADCAST"):
        log("kill", "toy_long")
        os._exit(1)  # a broadcast input takes the worker down, every time
    return x * 2

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="contiguous")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="toy")
def toy_small(x):
    log("cell", "toy_small")
    return x * 2
'''

CONFTEST = '''
def pytest_conformance_modules(config):
    return ["split_subjects"]
'''

TOY_LONG_CELLS = [f"layout:{v}" for v in ("contiguous", "transposed", "sliced", "padded", "offset", "broadcast",
                                          "size1", "mixed")] + \
    [f"dtype:{v}" for v in ("float32", "float16", "bfloat16")] + \
    [f"shape:{v}" for v in ("tiny", "non-pow2", "beyond-block", "empty", "beyond-range", "large-index")] + \
    [f"values:{v}" for v in ("huge", "inf", "nan", "denormal", "ties")] + ["memory", "determinism"]
CELLS = "toy_long or (toy_small and shape)"  # 24 cells and 6: toy_long is over half of the run


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(split_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv("SPLIT_LOG", str(pytester.path / "split.log"))
    # This checkout's package first: an installed copy elsewhere (an editable install of another tree) would
    # otherwise run in the child.
    root = os.path.dirname(os.path.dirname(triton_conformance.__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), root]))
    (pytester.path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(pytester.path / "tmp"))  # the run's directory of ledgers goes here
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID",
                 "TRITON_CONFORMANCE_SHARED_LEDGER"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def _log(pytester: pytest.Pytester) -> list[list[str]]:
    return [line.split() for line in (pytester.path / "split.log").read_text().splitlines()]


def _results(pytester: pytest.Pytester) -> dict[tuple[str, str], dict]:
    doc = json.loads((pytester.path / "conformance-results" / "results.json").read_text())
    return {(r["subject"], r["cell"]): r for r in doc["results"]}


def test_a_long_subject_runs_on_two_workers_with_one_ledger_and_a_small_one_stays_whole(project) -> None:
    result = project.runpytest_subprocess("--conformance-only", "-n", "2", "--dist", "loadgroup",
                                          "-p", "no:randomly", "-k", CELLS)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["split between workers: toy_long (12 + 12 cells), by cells*"])
    log = _log(project)
    workers = {name: {w for event, n, w, _, _ in log if n == name} for name in ("toy_long", "toy_small")}
    assert len(workers["toy_long"]) == 2 and len(workers["toy_small"]) == 1, log
    shared = {name: {s for _, n, _, s, _ in log if n == name} for name in ("toy_long", "toy_small")}
    assert shared == {"toy_long": {"True"}, "toy_small": {"False"}}, "the cut subject's cells see its ledger"
    results = _results(project)
    assert len(results) == 30  # every cell once, and (ret 0) every one passed or skipped
    made = [p for p in os.listdir(project.path / "tmp") if p.startswith("conformance-ledgers-")]
    assert not made, "the run's directory of ledgers is removed at its end"


def test_a_crash_in_a_part_is_its_cells_crash(project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILL_BROADCAST", "1")
    # layout:contiguous costs as much as the rest of toy_long: the cut puts it alone in part 1.
    durations = [{"subject": "toy_long", "cell": cell, "family": "toy", "outcome": "honoured",
                  "duration_s": 30.0 if cell == "layout:contiguous" else 1.0} for cell in TOY_LONG_CELLS]
    (project.path / "durations.json").write_text(json.dumps({"schema": SCHEMA, "version": VERSION,
                                                             "results": durations}))
    result = project.runpytest_subprocess("--conformance-only", "--conformance-isolation=none", "-n", "2",
                                          "--dist", "loadgroup", "--conformance-shard-durations=durations.json",
                                          "-p", "no:randomly", "-k", CELLS)
    log = _log(project)
    killed = [test for event, _, _, _, test in log if event == "kill"]
    assert killed and all(killed.count(test) == 2 for test in killed), log  # each ran once more, not a third time
    results = _results(project)
    crashed = {cell for (subject, cell), r in results.items() if r["outcome"] == "crash"}
    assert crashed == {test.split("[", 1)[1].rstrip("]") for test in killed}, (crashed, killed)
    assert all(results[("toy_long", cell)]["finding"] == "worker-died" for cell in crashed)
    assert "layout:broadcast" in crashed and len(results) == 30
    contiguous = [w for event, n, w, _, test in log if test.endswith("[layout:contiguous]") and n == "toy_long"]
    others = {w for event, n, w, _, test in log if n == "toy_long" and not test.endswith("[layout:contiguous]")}
    assert contiguous and contiguous[0] not in others, "layout:contiguous ran alone, in a part of its own"
    assert result.ret == 1
