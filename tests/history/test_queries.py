"""What the history answers, over runs recorded here: trend, new since green, flaky, slower, first-bad (in a
scratch git repository), the CLI's JSON, and the report's history section."""

from __future__ import annotations

import json
import subprocess

import pytest

from triton_conformance.history import queries
from triton_conformance.history.bisect import first_bad
from triton_conformance.history.flakes import flaky
from triton_conformance.history.section import history_section
from triton_conformance.history.store import HistoryStore


def _doc(outcomes: dict[str, str], *, device: str = "interpreter", durations: dict | None = None,
         details: dict | None = None) -> dict:
    results = []
    for name, outcome in outcomes.items():
        subject, _, cell = name.partition("|")
        failing = outcome not in ("honoured", "rejected", "skipped", "accepted")
        results.append({"subject": subject, "family": subject, "cell": cell, "outcome": outcome,
                        "finding": "mismatch" if failing else None, "reproducer": "raise SystemExit(1)" if failing
                        else None, "duration_s": (durations or {}).get(name, 1.0), "compiles": 2,
                        "details": (details or {}).get(name, {})})
    return {"environment": {"device": device, "device_label": device, "seed": 7}, "results": results}


@pytest.fixture
def store(store_url: str):  # noqa: ANN201
    with HistoryStore(store_url) as s:
        yield s


def test_new_since_green_names_new_failures_passes_and_changed_findings(store: HistoryStore) -> None:
    store.record(_doc({"a|x": "honoured", "a|y": "honoured", "b|z": "wrong"}), git={"commit": "c1"}, started=1)
    green = store.record(_doc({"a|x": "honoured", "a|y": "honoured"}), git={"commit": "c2"}, started=2)
    store.record(_doc({"a|x": "wrong"}, device="H200"), git={"commit": "c3"}, started=3)  # another device
    store.record(_doc({"a|x": "unsafe", "a|y": "honoured", "b|z": "honoured"}), git={"commit": "c4"}, started=4)
    out = queries.new_since_green(store, device="interpreter")
    assert out["baseline"]["id"] == green
    assert [e["cell"] for e in out["new_failures"]] == ["a[x]"]
    assert out["new_failures"][0]["then"]["outcome"] == "honoured"
    assert out["new_passes"] == [] and out["changed_findings"] == []
    h200 = queries.new_since_green(store, device="H200")
    assert h200["baseline"] is None and [e["cell"] for e in h200["new_failures"]] == ["a[x]"]


def test_trend_lists_the_last_runs_oldest_first(store: HistoryStore) -> None:
    for i, outcome in enumerate(["honoured", "wrong", "honoured", "crash"]):
        store.record(_doc({"a|x": outcome, "a|y": "honoured"}), git={"commit": f"c{i}"}, started=i)
    out = queries.trend(store, "a[x]", last=3)
    assert [r["commit"] for r in out["runs"]] == ["c1", "c2", "c3"]
    assert [c["outcome"] for c in out["cells"]["a[x]"]] == ["wrong", "honoured", "crash"]
    assert set(queries.trend(store, "a", last=2)["cells"]) == {"a[x]", "a[y]"}


def test_flaky_counts_flips_at_one_commit_and_flags_a_stochastic_rate_improbable_under_its_declared_one(
        store: HistoryStore) -> None:
    stochastic = {"d|rate": {"alpha_check": 0.01, "tests": [{}, {}]}}  # declared rate 0.02
    for i in range(10):
        store.record(_doc({"a|x": "wrong" if i == 3 else "honoured", "d|rate": "wrong" if i < 4 else "honoured",
                           "a|y": "honoured"}, details=stochastic), git={"commit": "same"}, started=i)
    store.record(_doc({"a|y": "wrong"}), git={"commit": "other"}, started=20)  # alone at its commit: no flake
    rows = {r["cell"]: r for r in flaky(store)}
    assert set(rows) == {"a[x]", "d[rate]"}
    assert (rows["a[x]"]["flips"], rows["a[x]"]["runs"], rows["a[x]"]["flagged"]) == (1, 10, True)
    assert rows["a[x]"]["outcomes"] == {"honoured": 9, "wrong": 1}
    assert rows["d[rate]"]["false_positive_rate"] == pytest.approx(0.02)
    # 4 of 10 at 0.02: P(X >= 4) = sum_k C(10, k) 0.02^k 0.98^(10-k), about 3.05e-5
    assert rows["d[rate]"]["p_value"] == pytest.approx(3.05e-5, rel=0.01) and rows["d[rate]"]["flagged"]
    everything = {r["cell"] for r in flaky(store, include_stable=True)}
    assert "a[y]" in everything


def test_a_stochastic_cell_flipping_at_its_declared_rate_is_not_flagged(store: HistoryStore) -> None:
    declared = {"d|rate": {"alpha_check": 0.05, "tests": [{}, {}]}}  # 0.1
    for i in range(20):
        store.record(_doc({"d|rate": "wrong" if i == 0 else "honoured"}, details=declared),
                     git={"commit": "same"}, started=i)
    (row,) = flaky(store)
    assert row["rate"] == pytest.approx(0.05) and row["p_value"] == 1.0 and not row["flagged"]


def test_one_flip_in_50_runs_is_no_flag_when_the_declared_rate_makes_it_plausible(store: HistoryStore) -> None:
    # The rate 1/50 is 20 x the declared 1e-3, but P(at least 1 of 50) = 1 - 0.999^50 = 0.049: not improbable.
    declared = {"d|rate": {"alpha_check": 1e-3, "tests": [{}]}}
    for i in range(50):
        store.record(_doc({"d|rate": "wrong" if i == 7 else "honoured"}, details=declared),
                     git={"commit": "same"}, started=i)
    (row,) = flaky(store)
    assert (row["flips"], row["runs"]) == (1, 50) and row["p_value"] == pytest.approx(1 - 0.999 ** 50)
    assert not row["flagged"]


def test_the_flag_level_is_split_over_the_stochastic_cells_tested(store: HistoryStore) -> None:
    # 3 of 10 at a declared 0.02: p = 8.6e-4, below 0.01 alone, above 0.01 / 20 among 20 stochastic cells.
    names = ["d|rate"] + [f"e|c{i}" for i in range(19)]
    declared = {n: {"alpha_check": 0.02, "tests": [{}]} for n in names}
    for i in range(10):
        store.record(_doc({n: "wrong" if n == "d|rate" and i < 3 else "honoured" for n in names},
                          details=declared), git={"commit": "same"}, started=i)
    (alone,) = flaky(store, names=["d"])
    assert alone["p_value"] == pytest.approx(8.64e-4, rel=0.01) and alone["flagged"]
    (among,) = flaky(store)
    assert among["level"] == pytest.approx(0.01 / 20) and not among["flagged"]


def test_the_flake_window_is_each_devices_newest_runs(store: HistoryStore) -> None:
    for i, outcome in enumerate(["wrong", "honoured", "honoured", "honoured"]):
        store.record(_doc({"a|x": outcome}), git={"commit": "same"}, started=i)
    store.record(_doc({"a|x": "wrong"}, device="H200"), git={"commit": "same"}, started=0)
    store.record(_doc({"a|x": "honoured"}, device="H200"), git={"commit": "same"}, started=1)
    assert {(r["device"], r["runs"]) for r in flaky(store, last=None)} == {("interpreter", 4), ("H200", 2)}
    # the interpreter's oldest run (its only flip) is out of its window of 3; H200's 2 are both in
    assert [(r["device"], r["runs"], r["flips"]) for r in flaky(store, last=3)] == [("H200", 2, 1)]
    with pytest.raises(ValueError, match=r"level=1.5, expected a probability"):
        flaky(store, level=1.5)


def test_the_flake_count_from_the_tallies_is_the_count_from_the_cells(store: HistoryStore) -> None:
    # 3 devices, 90 runs at 5 commits (one outside git) in shuffled order, cells left out of some runs, 3 of
    # them stochastic: every window below has commits whose runs are partly in it (counted from the cells)
    # beside whole ones (from the tallies); both ways must give the same rows.
    import random

    rnd = random.Random(5)
    names = [f"s{i % 3}|c{i}" for i in range(9)]
    declared = {n: {"alpha_check": 0.01 * (k + 1), "tests": [{}]} for k, n in enumerate(names[:3])}
    for i in range(90):
        doc = _doc({n: rnd.choice(["honoured"] * 6 + ["wrong", "crash", "skipped"]) for n in names
                    if rnd.random() < 0.85}, device=f"d{i % 3}", details=declared)
        store.record(doc, git={"commit": rnd.choice(["c1", "c2", "c3", "c4", None])}, started=rnd.random() * 100)
    partial = 0
    for device in (None, "d1"):
        for last in (None, 1, 4, 7, 30):
            for names_ in (None, ["s0"], ["s1[c4]"]):
                for stable in (False, True):
                    fast = flaky(store, device=device, last=last, names=names_, include_stable=stable)
                    slow = flaky(store, device=device, last=last, names=names_, include_stable=stable,
                                 from_cells=True)
                    assert fast == slow, (device, last, names_, stable)
                    partial += len(fast)
    assert partial > 100 and any(r["flips"] for r in flaky(store, last=4)), "the windows had flakes to count"
    everything = flaky(store, last=None, include_stable=True)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM cells")  # every commit whole in that window: the tallies alone answer
    assert flaky(store, last=None, include_stable=True) == everything and len(everything) == 27


def test_slower_finds_a_duration_or_compile_count_past_the_threshold(store: HistoryStore) -> None:
    for i in range(5):
        store.record(_doc({"a|x": "honoured", "a|y": "honoured"}), git={"commit": f"c{i}"}, started=i)
    store.record(_doc({"a|x": "honoured", "a|y": "honoured"}, durations={"a|x": 4.0, "a|y": 1.2}),
                 git={"commit": "c9"}, started=9)
    rows = queries.slower(store, threshold=1.5)
    assert [(r["cell"], r["what"], r["median"]) for r in rows] == [("a[x]", "duration_s", 1.0)]


def _slower_by_hand(store: HistoryStore, last: int, threshold: float = 1.5, floor_s: float = 0.5) -> list[dict]:
    """What ``slower`` answers, the plain way: each device's runs one at a time, each cell's median by hand."""
    out = []
    for dev in sorted({r["device"] for r in queries.trend(store, "", last=10**6, every_cell=True)["runs"]}):
        recent = queries.trend(store, "", last=last + 1, device=dev, every_cell=True)["runs"][::-1]
        if len(recent) < 2:
            continue
        with store.engine.connect() as conn:
            rows = queries.run_cells(conn, [r["id"] for r in recent])
        for name in sorted({(r["subject"], r["cell"]) for r in rows}):
            mine = {r["run_id"]: r for r in rows if (r["subject"], r["cell"]) == name}
            if recent[0]["id"] not in mine:
                continue
            for what, floor in (("duration_s", floor_s), ("compiles", 1)):
                now = mine[recent[0]["id"]][what]
                past = sorted(r[what] for i, r in mine.items() if i != recent[0]["id"] and r[what] is not None)
                if now is None or not past:
                    continue
                median = (past[(len(past) - 1) // 2] + past[len(past) // 2]) / 2
                if now > threshold * median and now - median >= floor:
                    out.append({"cell": f"{name[0]}[{name[1]}]", "device": dev, "what": what, "now": now,
                                "median": median, "ratio": now / median, "runs": len(past)})
    return out


def test_slower_over_every_device_is_the_plain_count(store: HistoryStore) -> None:
    import random

    rnd = random.Random(3)
    names = [f"s{i % 2}|c{i}" for i in range(6)]
    for i in range(40):
        doc = _doc({n: "honoured" for n in names if rnd.random() < 0.8}, device=f"d{i % 3}",
                   durations={n: rnd.choice([1.0, 1.2, 3.0]) for n in names})
        for r in doc["results"]:
            r["compiles"] = rnd.choice([2, 2, 5, None])
        store.record(doc, git={"commit": f"c{i}"}, started=rnd.random() * 100)
    found = 0
    for last in (1, 3, 20):
        expected = _slower_by_hand(store, last)
        assert queries.slower(store, last=last) == expected, last
        assert queries.slower(store, last=last, device="d1") == [e for e in expected if e["device"] == "d1"]
        found += len(expected)
    assert found > 6, "the runs had slower cells to find"


def _git(repo, *args: str) -> str:  # noqa: ANN001
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_first_bad_puts_the_recorded_commits_in_git_order_and_prints_a_bisect_line(store: HistoryStore,
                                                                                  tmp_path) -> None:  # noqa: ANN001
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    commits = []
    for i in range(5):
        (repo / "f").write_text(str(i))
        _git(repo, "add", "f")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"c{i}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
    # Recorded out of time order (a rerun of an old commit came last): git order decides, not time.
    recorded = [(commits[3], "wrong"), (commits[0], "honoured"), (commits[4], "wrong"), (commits[1], "honoured")]
    for t, (commit, outcome) in enumerate(recorded):
        store.record(_doc({"a|x": outcome}), git={"commit": commit}, started=t)
    out = first_bad(store, "a[x]", str(repo), workdir=str(tmp_path / "w"))
    assert (out["last_good"], out["first_bad"]) == (commits[1], commits[3])
    assert out["between"] == [commits[2]]
    start, run, _ = out["bisect"]["commands"]
    assert start == f"git bisect start {commits[3]} {commits[1]}"
    assert "triton-conformance replay" in run and "'a[x]'" in run
    stored = json.loads(open(out["bisect"]["reproducer"]).read())
    assert stored["results"][0]["reproducer"] == "raise SystemExit(1)"


def test_the_history_command_prints_json_and_exits_1_on_a_new_failure(tmp_path, capsys) -> None:  # noqa: ANN001
    from triton_conformance.cli import main

    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    with HistoryStore(url) as store:
        store.record(_doc({"a|x": "honoured"}), git={"commit": "c1"}, started=1)
        store.record(_doc({"a|x": "wrong"}), git={"commit": "c2"}, started=2)
    assert main(["history", "new", "--history", url, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [e["cell"] for e in out["new_failures"]] == ["a[x]"] and out["baseline"]["commit"] == "c1"
    assert main(["history", "trend", "a[x]", "--history", str(tmp_path / "missing.sqlite")]) == 4
    assert "no history database there" in capsys.readouterr().err


def test_the_report_and_the_summary_line_show_the_history_section(store: HistoryStore) -> None:
    from triton_conformance.reports.history_view import history_line
    from triton_conformance.reports.html import render_html

    for i in range(3):
        store.record(_doc({"a|x": "honoured"}), git={"commit": "c1"}, started=i)
    last = store.record(_doc({"a|x": "wrong"}), git={"commit": "c1"}, started=5)
    section = history_section(store, last, "interpreter")
    assert section["strips"]["a[x]"] == ["honoured", "honoured", "honoured", "wrong"]
    line = history_line(section)
    assert line.startswith("history: 1 new failure, 0 new passes, 0 changed findings since the last green run")
    assert "1 flaky cell (1 flagged)" in line
    doc = _doc({"a|x": "wrong"})
    page = render_html({**doc, "history": section})
    assert "New since the last green run" in page and '<ul class="history-new_failures">' in page
    assert page.count('class="h-run"') == 4 and "1 of 4" in page
    assert "New since the last green run" not in render_html(doc)


def test_a_bad_history_value_is_one_usage_line_and_a_broken_store_does_not_fail_the_run(tmp_path, capsys) -> None:  # noqa: ANN001
    from triton_conformance.history.location import HistoryError, history_url
    from triton_conformance.plugin.history import record_run

    with pytest.raises(HistoryError, match=r"--conformance-history='mysql://db/x', expected a SQLite path, a "):
        history_url("mysql://db/x", str(tmp_path))
    assert history_url("none", str(tmp_path)) is None
    assert history_url("h.sqlite", str(tmp_path)) == f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert history_url("postgresql://u@h/db", "/").startswith("postgresql+psycopg://")
    (tmp_path / "dir.sqlite").mkdir()  # a directory where the database file should be
    assert record_run(f"sqlite:///{tmp_path / 'dir.sqlite'}", _doc({"a|x": "honoured"}), started=0,
                      root=str(tmp_path)) is None
    assert "this run was not recorded in the history" in capsys.readouterr().err
