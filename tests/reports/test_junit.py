"""JUnit XML carries each cell's subject, cell, outcome and finding as properties, under xdist too."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.reports._toy import ARGS, CELLS, XDIST, make_project


def test_junit_properties_under_xdist(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest_subprocess(*ARGS, *XDIST, "--junitxml=junit.xml")
    assert result.ret == 0, result.stdout.str()  # the only failures are the known bug's (xfail)
    result.stdout.fnmatch_lines(["ALLURE-HOOKS False"])  # no --alluredir: no Allure hooks
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    seen = {}
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        seen[case.get("name")] = props
        assert case.get("name") == f"{props['conformance_subject']}[{props['conformance_cell']}]"
    assert set(seen) == {f"{s}[{c}]" for s in ("toy_double", "toy_double_off_by_one") for c in CELLS}
    outcomes = {name: (p["conformance_outcome"], p["conformance_finding"]) for name, p in seen.items()}
    assert outcomes == {
        "toy_double[layout:contiguous]": ("honoured", ""),
        "toy_double[layout:transposed]": ("skipped", ""),
        "toy_double[dtype:float16]": ("rejected", ""),
        "toy_double_off_by_one[layout:contiguous]": ("wrong", "mismatch"),
        "toy_double_off_by_one[layout:transposed]": ("skipped", ""),
        "toy_double_off_by_one[dtype:float16]": ("rejected", ""),
    }
