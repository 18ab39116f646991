"""Hooks that a conftest.py or plugin can implement."""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_conformance_modules(config):
    """Return module names that declare subjects; they are imported after the device is set.

    Import kernels here rather than at the top of conftest.py, so that the
    interpreter can be switched on first and unit-test runs stay light::

        def pytest_conformance_modules(config):
            return ["kernels_under_test.softmax", "kernels_under_test.gemv"]
    """

@pytest.hookspec
def pytest_conformance_result(config, result):
    """Called on the controller with each cell's :class:`CellResult` as it arrives::

        def pytest_conformance_result(config, result):
            if result.outcome == "unsafe":
                print("unsafe:", result.subject, result.cell)
    """
