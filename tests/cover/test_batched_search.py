"""The batched driver (``--conformance-batch``): one Hypothesis test case draws several distinct examples, each
judged on its own; it runs as many examples as one a case, and shrinks a failure to the same counterexample."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from triton_conformance import ConformanceUsageError, Dim, Tensor, register  # noqa: E402
from triton_conformance.conformance.backend import Backend  # noqa: E402
from triton_conformance.conformance.observe import Observer  # noqa: E402
from triton_conformance.conformance.runner import run_cell  # noqa: E402
from triton_conformance.model.config import run_config  # noqa: E402

INPUTS = {"x": Tensor(("M", "N"), layouts="any")}
DIMS = {"M": Dim(1, 64), "N": Dim(1, 256)}


def doubled(x):
    return x * 2


def doubled_wrong_from_37(x):
    y = x * 2
    if x.shape[-1] >= 37:
        y[..., -1] += 1.0  # the last column, once a row is 37 long
    return y


RIGHT = register(doubled, name="batched_doubled", inputs=INPUTS, dims=DIMS, oracle=lambda x: x * 2)
WRONG = register(doubled_wrong_from_37, name="batched_doubled_wrong", inputs=INPUTS, dims=DIMS,
                 oracle=lambda x: x * 2)


class Specs(Observer):
    def __init__(self):
        self.started, self.searching = [], []

    def example_started(self, subject, cell, spec):
        self.started.append(spec)

    def example_finished(self, subject, cell, spec, verdict, seconds):
        if self.searching is not None:
            self.searching.append((spec, verdict))


@pytest.mark.parametrize("cell", ["layout:contiguous", "memory", "shape:non-pow2"])
@pytest.mark.parametrize("examples", [10, 25])
def test_a_batched_search_runs_every_example_asked_each_a_distinct_spec(cell, examples):
    seen = Specs()
    result = run_cell(RIGHT, cell, backend=Backend(), config=run_config(max_examples=examples, batch=4),
                      observer=seen)
    assert result.outcome == "honoured" and result.examples == examples
    assert len(seen.started) == examples and len(set(seen.started)) == examples


@pytest.mark.parametrize("batch", [1, 10])
def test_a_batched_search_shrinks_to_the_one_failing_example_and_replays_it_alone(batch, monkeypatch):
    from triton_conformance.conformance.search import cell

    seen, shrink = Specs(), cell.shrink

    def after_the_search(*args, **kwargs):
        seen.searching, searched = None, seen.searching  # the per-dim search and the error plot come after
        seen.searched = searched
        return shrink(*args, **kwargs)

    monkeypatch.setattr(cell, "shrink", after_the_search)
    result = run_cell(WRONG, "layout:contiguous", backend=Backend(), config=run_config(batch=batch), observer=seen)
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message
    assert result.counterexample["dims"] == {"M": 1, "N": 37}  # minimal: the first failing row length, one row
    assert result.reproducer.count("Spec(dims=") == 1 and "Spec(dims={'M': 1, 'N': 37}" in result.reproducer
    passed = [spec for spec, verdict in seen.searched if verdict == "honoured"]
    if batch > 1:  # shrinking a batch re-runs no passing draw (one a case, Hypothesis's mutations and shrinks do)
        assert len(passed) == len(set(passed))


def test_a_batch_that_is_not_a_positive_number_is_a_one_line_usage_error():
    with pytest.raises(ConformanceUsageError, match=r"^--conformance-batch='0', expected a positive number"):
        run_config(batch="0", where={"batch": "--conformance-batch"})
