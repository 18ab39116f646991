"""First use without surprises (issue 14): what a new user meets before any cell runs.

Each test runs the plugin in a fresh pytest process, as a user would.
"""

from __future__ import annotations

import inspect
import json
import sys
import textwrap

import pytest

TOY = '''
import torch
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="toy")
def {name}(x):
    if x.dtype != torch.float32:
        raise TypeError(f"{name}: x.dtype={x.dtype}, expected float32")
    if not 1 <= x.shape[0] <= 16:
        raise ValueError(f"{name}: x.shape={tuple(x.shape)}, expected (N,) with 1 <= N <= 16")
    return x * 2
'''


def toy(name: str) -> str:
    return textwrap.dedent(TOY).replace("{name}", name)


def _results(pytester: pytest.Pytester, path: str = "conformance-results/results.json") -> dict:
    return json.loads((pytester.path / path).read_text())


# -- 1. pytest-xdist is optional ------------------------------------------


def test_plain_pytest_runs_without_xdist(pytester: pytest.Pytester) -> None:
    """Installed without pytest-xdist, the plugin must not break an unrelated test run."""
    pytester.makepyfile(test_unrelated="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)


def test_the_battery_runs_without_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(toy_subjects=toy("doubled"))
    pytester.makeini("[pytest]\nconformance_modules = toy_subjects\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--conformance-only", "-k", "layout and contiguous")
    result.assert_outcomes(passed=1)


def test_every_xdist_hook_is_optional() -> None:
    """A hook that only pytest-xdist specifies must be marked ``optionalhook=True``."""
    import triton_conformance.plugin as entry
    from triton_conformance.plugin import session

    for owner in (entry, session.ConformanceSession):
        for name, fn in inspect.getmembers(owner, callable):
            if name.startswith("pytest_xdist_") or name in ("pytest_configure_node", "pytest_testnodedown",
                                                            "pytest_handlecrashitem"):
                opts = getattr(fn, "pytest_impl", {})
                assert opts.get("optionalhook"), f"{owner.__name__}.{name} needs @pytest.hookimpl(optionalhook=True)"
