"""Shards (issue 15 section 3): --conformance-shard=K/N splits the cells stably, and merge puts them together."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.plugin.shards import Shard, parse_shard, plan_shards, shard_loads

# Five pure-torch subjects of 24 cells each; plus_one is wrong past N = 3.
SUBJECTS = '''
import torch
from triton_conformance import Dim, Tensor, register

OPS = {"neg": lambda x: -x, "double": lambda x: x * 2, "square": lambda x: x * x, "half": lambda x: x / 2,
       "plus_one": lambda x: x + 1}

def _launcher(name, fn):
    def launcher(x):
        if x.dtype != torch.float32:
            raise TypeError(f"{name}: x.dtype={x.dtype}, expected float32")
        if not 0 <= x.shape[0] <= 32:
            raise ValueError(f"{name}: N={x.shape[0]}, expected N <= 32")
        out = fn(x)
        if name == "plus_one" and x.shape[0] > 3:
            out[-1] = 0.0
        return out
    return launcher

for name, fn in OPS.items():
    register(_launcher(name, fn), name=name, family="toy", module=__name__,
             inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")}, dims={"N": Dim(0, 32)}, oracle=fn)
'''
NAMES = ("double", "half", "neg", "plus_one", "square")


def _project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(toy_subjects=textwrap.dedent(SUBJECTS))
    pytester.makeconftest('def pytest_conformance_modules(config):\n    return ["toy_subjects"]\n')


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest_subprocess("--conformance-only", "--collect-only", "-q", *args)
    assert result.ret == 0, result.stderr.str()
    return [line.strip() for line in result.stdout.lines if line.startswith("::")]


# -- parsing ---------------------------------------------------------------------


@pytest.mark.parametrize("text", ["0/3", "4/3", "x", "1/0", "3", "1/2/3", "-1/2", "a/b", "1/"])
def test_a_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(ConformanceUsageError) as info:
        parse_shard(text, "--conformance-shard")
    assert str(info.value).startswith(f"--conformance-shard={text!r}, expected K/N")
    assert "\n" not in str(info.value)


def test_a_good_shard_parses() -> None:
    assert parse_shard("2/4") == Shard(2, 4) and str(parse_shard(" 1/1 ")) == "1/1"
    assert parse_shard(None) is None and parse_shard("") is None


@pytest.mark.parametrize("text", ["0/3", "4/3", "x"])
def test_pytest_and_the_command_refuse_a_bad_shard_in_one_line(pytester: pytest.Pytester, text: str) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess("--conformance-only", f"--conformance-shard={text}")
    assert result.ret == 4
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [f"ERROR: --conformance-shard={text!r}, expected K/N"
                      + errors[0].partition("expected K/N")[2]], errors
    run = pytester.run(sys.executable, "-m", "triton_conformance.cli", "run", "--shard", text)
    assert run.ret == 4  # the command's usage errors exit as pytest's do
    assert [line for line in run.stderr.lines if line.strip()] == [
        f"triton-conformance run: --shard={text!r}, expected K/N" + errors[0].partition("expected K/N")[2]]


# -- the plan --------------------------------------------------------------------


def _cells(subjects: dict[str, int]) -> list[tuple[str, str]]:
    return [(s, f"cell:{i}") for s, n in subjects.items() for i in range(n)]


def test_the_plan_is_stable_and_keeps_a_subjects_cells_together() -> None:
    cells = _cells({"a": 5, "b": 3, "c": 3, "d": 2, "e": 1})
    plan = plan_shards(cells, 2)
    assert plan == plan_shards(list(reversed(cells)), 2), "the order cells arrive in does not matter"
    assert plan == {"a": 1, "b": 2, "c": 2, "d": 1, "e": 2}  # longest first onto the lightest shard
    assert shard_loads(cells, plan, 2) == [7.0, 7.0]
    assert set(plan_shards(cells, 7).values()) == {1, 2, 3, 4, 5}, "more shards than subjects: some stay empty"


def test_the_plan_is_balanced_by_durations_when_given() -> None:
    cells = _cells({"a": 5, "b": 3, "c": 3, "d": 2, "e": 1})
    durations = {c: 0.1 for c in cells} | {("e", "cell:0"): 30.0}  # e's one cell is the slow one
    plan = plan_shards(cells, 2, durations)
    assert plan["e"] == 1 and {plan[s] for s in "abcd"} == {2}
    # A cell the durations file lacks weighs the median of those it has.
    missing = {c: d for c, d in durations.items() if c[0] != "a"}
    assert shard_loads(cells, plan_shards(cells, 2, missing), 2, missing) == pytest.approx([30.0, 1.3])


def test_shards_split_the_collection_and_deselect_the_rest(pytester: pytest.Pytester) -> None:
    _project(pytester)
    whole = _collected(pytester)
    assert len(whole) == 120
    first, second = _collected(pytester, "--conformance-shard=1/2"), _collected(pytester, "--conformance-shard=2/2")
    assert sorted(first + second) == sorted(whole) and not set(first) & set(second)
    subjects = [{name.partition("[")[0][2:] for name in shard} for shard in (first, second)]
    assert not subjects[0] & subjects[1], "a subject's cells stay on one shard"
    assert _collected(pytester, "--conformance-shard=1/2") == first, "the same split every time"
    result = pytester.runpytest_subprocess("--conformance-only", "--collect-only", "--conformance-shard=2/2")
    result.stdout.fnmatch_lines([f"conformance: shard 2/2: {len(subjects[1])} of 5 subjects, {len(second)} of "
                                 "120 cells, balanced by cells",
                                 f"*{len(first)} deselected*"])


def test_shards_follow_the_durations_file(pytester: pytest.Pytester) -> None:
    _project(pytester)
    old = {"schema": "triton-conformance/results", "version": 1, "environment": {"device": "interpreter"},
           "results": [{"subject": s, "cell": "layout:contiguous", "outcome": "honoured",
                        "duration_s": 100.0 if s == "square" else 1.0} for s in NAMES]}
    (pytester.path / "old.json").write_text(json.dumps(old))
    alone = _collected(pytester, "--conformance-shard=1/2", "--conformance-shard-durations=old.json")
    assert {name.partition("[")[0][2:] for name in alone} == {"square"}
    # The bare flag reuses the results file there, here the same durations.
    (pytester.path / "conformance-results").mkdir()
    (pytester.path / "conformance-results" / "results.json").write_text(json.dumps(old))
    assert _collected(pytester, "--conformance-shard=1/2", "--conformance-shard-durations") == alone
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-shard=1/2",
                                           "--conformance-shard-durations=missing.json")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --conformance-shard-durations='missing.json' does not exist*"])


def test_each_shard_runs_only_its_cells_and_records_its_shard(pytester: pytest.Pytester) -> None:
    _project(pytester)
    docs = []
    for k in (1, 2):
        result = pytester.runpytest_subprocess("--conformance-only", f"--conformance-shard={k}/2",
                                               f"--conformance-results=shard{k}.json")
        outcomes = result.parseoutcomes()
        docs.append(json.loads((pytester.path / f"shard{k}.json").read_text()))
        assert len(docs[-1]["results"]) == 120 - outcomes["deselected"]
        assert docs[-1]["environment"]["shard"] == f"{k}/2"
        assert docs[-1]["environment"]["device_label"] == "interpreter"
    cells = [(r["subject"], r["cell"]) for d in docs for r in d["results"]]
    assert len(cells) == len(set(cells)) == 120
