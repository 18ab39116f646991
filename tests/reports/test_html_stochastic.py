"""A stochastic cell's detail panel lists its statistical tests, and its counterexample is the seed."""

from triton_conformance.model.outcomes import CellResult
from triton_conformance.reports.html import render_html
from triton_conformance.reports.results_json import environment, results_document


def _page(tests):
    failing = CellResult(
        subject="zoo_dropout_seed_ignored", family="dropout", cell="stochastic:seeds", outcome="wrong",
        finding="seed-dependence", message="agreement ... p-value=0 < alpha 2.8e-10",
        details={"seed": 7, "alpha_check": 2.8e-10, "tests": tests},
        counterexample={"seed": 7, "last_launch": {"shapes": {"x": [50, 1000]}, "params": {"p": 0.5, "seed": 123},
                                                    "dtype": "float32"}},
        reproducer="replay_stochastic(...)")
    return render_html(results_document([failing], environment(device="interpreter", profile="ci", seed=None)))


def test_statistical_tests_are_listed_smallest_p_value_first_with_the_rejections_marked():
    tests = [
        {"test": "binomial", "description": "agreement of seeds 1 and 2", "statistic": 0.501, "expected": 0.5,
         "n": 50000, "p_value": 0.61, "rejected": False},
        {"test": "binomial", "description": "agreement of seeds 1 and 9", "statistic": 1.0, "expected": 0.5,
         "n": 50000, "p_value": 0.0, "rejected": True},
    ]
    page = _page(tests)
    table = page[page.index("Statistical tests"):]
    assert table.index("seeds 1 and 9") < table.index("seeds 1 and 2")
    assert table.count("rejects the model") == 1
    assert '<tr class="rejected">' in table


def test_the_counterexample_of_a_stochastic_cell_is_its_seed_and_design():
    page = _page([])
    counter = page[page.index("<h3>Counterexample</h3>"):]
    assert "x=(50, 1000)" in counter[:600] and "seed" in counter[:200]
    assert "Statistical tests" not in page
