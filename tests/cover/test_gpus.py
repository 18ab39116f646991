"""GPU claiming for xdist workers: lock files keyed by the run, released when the holder dies."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from triton_conformance.workers.gpus import claim_gpu, lock_dir, parse_gpus, visible_gpus
from triton_conformance.errors import ConformanceUsageError

HOLDER = textwrap.dedent("""
    import sys, time
    from triton_conformance.workers.gpus import claim_gpu
    claim = claim_gpu(sys.argv[1].split(","), sys.argv[2], workers=int(sys.argv[3]))
    print(claim.gpu, flush=True)
    time.sleep(120)
""")


def _holder(gpus: str, run: str, workers: int = 2) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, gpus, run, str(workers)], stdout=subprocess.PIPE,
                            text=True)
    return proc, proc.stdout.readline().strip()


@pytest.fixture
def run_key(tmp_path) -> str:
    # Unique per test and per session: other pytest sessions on this machine may run these tests too.
    return f"test-{tmp_path}"


def test_each_process_claims_a_different_gpu_and_a_dead_ones_gpu_is_free_again(run_key: str) -> None:
    first, gpu_a = _holder("g0,g1", run_key)
    second, gpu_b = _holder("g0,g1", run_key)
    try:
        assert {gpu_a, gpu_b} == {"g0", "g1"}
        first.kill()  # as hard as a crash: no cleanup runs
        first.wait()
        third, gpu_c = _holder("g0,g1", run_key)
        third.kill()
        third.wait()
        assert gpu_c == gpu_a
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait()


def test_more_workers_than_gpus_share_evenly_and_a_full_run_is_an_error(run_key: str) -> None:
    held = [claim_gpu(["g0", "g1"], run_key, workers=4) for _ in range(4)]
    try:
        assert [c.gpu for c in held] == ["g0", "g1", "g0", "g1"]
        with pytest.raises(ConformanceUsageError, match="every GPU slot of this run is taken"):
            claim_gpu(["g0", "g1"], run_key, workers=4)
    finally:
        for claim in held:
            claim.release()
    assert claim_gpu(["g0", "g1"], run_key, workers=4).slot == 0


def test_runs_do_not_share_locks(tmp_path) -> None:
    assert lock_dir("run-a") != lock_dir("run-b")
    # A key with separators stays one directory under the lock root once normalized (a plain startswith
    # passed for root/../../etc too).
    root = os.path.dirname(lock_dir("x"))
    assert os.path.dirname(os.path.normpath(lock_dir("../../etc"))) == root
    assert os.path.dirname(os.path.normpath(lock_dir("a/b"))) == root


@pytest.mark.parametrize(("text", "gpus"), [("2", ["0", "1"]), ("0,3", ["0", "3"]),
                                            ("GPU-8a1b-22,GPU-9c", ["GPU-8a1b-22", "GPU-9c"])])
def test_parse_gpus(text: str, gpus: list[str]) -> None:
    assert parse_gpus(text) == gpus


def test_a_lone_zero_names_gpu_0_since_no_run_has_zero_gpus() -> None:
    # found on the H200: the CLI passes --gpus 1 on as the id list "0"
    assert parse_gpus("0") == ["0"] and parse_gpus("1") == ["0"]


@pytest.mark.parametrize("text", ["", "0,0", "0,,1", "a b"])
def test_parse_gpus_rejects_with_the_option_named(text: str) -> None:
    with pytest.raises(ConformanceUsageError, match=r"--conformance-gpus="):
        parse_gpus(text)


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert visible_gpus() == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
    assert visible_gpus("3", where="--gpus") == ["0", "1", "2"]


def test_nightly_workers_share_the_cores_unless_the_user_chose(monkeypatch):
    from triton_conformance.running import share_cores

    monkeypatch.setattr("os.cpu_count", lambda: 32)
    env = {}
    assert share_cores(2, env) == "16" and env["OMP_NUM_THREADS"] == "16"
    assert share_cores(64, {}) == "1"
    assert share_cores(2, {"OMP_NUM_THREADS": "4"}) == "4"  # the user's own setting stands


def test_loadgroup_scheduling_groups_cells_by_subject():
    pytest.importorskip("xdist")
    from types import SimpleNamespace

    from triton_conformance.plugin.scheduling import SubjectGroupScheduling, subject_of

    assert subject_of("::add[layout:contiguous]") == "add"
    assert subject_of("::add[memory]@add") == "add"  # pytest < 9 keeps xdist's group suffix
    assert subject_of("tests/test_x.py::test_y[1]") is None
    sched = SubjectGroupScheduling.__new__(SubjectGroupScheduling)  # _split_scope needs only the parts
    sched.config, sched._part_of = SimpleNamespace(), {}  # no subject cut (tests/cover/test_splitting.py)
    scopes = {sched._split_scope(n) for n in ("::add[layout:contiguous]", "::add[dtype:float16]")}
    assert scopes == {"conformance:add"}
    assert sched._split_scope("::softmax[memory]") != sched._split_scope("::add[memory]")
    assert sched._split_scope("tests/test_x.py::test_y[1]@g") == "g"  # other tests: xdist's own rule
