"""The out-of-contract semantics (issue 12 section 1), on real Triton kernels.

``tests/cover/test_checks.py`` shows each rule with pure-torch launchers; here
each runs the intended cell of a Triton kernel and its correct twin from
``tests/zoo/zoo_semantics.py``, on the interpreter:

1. "contiguous" is torch's ``is_contiguous()``: an offset view is inside the
   claim and must be computed (a 1-element misalignment included);
2. right beyond the claim passes, as ``accepted`` (``A``);
3. wrong beyond the claim fails, as ``wrong`` (``mismatch``);
4. a bare ``assert`` in the launcher is a refusal: ``rejected``;
5. ``strict=True`` keeps the must-refuse rule, in words.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import itertools
import re

import pytest
import torch

import triton_conformance as tc
from tests.zoo import correct_twin
from tests.zoo import zoo_semantics as zoo  # registers the kernels below
from triton_conformance.model.subject import registry
from triton_conformance.conformance.backend import current_backend
from triton_conformance.conformance.battery.forward import run_example
from triton_conformance.conformance.expectation import EXAMPLE_HONOURED
from triton_conformance.conformance.observe import Observer
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config
from triton_conformance.model.outcomes import OUTCOME_TABLE, outcome
from triton_conformance.reports.html import render_html
from triton_conformance.reports.results_json import environment, results_document
from triton_conformance.reports.terminal import matrix_lines
from triton_conformance.strategies import Layout, Spec, build_inputs

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs kernels on the interpreter")

BACKEND = current_backend("interpreter")
_ids = itertools.count()
TRANSPOSED = "x is transposed, contract claims contiguous only"


class _Specs(Observer):
    def __init__(self):
        self.seen = []

    def example_started(self, subject, cell, spec):
        self.seen.append(spec)


def cell(subject, name, observer=None):
    kw = {"observer": observer} if observer is not None else {}
    return run_cell(subject, name, backend=BACKEND, config=run_config(profile="ci"), **kw)


def offset_spec(offset):
    return Spec(dims={"M": 3, "N": 5}, dtypes={"x": "float32"}, layouts={"x": Layout("offset", offset=offset)})


def strict_twin(s):
    """``s``'s launcher and contract, but strict, under a name no other test uses."""
    return tc.register(s.launcher, **zoo.contract(f"{s.family}_strict_test", strict=True),
                       name=f"{s.name}_strict_test_{next(_ids)}")


# -- every zoo row: the bug caught as intended, its twin passing the same cell ---

@pytest.mark.parametrize(("name", "cell_name", "outcome_name", "finding"), zoo.BUGS, ids=[b[0] for b in zoo.BUGS])
def test_the_intended_cell_catches_the_bug_and_passes_the_twin(name, cell_name, outcome_name, finding):
    buggy = tc.get_subject(name)
    result = cell(buggy, cell_name)
    assert (result.outcome, result.finding) == (outcome_name, finding), result.message
    assert not result.passed and result.counterexample is not None and name in result.reproducer
    twin = correct_twin(buggy, registry)
    passing = cell(twin, cell_name)
    assert passing.passed and passing.outcome != "skipped", (twin.name, passing.outcome, passing.message)


# -- 1. contiguous means is_contiguous(): an offset view is inside the claim ---

def test_an_offset_view_is_contiguous_and_must_be_honoured():
    seen = _Specs()
    result = cell(zoo.zoo_sem_offset, "layout:offset", seen)
    assert result.outcome == "honoured", (result.finding, result.message)
    assert result.passed and result.rejected_examples == 0 and result.examples >= 1
    assert "outside the contract" not in result.message
    # every example really was an offset view, and contiguous as torch sees it
    views = [build_inputs(zoo.zoo_sem_offset.contract, s).views["x"] for s in seen.seen]
    assert views and all(v.is_contiguous() and v.storage_offset() > 0 for v in views)


@pytest.mark.parametrize("offset", [1, 17])
def test_a_misaligned_offset_view_is_honoured(offset):
    assert run_example(zoo.zoo_sem_offset, offset_spec(offset), BACKEND) == EXAMPLE_HONOURED


def test_reading_from_the_storage_start_is_a_bug_inside_the_contract():
    result = cell(zoo.zoo_sem_offset_from_storage_start, "layout:offset")
    assert (result.outcome, result.finding) == ("unsafe", "poisoned-read"), result.message
    assert "outside the contract" not in result.message and "outside_contract" not in result.details
    assert result.counterexample.spec["layouts"]["x"] == Layout("offset", offset=1).to_dict()  # misaligned by one


def test_refusing_an_offset_view_is_a_crash_inside_the_contract():
    result = cell(zoo.zoo_sem_offset_refused, "layout:offset")
    assert (result.outcome, result.finding) == ("crash", "exception"), result.message
    assert "on an input inside the contract" in result.message and "storage_offset()=1" in result.message
    assert result.details["expected"] == "honour"


def test_an_offset_view_is_inside_a_strict_contract_too():
    result = cell(strict_twin(zoo.zoo_sem_offset), "layout:offset")
    assert result.outcome == "honoured", (result.finding, result.message)


# -- 2. right beyond the claim: accepted, a pass, shown as A -------------------

@pytest.mark.parametrize("cell_name", ["layout:transposed", "layout:sliced", "layout:padded"])
def test_right_beyond_the_claim_is_accepted(cell_name):
    result = cell(zoo.zoo_sem_strided, cell_name)
    assert (result.outcome, result.finding) == ("accepted", None), result.message
    assert result.passed
    assert "outside the contract accepted and right: the claim could be wider" in result.message


def test_accepted_is_a_passing_A_in_the_terminal_and_html_matrix():
    accepted = outcome("accepted")
    assert accepted in OUTCOME_TABLE and accepted.letter == "A" and accepted.passing
    result = cell(zoo.zoo_sem_strided, "layout:transposed")
    assert result.outcome == accepted.name and result.passed
    lines = matrix_lines([result])
    row = next(line for line in lines if line.startswith(result.subject + " "))
    assert row.split()[1:] == [accepted.letter], lines
    assert "failing cells:" not in lines
    page = render_html(results_document([result], environment(device="interpreter", profile="ci", seed=None)))
    td = re.search(r'<td class="cell o-accepted" data-cell="layout:transposed" data-outcome="accepted" '
                   r'style="background:([^"]+)"><a [^>]*>([^<]*)</a></td>', page)
    assert td is not None and td.groups() == (accepted.colour, accepted.letter)


# -- 3. wrong beyond the claim: a failure --------------------------------------

def test_wrong_beyond_the_claim_fails():
    result = cell(zoo.zoo_sem_assert_missing, "layout:transposed")
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message
    assert not result.passed
    assert result.message.startswith(f"outside the contract ({TRANSPOSED}), accepted by the launcher: "), result.message
    assert result.details["outside_contract"] == [TRANSPOSED]
    assert result.counterexample.spec["dims"] == {"M": 2, "N": 2}  # the smallest transpose that moves anything


# -- 4. a bare assert is a refusal ---------------------------------------------

def test_the_assert_is_bare():
    with pytest.raises(AssertionError) as refused:
        zoo.zoo_sem_assert(torch.zeros(3, 2).t())
    assert str(refused.value) == ""  # no message (the module is not rewritten by pytest)


@pytest.mark.parametrize("cell_name", ["layout:transposed", "layout:sliced"])
def test_a_bare_assert_is_a_rejection(cell_name):
    result = cell(zoo.zoo_sem_assert, cell_name)
    assert (result.outcome, result.finding) == ("rejected", None), result.message
    assert result.passed and result.rejected_examples >= 1
    assert "without a message" in result.message


def test_a_bare_assert_still_honours_contiguous_inputs():
    result = cell(zoo.zoo_sem_assert, "layout:offset")
    assert result.outcome == "honoured" and result.rejected_examples == 0, result.message


# -- 5. strict=True: outside the claim must be refused, in words ---------------

def test_strict_fails_what_default_accepts():
    default = cell(zoo.zoo_sem_strided, "layout:transposed")
    assert default.outcome == "accepted" and default.passed
    strict = cell(zoo.zoo_sem_strided_strict, "layout:transposed")
    assert (strict.outcome, strict.finding) == ("wrong", "accepted-out-of-contract"), strict.message
    assert not strict.passed
    assert strict.message == f"outside the contract ({TRANSPOSED}): returned a result, not a refusal"


def test_strict_turns_a_bare_assert_into_an_unclean_rejection():
    result = cell(zoo.zoo_sem_assert_strict, "layout:transposed")
    assert (result.outcome, result.finding) == ("crash", "unclean-rejection"), result.message
    assert not result.passed and result.details["expected"] == "reject"
    assert result.details["reasons"] == [TRANSPOSED]


def test_strict_passes_a_refusal_in_words():
    result = cell(strict_twin(zoo.zoo_sem_offset), "layout:transposed")
    assert (result.outcome, result.finding) == ("rejected", None), result.message
    assert result.passed and "without a message" not in result.message


def test_an_import_error_is_never_a_refusal():
    # A launcher that imports a module only for strided inputs, one that cannot load (a removed triton API):
    # outside the contract that is no refusal of the input, even without strict=True.
    from dataclasses import replace

    def loads_late(x):
        if not x.is_contiguous():
            raise ModuleNotFoundError("No module named 'triton.tools.experimental_descriptor'")
        return zoo.zoo_sem_assert.launcher(x)

    broken = replace(zoo.zoo_sem_assert, name="zoo_sem_loads_late", launcher=loads_late)
    assert cell(broken, "layout:offset").outcome == "honoured"  # contiguous inputs: computed
    result = cell(broken, "layout:transposed")
    assert (result.outcome, result.finding) == ("crash", "unclean-rejection"), result.message
    assert not result.passed and result.rejected_examples == 0
