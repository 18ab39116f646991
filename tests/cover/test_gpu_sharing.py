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
from types import SimpleNamespace

import pytest

from triton_conformance.cli import main
from triton_conformance.running import nightly_per_gpu
from triton_conformance.model.outcomes import CellResult
from triton_conformance.options import EXIT_USAGE
from triton_conformance.plugin.settings import turns as _turns
from triton_conformance.plugin.items import ConformanceItem, gpu_turn
from triton_conformance.workers.gpus import GpuTurns, claim_gpu, workers_per_gpu

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


# -- the turn a cell takes ---------------------------------------------------


class FakeTurns:
    """Records which turn is held while the executor runs, and that it was left."""

    def __init__(self):
        self.holding: str | None = None
        self.taken: list[str] = []

    def _turn(self, kind: str):
        import contextlib

        @contextlib.contextmanager
        def turn():
            assert self.holding is None, "turns do not nest"
            self.holding = kind
            self.taken.append(kind)
            try:
                yield
            finally:
                self.holding = None
        return turn()

    def shared(self):
        return self._turn("shared")

    def exclusive(self):
        return self._turn("exclusive")


def _item(cell: str, turns, fail: bool = False):
    """What ConformanceItem.runtest uses of an item, with an executor that records the turn held meanwhile."""
    during: list[str | None] = []

    def run(subject, cell_name, seed=None):
        during.append(getattr(turns, "holding", None))
        if fail:
            raise RuntimeError("the executor failed")
        return CellResult(subject="toy", family="toy", cell=cell_name, outcome="honoured")

    owner = SimpleNamespace(run=SimpleNamespace(seed=None), executor=SimpleNamespace(run=run), turns=turns)
    item = SimpleNamespace(owner=owner, subject=SimpleNamespace(xfail=None), cell=cell, nodeid=f"::toy[{cell}]",
                           user_properties=[])
    return item, during


def test_a_performance_cell_runs_in_the_exclusive_turn_and_others_in_the_shared_one() -> None:
    from triton_conformance.conformance.kinds import kind_of

    assert kind_of("performance")[0].exclusive_gpu
    for cell, turn in [("performance", "exclusive"), ("layout:contiguous", "shared"), ("memory", "shared"),
                       ("dtype:float16", "shared")]:
        turns = FakeTurns()
        item, during = _item(cell, turns)
        ConformanceItem.runtest(item)
        assert during == [turn] and turns.taken == [turn] and turns.holding is None, cell
        assert dict(item.user_properties)["conformance_outcome"] == "honoured"


def test_only_the_performance_kind_takes_the_gpu_alone() -> None:
    from triton_conformance.conformance.kinds import registered_kinds

    assert [type(k).__name__ for k in registered_kinds() if k.exclusive_gpu] == ["PerformanceCell"]


def test_the_turn_is_left_when_the_executor_raises() -> None:
    turns = FakeTurns()
    item, during = _item("performance", turns, fail=True)
    with pytest.raises(RuntimeError):
        ConformanceItem.runtest(item)
    assert during == ["exclusive"] and turns.holding is None


def test_no_turn_without_a_shared_gpu() -> None:
    item, during = _item("performance", None)
    ConformanceItem.runtest(item)
    assert during == [None]
    with gpu_turn(None, "no-such-cell"):  # not even the kind is looked up
        pass


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
