"""Several xdist workers on one GPU: how many the nightly starts, and the turns they take on it.

The turns are tested with real processes (flock locks are per open file, and
what matters is another process waiting): each holder logs when it asks,
gets in and leaves; a test lets it leave by creating its release file.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from triton_conformance.cli import main
from triton_conformance.running import nightly_per_gpu
from triton_conformance.options import EXIT_USAGE
from triton_conformance.plugin.settings import turns as _turns
from triton_conformance.conformance import gpu_turns
from triton_conformance.conformance.gpu_turns import GpuTurns
from triton_conformance.workers.gpus import claim_gpu, workers_per_gpu

HOLDER = textwrap.dedent("""
    import os, sys, time
    from triton_conformance.workers.gpus import GpuTurns
    directory, gpu, mode, name, log = sys.argv[1:6]

    def note(event):
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{name} {event}\\n".encode())
        os.close(fd)

    turns = GpuTurns(directory, gpu)
    note("asks")
    with getattr(turns, mode)():
        note("in")
        while not os.path.exists(os.path.join(directory, "release-" + name)):
            time.sleep(0.002)
        note("out")
""")
SETTLE_S = 0.15  # time for a holder that should be blocked to get in anyway if the lock let it
WAIT_S = 5.0  # the longest any expected event may take to appear


class Holders:
    """Processes taking turns on one GPU, and the log of what they did."""

    def __init__(self, directory: str):
        self.directory, self.log = directory, os.path.join(directory, "turns.log")
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, mode: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, self.directory, "g0", mode, name, self.log])
        self.procs[name] = proc
        return proc

    def events(self) -> list[str]:
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().split("\n")[:-1]

    def wait_for(self, event: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while event not in self.events():
            assert time.monotonic() < deadline, f"no {event!r} in {self.events()}"
            time.sleep(0.002)

    def release(self, name: str) -> None:
        open(os.path.join(self.directory, "release-" + name), "w").close()

    def gate_taken(self) -> bool:
        """Whether someone holds the gate exclusively (an exclusive cell running or waiting its turn)."""
        fd = os.open(GpuTurns(self.directory, "g0").gate, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def wait_at_gate(self) -> None:
        deadline = time.monotonic() + WAIT_S
        while not self.gate_taken():
            assert time.monotonic() < deadline, f"the exclusive holder never took the gate: {self.events()}"
            time.sleep(0.002)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait()


@pytest.fixture
def holders(tmp_path):
    found = Holders(str(tmp_path))
    yield found
    found.close()


def test_shared_turns_run_together(holders: Holders) -> None:
    holders.start("a", "shared")
    holders.wait_for("a in")
    holders.start("b", "shared")
    holders.wait_for("b in")  # while a is still in
    assert "a out" not in holders.events()


def test_an_exclusive_turn_waits_until_a_shared_holder_leaves(holders: Holders) -> None:
    holders.start("a", "shared")
    holders.wait_for("a in")
    holders.start("x", "exclusive")
    holders.wait_for("x asks")
    holders.wait_at_gate()
    time.sleep(SETTLE_S)
    assert "x in" not in holders.events(), "the exclusive turn began beside a shared one"
    holders.release("a")
    holders.wait_for("x in")
    events = holders.events()
    assert events.index("a out") < events.index("x in"), events


def test_a_waiting_exclusive_turn_goes_before_a_later_shared_one(holders: Holders) -> None:
    holders.start("a", "shared")
    holders.wait_for("a in")
    holders.start("x", "exclusive")
    holders.wait_at_gate()  # x waits for a
    holders.start("b", "shared")
    holders.wait_for("b asks")
    time.sleep(SETTLE_S)
    assert "b in" not in holders.events(), "a new shared turn overtook the waiting exclusive one"
    holders.release("a")
    holders.wait_for("x in")
    time.sleep(SETTLE_S)
    assert "b in" not in holders.events(), "a shared turn began while the exclusive one ran"
    holders.release("x")
    holders.release("b")
    holders.wait_for("b out")
    events = holders.events()
    assert events.index("a out") < events.index("x in") < events.index("x out") < events.index("b in"), events


@pytest.mark.parametrize(("killed", "waiter"), [("exclusive", "shared"), ("shared", "exclusive")])
def test_a_holder_killed_in_its_turn_gives_the_gpu_back(holders: Holders, killed: str, waiter: str) -> None:
    victim = holders.start("dead", killed)
    holders.wait_for("dead in")
    holders.start("next", waiter)
    holders.wait_for("next asks")
    time.sleep(SETTLE_S)
    assert "next in" not in holders.events()
    os.kill(victim.pid, signal.SIGKILL)  # no finally runs: only the kernel can drop its locks
    victim.wait()
    holders.wait_for("next in")
    assert "dead out" not in holders.events()


def test_a_turn_is_released_when_the_body_raises(tmp_path) -> None:
    turns = GpuTurns(str(tmp_path), "GPU-1a/2")
    with pytest.raises(RuntimeError):
        with turns.exclusive():
            raise RuntimeError("the cell's worker died")
    for path in (turns.gate, turns.use):
        assert os.path.dirname(path) == str(tmp_path)  # the id made safe: one file name
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the turn kept its lock
        finally:
            os.close(fd)


# -- how many workers per GPU ------------------------------------------------


@pytest.mark.parametrize(("cpus", "gpus", "per_gpu"), [(16, 1, 12), (8, 1, 6), (2, 1, 1), (128, 8, 12),
                                                        (64, 1, 12), (32, 2, 12), (16, 2, 6), (4, 4, 1),
                                                        (None, 1, 1)])
def test_workers_per_gpu_is_three_quarters_of_the_cores_per_gpu_between_1_and_12(cpus, gpus, per_gpu) -> None:
    assert workers_per_gpu(cpus, gpus) == per_gpu


def test_the_option_takes_a_positive_number_or_auto() -> None:
    assert nightly_per_gpu("auto", 16, 1) == 12 and nightly_per_gpu(None, 8, 1) == 6
    assert nightly_per_gpu("3", 2, 1) == 3
    for bad in ("0", "-1", "two", "", "1.5"):
        assert nightly_per_gpu(bad, 16, 1) is None, bad


@pytest.fixture
def nightly(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    """Run ``triton-conformance nightly ARGS`` up to pytest: (exit code, pytest argv or None, stdout, stderr)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # share_cores sets it only if unset; this keeps it out of os.environ
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    seen: list[list[str]] = []
    monkeypatch.setattr("triton_conformance.running._pytest", lambda command, argv, baseline: seen.append(argv) or 0)

    def call(*argv: str, cpus: int = 2):
        monkeypatch.setattr("os.cpu_count", lambda: cpus)
        code = main(["nightly", *argv])
        out, err = capsys.readouterr()
        return code, (seen.pop() if seen else None), out, err

    return call


def _workers(argv: list[str]) -> int:
    return int(argv[argv.index("-n") + 1])


def test_nightly_starts_workers_per_gpu_times_the_gpus(nightly) -> None:
    code, argv, out, _ = nightly("--gpus", "g0,g1", "--workers-per-gpu", "2")
    assert code == 0 and _workers(argv) == 4
    assert "nightly: 4 worker(s) over GPUs ['g0', 'g1'], 2 per GPU," in out
    code, argv, out, _ = nightly("--gpus", "g0", cpus=16)  # auto
    assert code == 0 and _workers(argv) == 12 and "12 per GPU" in out
    code, argv, _, _ = nightly("--gpus", "g0,g1", cpus=16)
    assert code == 0 and _workers(argv) == 12
    code, argv, out, _ = nightly("--gpus", "g0,g1", "--workers-per-gpu", "1", cpus=64)
    assert code == 0 and _workers(argv) == 2 and "1 per GPU" in out


def test_an_explicit_n_wins_over_workers_per_gpu(nightly) -> None:
    code, argv, out, _ = nightly("--gpus", "g0,g1", "--workers-per-gpu", "3", "-n", "3")
    assert code == 0 and _workers(argv) == 3
    assert "3 worker(s)" in out and "up to 2 per GPU" in out


@pytest.mark.parametrize("bad", ["0", "many", "-2"])
def test_a_bad_workers_per_gpu_is_a_one_line_usage_error(nightly, bad: str) -> None:

    code, argv, _, err = nightly("--gpus", "g0", f"--workers-per-gpu={bad}")
    assert code == EXIT_USAGE and argv is None
    assert err.strip().splitlines() == [
        f"triton-conformance nightly: --workers-per-gpu={bad!r}, expected a positive number of workers per GPU "
        "or 'auto'"]


def test_only_nightly_has_the_option(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--workers-per-gpu", "2"])
    assert info.value.code == EXIT_USAGE  # argparse's own usage errors too
    assert "unrecognized arguments: --workers-per-gpu" in capsys.readouterr().err


# -- turns example by example ------------------------------------------------

CELL = textwrap.dedent("""
    import os, sys, time
    from triton_conformance.conformance import gpu_turns
    from triton_conformance.conformance.gpu_turns import GpuTurns
    directory, name, log, examples = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

    def note(event):
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{name} {event}\\n".encode())
        os.close(fd)

    gpu_turns.share(GpuTurns(directory, "g0"))
    with gpu_turns.cell():
        for i in range(examples):
            gpu_turns.at_example()
            note(f"example {i}")
            time.sleep(0.02)
    note("done")
""")


def _held(path: str, mode: int) -> bool:
    """Whether a lock of another open file on ``path`` keeps ``mode`` (LOCK_SH / LOCK_EX) from being taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.fixture
def installed(tmp_path):
    """This process's turns on a GPU of a run in ``tmp_path``; uninstalled after."""
    turns = GpuTurns(str(tmp_path), "g0")
    gpu_turns.share(turns)
    yield turns
    gpu_turns.share(None)


def test_a_timing_waits_for_the_examples_running_not_for_the_rest_of_their_cell(holders: Holders) -> None:
    cell = subprocess.Popen([sys.executable, "-c", CELL, holders.directory, "a", holders.log, "60"])
    holders.procs["a"] = cell
    holders.wait_for("a example 2")
    holders.start("x", "exclusive")
    holders.wait_for("x in")
    time.sleep(SETTLE_S)
    inside = holders.events()
    holders.release("x")
    holders.wait_for("a done")
    events = holders.events()
    assert "a done" not in inside and "a example 59" not in inside, "the timing waited for the whole cell"
    during = events[events.index("x in"):events.index("x out")]
    assert not [e for e in during if e.startswith("a example")], f"an example began while the GPU was timed: {during}"
    assert events.index("x out") < events.index("a example 59"), events  # the cell went on after


def test_a_timing_inside_a_cell_gives_its_shared_turn_up_and_takes_it_again(installed: GpuTurns) -> None:
    with gpu_turns.cell():
        assert _held(installed.use, fcntl.LOCK_EX) and not _held(installed.use, fcntl.LOCK_SH)
        with gpu_turns.exclusive():
            assert _held(installed.use, fcntl.LOCK_SH) and _held(installed.gate, fcntl.LOCK_SH)
        assert _held(installed.use, fcntl.LOCK_EX) and not _held(installed.gate, fcntl.LOCK_SH)
    assert not _held(installed.use, fcntl.LOCK_EX), "the cell kept its turn after it ended"


def test_a_cell_gives_its_turn_back_when_it_raises(installed: GpuTurns) -> None:
    with pytest.raises(RuntimeError):
        with gpu_turns.cell():
            with gpu_turns.exclusive():
                raise RuntimeError("the timed launch failed")
    assert not _held(installed.use, fcntl.LOCK_EX) and not _held(installed.gate, fcntl.LOCK_EX)


def test_without_installed_turns_nothing_is_locked(tmp_path) -> None:
    gpu_turns.share(None)
    with gpu_turns.cell(), gpu_turns.exclusive():
        gpu_turns.at_example()
    assert not os.listdir(tmp_path)


def test_the_timer_times_in_the_exclusive_turn_after_a_warm_up_beside_the_others(installed, monkeypatch) -> None:
    from triton_conformance.conformance.kinds.performance.peaks import CudaEventTimer

    seen: list[tuple[str, bool]] = []
    monkeypatch.setattr("torch.cuda.synchronize", lambda *a: None)
    monkeypatch.setattr(CudaEventTimer, "_timed", lambda self, fn, n: [fn() or 1.0 for _ in range(n)])
    timer = CudaEventTimer(rep_ms=3.0, min_reps=2, max_reps=3)
    with gpu_turns.cell():
        timer(lambda: seen.append(("call", _held(installed.use, fcntl.LOCK_SH))))
    assert seen[0] == ("call", False), "the warm-up (compiles, autotuning) took the GPU alone"
    assert len(seen) == 1 + 5 + 3 and all(alone for _, alone in seen[1:]), seen


def test_every_example_of_a_cell_passes_through_the_gate(installed, monkeypatch) -> None:
    from triton_conformance import Dim, Tensor, register
    from triton_conformance.conformance.gpu_turns import ExampleTurns
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    subject = register(lambda x: x * 2, name="turns_doubled", inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)},
                       oracle=lambda x: x * 2)
    entered: list[bool] = []
    through = ExampleTurns.at_example
    monkeypatch.setattr(ExampleTurns, "at_example", lambda self: entered.append(True) or through(self))
    result = run_cell(subject, "layout:contiguous", config=run_config(profile="ci"))
    assert result.outcome == "honoured" and result.examples >= 5
    assert len(entered) >= result.examples + 1, (len(entered), result.examples)  # the cell's start, each example
    assert not gpu_turns.current().holding and not _held(installed.use, fcntl.LOCK_EX)


def test_the_worker_takes_turns_only_on_a_gpu_it_shares_on_cuda(tmp_path) -> None:
    run_key = f"test-{tmp_path}"
    alone = claim_gpu(["g0", "g1"], run_key + "-alone", workers=2)
    shared = [claim_gpu(["g0"], run_key, workers=2) for _ in range(2)]
    try:
        assert alone.slots == 1 and alone.turns() is None and _turns(alone, "cuda") is None
        assert [c.slots for c in shared] == [2, 2]
        turns = [_turns(c, "cuda") for c in shared]
        assert all(isinstance(t, GpuTurns) for t in turns)
        assert turns[0].gate == turns[1].gate and os.path.dirname(turns[0].use) == os.path.dirname(shared[0].path)
        assert _turns(shared[0], "interpreter") is None and _turns(None, "cuda") is None
    finally:
        for claim in [alone, *shared]:
            claim.release()


def test_the_cell_worker_takes_the_turns_its_pool_gives_it(tmp_path) -> None:
    import importlib
    import threading

    from tests.cover import _turns_subject
    from triton_conformance.model.config import run_config
    from triton_conformance.model.subject import get_subject
    from triton_conformance.workers.executor import CellExecutor

    importlib.reload(_turns_subject)  # registered again after an earlier test's subjects were dropped
    turns = GpuTurns(str(tmp_path), "g0")
    executor = CellExecutor(run_config(), turns=turns)
    results: list = []
    try:
        executor.prestart()
        assert executor._pool._get().wait_ready() is None  # started: a cell of it now takes well under a second
        run = threading.Thread(target=lambda: results.append(
            executor.run(get_subject("turns_doubled_module"), "layout:contiguous")))
        with turns.exclusive():  # this test times the GPU: the worker's cell waits at the gate
            run.start()
            run.join(timeout=3.0)
            assert not results, "the cell worker ran its cell while another process had the GPU alone"
        run.join(timeout=120)
    finally:
        executor.close()
    assert results and results[0].outcome == "honoured", results


def test_a_performance_cell_times_everything_in_one_turn_alone_after_its_warm_ups(installed, monkeypatch) -> None:
    from triton_conformance import Dim, Performance, Tensor, register
    from triton_conformance.conformance import gpu_turns as turns_module
    from triton_conformance.conformance.backend import Backend
    from triton_conformance.conformance.kinds.performance.cell import run_performance_cell
    from triton_conformance.conformance.kinds.performance.peaks import FixedPeaks

    entered: list[int] = []
    enter = turns_module._enter_exclusive
    monkeypatch.setattr(turns_module, "_enter_exclusive", lambda gate, use: entered.append(1) or enter(gate, use))
    calls: list[tuple[str, bool]] = []

    def timed(name):
        def call(x, y):
            calls.append((name, _held(installed.use, fcntl.LOCK_SH)))
            return x + y
        return call

    class Timer:
        description = "a timer that asks for its own exclusive turn, as CudaEventTimer does"

        def __call__(self, fn):
            with gpu_turns.exclusive():
                fn()
                return [1.0] * 3

    subject = register(timed("kernel"), name="turns_perf_add", inputs={"x": Tensor(("N",)), "y": Tensor(("N",))},
                       dims={"N": Dim(1, 4096)}, oracle=lambda x, y: x + y,
                       performance=Performance(dims={"N": 1000}, bytes=lambda dims, dtypes: 12 * dims["N"],
                                               baseline=timed("baseline")))
    with gpu_turns.cell():
        result = run_performance_cell(subject, backend=Backend(name="cuda", device="cpu"), timer=Timer(),
                                      peaks=FixedPeaks(bandwidth=4000.0))
    assert result.outcome == "honoured", result.message
    assert entered == [1], "each timing waited for the GPU on its own"
    # After the correctness example's calls: the two warm-ups beside the others, then the two timings alone.
    assert [name for name, _ in calls[-4:]] == ["kernel", "baseline", "kernel", "baseline"], calls
    assert [alone for _, alone in calls[-4:]] == [False, False, True, True], calls
