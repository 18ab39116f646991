"""Fleet runs on Ray (issue 15 section 4): a local cluster with simulated device labels.

Run with ``tox -e fleet`` (Ray is the optional extra ``[fleet]``); skipped where Ray is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.acceptance.test_shards import SUBJECTS

ray = pytest.importorskip("ray")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def project(tmp_path):
    (tmp_path / "toy_subjects.py").write_text(textwrap.dedent(SUBJECTS))
    (tmp_path / "conftest.py").write_text('def pytest_conformance_modules(config):\n    return ["toy_subjects"]\n')
    return tmp_path


def _cli(project, *argv: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(project)]), "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "triton_conformance.cli", *argv], cwd=project, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _matrix(doc: dict, device: str | None = None) -> set:
    return {(r["subject"], r["cell"], r["outcome"], json.dumps((r.get("counterexample") or {}).get("dims")))
            for r in doc["results"] if device is None or r.get("device") == device}


def _faults(tmp_path, **counts: int):
    folder = tmp_path / "faults"
    folder.mkdir()
    for key, n in counts.items():
        (folder / key).write_text(str(n))
    return str(folder)


def test_a_four_shard_fleet_gives_the_serial_matrix_on_each_device_and_retries_a_killed_worker(project) -> None:
    serial = _cli(project, "run", "--fresh", "--results", "serial.json")
    assert serial.returncode == 1, serial.stdout[-3000:] + serial.stderr[-3000:]  # plus_one is wrong
    whole = json.loads((project / "serial.json").read_text())
    faults = _faults(project, **{"interpreter 2of4": 1})  # the worker running shard 2/4 dies mid-run, once
    fleet = _cli(project, "fleet", "--simulate-devices", "--devices", "interpreter,H200", "--shards", "4",
                 "--local-cpus", "4", "-o", "fleet/matrix.json", "--faults", faults)
    assert fleet.returncode == 1, fleet.stdout[-3000:] + fleet.stderr[-3000:]
    doc = json.loads((project / "fleet" / "matrix.json").read_text())
    assert [d["device"] for d in doc["devices"]] == ["interpreter", "H200"]
    assert [sorted(d["shards"]) for d in doc["devices"]] == [["1/4", "2/4", "3/4", "4/4"]] * 2
    for device in ("interpreter", "H200"):
        assert _matrix(doc, device) == _matrix(whole), f"{device}: the fleet's matrix is the serial run's"
    assert doc["divergences"] == []
    assert len(doc["fleet"]["attempts"]["interpreter 2/4"]) == 2, "the killed task ran again"
    assert all(len(doc["fleet"]["attempts"][k]) == 1 for k in doc["fleet"]["tasks"] if k != "interpreter 2/4")
    assert doc["fleet"]["lost"] == [] and (project / "fleet" / "matrix.html").exists()
    assert sorted(os.listdir(project / "fleet" / "fleet-shards")) == sorted(
        f"{d}-{k}of4.json" for d in ("interpreter", "H200") for k in range(1, 5))


def test_a_shard_lost_twice_becomes_crash_cells_carrying_its_node_and_the_rest_is_kept(project) -> None:
    faults = _faults(project, **{"interpreter 1of2": 2})  # dies on its retry too
    fleet = _cli(project, "fleet", "--simulate-devices", "--shards", "2", "--local-cpus", "2",
                 "-o", "out/matrix.json", "--faults", faults)
    assert fleet.returncode == 1
    assert "fleet: interpreter 1/2: lost (" in fleet.stdout
    doc = json.loads((project / "out" / "matrix.json").read_text())
    assert "devices" not in doc, "one device: an ordinary document"
    lost = [r for r in doc["results"] if r.get("finding") == "fleet-task-lost"]
    kept = [r for r in doc["results"] if r.get("finding") != "fleet-task-lost"]
    assert len(lost) + len(kept) == 120 and lost and kept
    assert {r["outcome"] for r in lost} == {"crash"}
    assert not {r["subject"] for r in lost} & {r["subject"] for r in kept}, "whole subjects are lost or kept"
    nodes = lost[0]["details"]["nodes"]
    assert len(nodes) == 2 and all(nodes) and lost[0]["details"]["hosts"][0] in lost[0]["message"]
    assert doc["fleet"]["lost"] == ["interpreter 1/2"]


def test_the_fleet_refuses_to_merge_shards_of_different_commits(project, tmp_path) -> None:
    from triton_conformance.fleet.driver import ShardTask, crash_document
    from triton_conformance.reports.combine import MergeConflict, merge_results

    task = ShardTask("interpreter", "1/2", "interpreter")
    a = crash_document(task, [("neg", "memory")], None, [{"node_id": "n1", "host": "h1"}], "WorkerCrashedError")
    b = json.loads(json.dumps(a))
    b["environment"].update(commit="0000000", shard="2/2")
    b["results"][0]["subject"] = "half"
    with pytest.raises(MergeConflict, match="commit differs"):
        merge_results([("a.json", a), ("b.json", b)])
