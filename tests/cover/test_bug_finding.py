"""bench/bug_finding.py's harness: the testers on one bug and its twin, the fork pool, the summary maths."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit is defined

import importlib
import time

import pytest

from bench.testers import make_tester
from bench.testers.common import Case, dims_size, run_cases
from bench.testers.handwritten import FixedShape, GpuCheck, TutorialGrid
from bench.testers.pool import run_tasks
from bench.testers.summary import detection_status, summarize

UNTESTABLE = {}


@pytest.fixture(scope="module")
def subjects():
    from triton_conformance import get_subject

    for name in ("kernels_under_test.attention", "kernels_under_test.vector_add", "kernels_under_test.matmul",
                 "tests.zoo.zoo_attention", "tests.zoo.zoo_vector_add"):
        importlib.import_module(name)
    return get_subject


# -- the testers on a known bug and its correct twin ---------------------------------


def test_fixed_shape_catches_a_bug_and_passes_its_twin(subjects):
    tester = FixedShape()
    caught = tester.run(subjects("zoo_attention_naive_exp2_without_log2e"), seed=1, device="cpu",
                        untestable=UNTESTABLE)
    assert caught.failed and caught.case.startswith("trial0-") and caught.case.endswith("float32")
    assert caught.dims == {"B": 4, "M": 16, "N": 16, "D": 16} and caught.first_failure_s == caught.seconds
    assert "allclose failed" in caught.message
    twin = tester.run(subjects("attention_naive"), seed=1, device="cpu", untestable=UNTESTABLE)
    assert not twin.failed and twin.cases == 5 and twin.skipped is None


def test_common_practice_misses_an_out_of_bounds_write_the_suite_catches(subjects, monkeypatch):
    bug = subjects("zoo_add_mask_off_by_one")
    grid = TutorialGrid().run(bug, seed=0, device="cpu", untestable={"bfloat16": "slow here"})
    assert not grid.failed and grid.cases == 8  # 4 shapes x fp16, fp32: the output itself is right
    from bench.testers import suite

    monkeypatch.setattr(suite, "cells_for", lambda contract: ["memory", "layout:contiguous"])
    found = make_tester("suite").run(bug, seed=0, device="cpu", untestable={})
    assert found.failed and found.case == "layout:contiguous"  # canonical order puts layout before memory
    assert found.message.startswith("unsafe/oob-write") and found.cases == 1
    assert dims_size(found.dims) >= 1 and 0 < found.first_failure_s <= found.seconds
    monkeypatch.setattr(suite, "cells_for", lambda contract: ["layout:contiguous"])
    twin = make_tester("suite").run(subjects("add"), seed=0, device="cpu", untestable={})
    assert not twin.failed and twin.cases == 1


def test_grid_shapes_include_one_that_is_not_a_power_of_two(subjects):
    contract = subjects("matmul").contract
    shapes = TutorialGrid().shapes(contract, seed=0)
    assert len(shapes) == 4
    odd = [s for s in shapes if any(n & (n - 1) for n in s.values())]
    assert odd == [{"M": 25, "K": 25, "N": 25}]
    assert FixedShape().shapes(contract, 0)[0] == {"M": 32, "K": 32, "N": 32}


def test_shapes_are_clamped_into_the_contract(subjects):
    contract = subjects("attention_naive").contract  # B <= 4, N <= 128, D <= 64
    for dims in TutorialGrid().shapes(contract, seed=0):
        assert all(contract.dims[s].min <= n <= contract.dims[s].max for s, n in dims.items())


def test_gpucheck_says_why_it_is_unavailable(monkeypatch):
    try:
        import gpucheck  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gpucheck is importable here")
    monkeypatch.setenv("GPUCHECK_SITE", "/nonexistent-gpucheck-site")
    reason = GpuCheck().unavailable()
    assert reason is not None and "pip install gpucheck==0.1.0" in reason


def test_gpucheck_skips_stochastic_subjects(subjects):
    class Model:
        kind = "dropout"

    subject = subjects("add")
    fake = type("S", (), {"contract": type("C", (), {"model": Model()})()})()
    assert "no check for stochastic" in GpuCheck().skip_reason(fake, {})
    assert GpuCheck().skip_reason(subject, {}) is None


def test_make_tester_names_the_known_ones():
    with pytest.raises(ValueError, match=r"tester='kernelbench', expected one of \['fixed', 'gpucheck'"):
        make_tester("kernelbench")


# -- running cases and tasks --------------------------------------------------------------


def test_run_cases_stops_at_the_first_failure_and_counts_crashes():
    ran = []

    def ok():
        ran.append("ok")

    def crash():
        ran.append("crash")
        raise RuntimeError("triton: out of resources\nmore")

    run = run_cases([Case("a", {"N": 3}, ok), Case("b", {"N": 5, "M": 2}, crash), Case("c", {"N": 7}, ok)])
    assert run.failed and run.case == "b" and run.dims == {"N": 5, "M": 2} and run.cases == 2
    assert run.message == "RuntimeError: triton: out of resources" and ran == ["ok", "crash"]
    assert run.to_dict()["size"] == 10
    assert not run_cases([Case("a", {"N": 1}, ok)]).failed


def _task(task):
    if task == "die":
        os._exit(3)
    if task == "hang":
        time.sleep(60)
    return {"task": task, "pid": os.getpid()}


def test_pool_survives_dying_and_hanging_tasks():
    got = {}
    run_tasks(["a", "die", "hang", "b"], _task, workers=2, timeout=2.0,
              on_result=lambda task, result, wall: got.__setitem__(task, result))
    assert got["a"]["task"] == "a" and got["b"]["task"] == "b" and got["a"]["pid"] != os.getpid()
    assert got["die"] == {"died": 3}
    assert got["hang"]["timeout"] >= 2.0
    with pytest.raises(ValueError, match="workers=0"):
        run_tasks([], _task, workers=0, timeout=1.0, on_result=print)


# -- the summary maths --------------------------------------------------------------------


def test_detection_status():
    assert detection_status({"died": -11})[0] == "caught"
    assert detection_status({"timeout": 600.0}) == ("timeout", {"case": "timeout", "seconds": 600.0,
                                                               "message": "killed after the timeout"})
    assert detection_status({"error": "KeyError: x"}) == ("error", {"message": "KeyError: x"})
    assert detection_status({"failed": False, "skipped": "stochastic"})[0] == "skipped"
    status, fields = detection_status({"failed": True, "case": "shape:tiny", "dims": {"N": 2}, "size": 2,
                                       "message": "m", "seconds": 3.0, "first_failure_s": 1.0, "cases": 4})
    assert status == "caught" and fields["first_failure_s"] == 1.0 and fields["case"] == "shape:tiny"


def test_summary_maths():
    def det(bug, status, seconds=None, first=None, detectable=True):
        return {"tester": "t", "bug": bug, "status": status, "seconds": seconds, "first_failure_s": first,
                "detectable": detectable, "wall_s": 2.0}

    detections = [det("a", "caught", 4.0, 1.0), det("b", "caught", 9.0), det("c", "missed", 5.0),
                  det("d", "skipped"), det("e", "missed", 1.0, detectable=False), det("f", "caught", 30.0, 3.0),
                  {**det("a", "caught", 0.1), "tester": "other"}]
    alarms = [{"tester": "t", "subject": "add", "seed": 7, "status": "caught", "case": "x", "wall_s": 1.5},
              {"tester": "t", "subject": "add", "seed": 8, "status": "missed", "wall_s": 1.5},
              {"tester": "other", "subject": "add", "seed": 9, "status": "caught", "wall_s": 1.0},
              {"tester": "t", "subject": "rounding", "seed": 9, "status": "skipped", "wall_s": 0.0}]
    s = summarize("t", detections, alarms)
    assert (s["bugs"], s["caught"], s["skipped"], s["detectable"]) == (6, 3, 1, 5)
    assert s["recall"] == pytest.approx(3 / 6) and s["recall_detectable"] == pytest.approx(3 / 5)
    assert s["missed"] == ["c", "d"]  # e is not detectable on this backend
    assert s["median_detect_s"] == 3.0 and s["max_detect_s"] == 9.0  # first failures 1, 9 (no shrink), 3
    assert s["median_verdict_s"] == 9.0 and s["max_verdict_s"] == 30.0
    assert (s["runs"], s["false_alarms"]) == (2, 1) and s["false_alarm_cases"] == ["add[x] seed 7"]
    assert s["detect_wall_s"] == 12.0 and s["false_alarm_wall_s"] == 3.0
    empty = summarize("nobody", detections, alarms)
    assert empty["recall"] is None and empty["median_detect_s"] is None


def test_pool_budget_stops_starting_tasks():
    got = []
    left = run_tasks(["a", "b", "c"], _task, workers=1, timeout=5.0, budget=0.0,
                     on_result=lambda task, result, wall: got.append(task))
    assert got == [] and left == ["a", "b", "c"]
    left = run_tasks(["a", "b"], _task, workers=2, timeout=5.0, budget=30.0,
                     on_result=lambda task, result, wall: got.append(task))
    assert sorted(got) == ["a", "b"] and left == []


def test_counterexample_dims_of_plain_and_statistical_cells():
    from bench.testers.suite import counterexample_dims

    assert counterexample_dims({"dims": {"N": 1025, "M": 1}}) == {"N": 1025, "M": 1}
    stat = {"seed": 0, "last_launch": {"shapes": {"x": [50, 1000]}, "params": {"p": 0.5}}}
    assert counterexample_dims(stat) == {"x.shape[0]": 50, "x.shape[1]": 1000}
    assert counterexample_dims(None) is None and counterexample_dims({"seed": 1}) is None


def test_progress_is_noted_where_the_environment_says(tmp_path, monkeypatch):
    from bench.testers.common import PROGRESS_ENV, note_progress

    note_progress("nowhere")  # unset: nothing is written, nothing fails
    path = tmp_path / "progress"
    monkeypatch.setenv(PROGRESS_ENV, str(path))
    run_cases([Case("first", {"N": 1}, lambda: None), Case("second", {"N": 2}, lambda: None)])
    assert path.read_text() == "second"


def test_kernelbench_order_misses_a_mutated_input_the_tutorial_order_sees(subjects):
    importlib.import_module("kernels_under_test.softmax")
    importlib.import_module("tests.zoo.zoo_softmax")
    bug = subjects("zoo_softmax_input_as_scratch")  # right output, but x is overwritten with exp(x - max)
    fixed = FixedShape()
    fixed.trials = 1
    assert not fixed.run(bug, seed=0, device="cpu", untestable=UNTESTABLE).failed
    grid = TutorialGrid().run(bug, seed=0, device="cpu", untestable={"bfloat16": "slow", "float16": "slow"})
    assert grid.failed and grid.case.endswith("float32")
