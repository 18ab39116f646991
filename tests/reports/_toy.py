"""A toy project for pytester runs: pure-torch subjects, so a run takes seconds, not minutes."""

from __future__ import annotations

import textwrap

import pytest

SUBJECTS = '''
import torch
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="toy")
def toy_double(x):
    if x.dtype != torch.float32:
        raise TypeError(f"toy_double: x.dtype={x.dtype}, expected float32")
    if not 1 <= x.shape[0] <= 64:
        raise ValueError(f"toy_double: N={x.shape[0]}, expected 1 <= N <= 64")
    return x * 2

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 64)}, oracle=lambda x: x * 2, family="toy", xfail="drops the last element past 5")
def toy_double_off_by_one(x):
    if x.dtype != torch.float32:
        raise TypeError(f"toy_double_off_by_one: x.dtype={x.dtype}, expected float32")
    if not 1 <= x.shape[0] <= 64:
        raise ValueError(f"toy_double_off_by_one: N={x.shape[0]}, expected 1 <= N <= 64")
    out = x * 2
    if x.shape[0] > 5:
        out[-1] = 0.0
    return out
'''

# A few cells of each kind: honoured, rejected (float16), skipped (transposed, 1-D), wrong.
SELECTION = "contiguous or transposed or (float16 and not bfloat16)"
CELLS = {"layout:contiguous", "layout:transposed", "dtype:float16"}


CONFTEST = """
def pytest_conformance_modules(config):
    return ["toy_subjects"]


def pytest_terminal_summary(terminalreporter, config):
    # Whether the plugin registered its Allure hooks in this (controller) process.
    terminalreporter.write_line(f"ALLURE-HOOKS {config.pluginmanager.has_plugin('triton_conformance_allure')}")
"""
# Cells run in the pytest process itself: these runs test the report plumbing, not isolation.
ARGS = ("--conformance-only", "--conformance-isolation=none", "-k", SELECTION, "-p", "no:cacheprovider")
XDIST = ("-p", "xdist", "-n", "2")


def make_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(toy_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest(CONFTEST)
