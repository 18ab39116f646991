"""The cut of long subjects into parts for xdist workers (plugin/splitting.py) and their scheduling."""

from types import SimpleNamespace

import pytest

from triton_conformance.plugin.splitting import MIN_PART_CELLS, makespan, split_subjects


def _cells(subject: str, n: int) -> list[tuple[str, str]]:
    return [(subject, f"c{i:02d}") for i in range(n)]


def test_a_subject_over_a_workers_share_is_cut_into_consecutive_parts_of_equal_cost():
    cells = _cells("long", 40) + [(f"s{i}", "c") for i in range(20)]  # 60 cells, 4 workers: 15 a worker
    plan = split_subjects(cells, 4)  # parts of at most half a worker's share (7.5), but no more than 4
    assert list(plan) == ["long"] and [len(p) for p in plan["long"]] == [10, 10, 10, 10]
    assert [c for part in plan["long"] for c in part] == [c for _, c in _cells("long", 40)]  # in catalogue order


def test_durations_decide_where_the_cut_falls():
    cells = _cells("long", 20) + [("other", "c")]
    durations = {("long", "c00"): 10.0, **{("long", f"c{i:02d}"): 1.0 for i in range(1, 20)}, ("other", "c"): 1.0}
    plan = split_subjects(cells, 2, durations)  # 30 s in all: 15 a worker; long's 29 s in two parts
    assert [len(p) for p in plan["long"]] == [6, 14]  # 15 s and 14 s


def test_a_small_subject_is_never_cut_however_long_it_takes():
    few = _cells("few", 2 * MIN_PART_CELLS - 1)
    durations = {c: 100.0 for c in few}
    assert split_subjects(few + [("other", "c")], 8, durations) == {}  # its parts would be under 8 cells
    more = _cells("more", 2 * MIN_PART_CELLS)
    assert [len(p) for p in split_subjects(more + [("other", "c")], 8, dict.fromkeys(more, 100.0))["more"]] == [8, 8]


def test_by_cell_counts_only_a_subject_past_a_whole_share_is_cut():
    cells = [c for s in "abcd" for c in _cells(s, 20)]  # 3 workers: 26.7 a worker; whole, the run ends at 40
    assert split_subjects(cells, 3) == {}  # counts: none is past a share
    timed = split_subjects(cells, 3, dict.fromkeys(cells, 1.0))  # durations: each is past half a share
    assert sorted(timed) == ["a", "b", "c", "d"] and all(len(p) == 2 for p in timed.values())


def test_nothing_is_cut_for_one_worker_or_a_balanced_run():
    assert split_subjects(_cells("a", 40), 1) == {}
    assert split_subjects(_cells("a", 20) + _cells("b", 20), 2) == {}  # each is one worker's share
    assert makespan([20, 20], 2) == 20 and makespan([5, 4, 3, 3, 3], 2) == 10  # costliest first: 5+3, 4+3+3


def test_the_scheduler_gives_each_part_its_scope_and_hands_out_the_costliest_first(monkeypatch):
    pytest.importorskip("xdist")
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    from triton_conformance.plugin.scheduling import SubjectGroupScheduling

    shared = []
    sched = SubjectGroupScheduling.__new__(SubjectGroupScheduling)
    sched.config, sched.numnodes = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True)), 4
    sched.durations, sched.share, sched._part_of, sched._ordered = None, lambda s, c: shared.append((s, c)), {}, False
    collection = [f"::long[{c}]" for _, c in _cells("long", 40)] + [f"::s{i}[c]" for i in range(20)]
    sched._split(collection)
    assert [(s, [c for part in parts for c in part]) for s, parts in shared] == [
        ("long", [c for _, c in _cells("long", 40)])]  # told before any cell runs, part by part
    scopes = [sched._split_scope(n) for n in collection]
    assert scopes[0] == "conformance:long#1" and scopes[39] == "conformance:long#4" and scopes[40] == "conformance:s0"
    sched.collection, sched.workqueue = collection, OrderedDict()
    for nodeid, scope in zip(collection, scopes):
        sched.workqueue.setdefault(scope, {})[nodeid] = False
    sent = []
    monkeypatch.setattr(LoadScopeScheduling, "_assign_work_unit", lambda self, node: sent.append(next(iter(self.workqueue))))
    sched._assign_work_unit(None)  # xdist's own then pops the queue's first unit
    # The four parts of 10 cells before the 20 one-cell subjects (ties in collection order).
    assert sent == ["conformance:long#1"] and list(sched.workqueue)[:4] == [f"conformance:long#{i}" for i in (1, 2, 3, 4)]
    assert list(sched.workqueue)[4] == "conformance:s0"
