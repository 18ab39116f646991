"""The session is built from its config, as pytest-xdist builds ``DSession(config)``: it reads its options.

One in-process configuration only: the in-process pytester restores ``sys.modules`` after each test, and
torch cannot be imported a second time into one process.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

import triton_conformance.plugin as entry
from triton_conformance.plugin.session import ConformanceSession
from triton_conformance.plugin.shards import Shard

_SUBJECTS = """
from triton_conformance import Dim, Tensor, register

register(lambda x: -x, name="cover_session_config", module=__name__, inputs={"x": Tensor(("N",))},
         dims={"N": Dim(0, 8)}, oracle=lambda x: -x)
"""


@pytest.fixture
def modules_imported_by_the_configuration():
    """Keeps what the configuration imported (triton, the compat layer) past pytester's restore of
    ``sys.modules``: requested before ``pytester``, it is torn down after it.  Without it, later tests in
    this process see a second triton (its ``@triton.jit`` raised "outside of the scope of a kernel")."""
    imported: dict = {}
    yield imported
    for name, module in imported.items():
        sys.modules.setdefault(name, module)


def test_the_session_reads_its_options_and_hands_each_worker_its_part(
        modules_imported_by_the_configuration: dict, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(session_subjects=_SUBJECTS)
    pytester.makeconftest("def pytest_conformance_modules(config):\n    return ['session_subjects']\n")
    results = pytester.path / "out" / "r.json"
    config = pytester.parseconfigure("--conformance", "--conformance-canary=off", "--conformance-profile=dev",
                                     "--conformance-seed=1234", "--conformance-device-label=lab-h200",
                                     "--conformance-shard=2/3", f"--conformance-results={results}",
                                     "--conformance-fresh")
    modules_imported_by_the_configuration.update(sys.modules)
    session = config.pluginmanager.get_plugin("triton_conformance_session")
    assert isinstance(session, ConformanceSession)
    assert (session.device_label, session.shard, session.fresh) == ("lab-h200", Shard(2, 3), True)
    assert session.results_path == str(results) and session.balance == "cells"
    assert session.executor.sanitizer is None and session.turns is None  # no sanitizer, no GPU shared
    assert session.run.seed == 1234
    # The one pytest_configure_node (the session's): the run's seed and the controller's shard plan; no GPUs
    # to claim from here.
    node = SimpleNamespace(config=config, workerinput={})
    session.pytest_configure_node(node)
    # The plan covers every subject registered in this process (other tests' too, under xdist), so which of the
    # 3 shards holds this one depends on them: the worker gets the controller's plan, whole.
    assert node.workerinput["conformance_seed"] == 1234
    plan = node.workerinput["conformance_shard_plan"]
    assert plan == session.shard_plan() and plan["cover_session_config"] in (1, 2, 3)
    assert not hasattr(entry, "pytest_configure_node"), "one pytest_configure_node: the session's"
