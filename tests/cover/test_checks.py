"""The per-example battery (conformance/checks.py) and the cell runner (conformance/runner.py).

Every subject here is a pure-torch launcher, one correct and one known-buggy
per check, so the whole battery runs in milliseconds per example.  Subjects
are declared inside the tests, under unique names, so that a ``--conformance``
run never collects them.
"""

import itertools
import math

import pytest
import torch

import triton_conformance as tc
from triton_conformance import ConformanceUsageError, Dim, Mask, Scalar, Tensor, Tolerance
from triton_conformance.conformance import backend as backend_module
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.battery.forward import run_example
from triton_conformance.conformance.expectation import (
    EXAMPLE_ACCEPTED,
    EXAMPLE_HONOURED,
    EXAMPLE_REJECTED,
    EXAMPLE_REJECTED_UNEXPLAINED,
)
from triton_conformance.conformance.observe import NO_OBSERVER, Observer
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import PROFILES, run_config
from triton_conformance.model.outcomes import Finding
from triton_conformance.strategies import Layout, Spec

_ids = itertools.count()

VECTOR = {"x": Tensor(("N",), dtypes=("float32",))}
VECTOR_ANY = {"x": Tensor(("N",), dtypes=("float32",), layouts="any")}
MATRIX = {"x": Tensor(("M", "N"), dtypes=("float32",))}
N = {"N": Dim(1, 64)}
MN = {"M": Dim(1, 64), "N": Dim(1, 64)}


def double(x):
    return x * 2


def declare(launcher, *, inputs=VECTOR, dims=N, oracle=double, **kw):
    """Register ``launcher`` under a name no other test uses."""
    return tc.register(launcher, name=f"cover_{launcher.__name__}_{next(_ids)}", inputs=inputs, dims=dims,
                       oracle=oracle, **kw)


class _Specs(Observer):
    """Hands each example's spec to ``seen`` as it starts."""

    def __init__(self, seen):
        self.seen = seen

    def example_started(self, subject, cell, spec):
        self.seen(spec)


def cell(subject, name, *, on_example=None, max_examples=None, **kw):
    observer = _Specs(on_example) if on_example else NO_OBSERVER
    return run_cell(subject, name, backend=Backend(), config=run_config(profile="ci", max_examples=max_examples),
                    observer=observer, **kw)


def vec(n, layouts=None, **kw):
    return Spec(dims={"N": n}, dtypes={"x": "float32"}, layouts=layouts or {}, **kw)


# -- launchers -------------------------------------------------------------

def correct(x):
    out = torch.empty_like(x)
    torch.mul(x, 2, out=out)
    return out


def checks_contiguous(x):
    if not x.is_contiguous():
        raise ValueError(f"x.stride()={x.stride()}, expected a contiguous tensor")
    return correct(x)


def writes_past_the_end(x):
    out = correct(x)
    n = out.numel()
    torch.as_strided(out, (n + 1,), (1,), out.storage_offset())[-1] = 0  # BUG: one element too many
    return out


def leaves_the_last_element(x):
    out = torch.empty_like(x)
    out[:-1] = x[:-1] * 2  # BUG: out[-1] is never written
    return out


def mutates_its_input(x):
    out = x * 2
    x.mul_(2)  # BUG: scribbles on the caller's tensor
    return out


def reads_the_gaps(x):
    # BUG: assumes unit stride, so a step-sliced x is read through its gaps
    dense = torch.as_strided(x, x.shape, (1,), x.storage_offset())
    return dense * 2


def off_by_a_little(x):
    return x * 2 + 1e-3  # BUG: wrong numbers


def makes_a_nan(x):
    out = x * 2
    out[0] = math.nan  # BUG: NaN where the oracle is finite
    return out


def drops_an_element(x):
    return (x * 2)[:-1]  # BUG: wrong shape


def returns_two(x):
    return x * 2, x * 2  # BUG: the oracle has one output


def raises_inside(x):
    raise RuntimeError("launcher fell over")  # BUG: on every input, in contract or not


def checks_dtype(x):
    if x.dtype != torch.float32:
        raise TypeError(f"x.dtype={x.dtype}, expected torch.float32")
    return correct(x)


def trips_over_torch(x):
    if x.dtype != torch.float32:  # not a contract check: torch raises from its own code
        torch.nn.functional.interpolate(x[None, None], size=3, scale_factor=2.0)
    return correct(x)


def raises_blank(x):
    if x.dtype != torch.float32:
        raise ValueError("")  # a rejection that says nothing
    return correct(x)


def raises_key_error(x):
    if x.dtype != torch.float32:
        raise KeyError("float32")  # an odd type, but the launcher's own refusal, in words
    return correct(x)


def checks_dims(x):
    if not 1 <= x.shape[0] <= 64:
        raise ValueError(f"x.shape[0]={x.shape[0]}, expected 1 <= N <= 64")
    return correct(x)


def jitters(x):
    out = x * 2
    # BUG: a few ulps of noise, well inside the tolerance, different on every call
    return out + torch.rand(out.shape) * 4 * torch.finfo(out.dtype).eps * out.abs()


# -- run_example: one example, every check -----------------------------------

def test_a_correct_launcher_honours_an_example():
    assert run_example(declare(correct), vec(5), Backend()) == EXAMPLE_HONOURED


@pytest.mark.parametrize("launcher, outcome, kind", [
    (writes_past_the_end, "unsafe", "oob-write"),
    (leaves_the_last_element, "unsafe", "unwritten"),
    (mutates_its_input, "unsafe", "mutated-input"),
    (off_by_a_little, "wrong", "mismatch"),
    (makes_a_nan, "wrong", "nan-mismatch"),
    (drops_an_element, "wrong", "bad-shape"),
    (returns_two, "wrong", "bad-output"),
    (raises_inside, "crash", "exception"),
], ids=lambda v: getattr(v, "__name__", v))
def test_run_example_classifies(launcher, outcome, kind):
    found = run_example(declare(launcher), vec(5), Backend())
    assert isinstance(found, Finding)
    assert (found.outcome, found.kind) == (outcome, kind)
    assert found.message


def test_oob_write_details_locate_the_write():
    found = run_example(declare(writes_past_the_end), vec(5), Backend())
    assert found.details == {"side": "after", "byte_offset": 20, "span_bytes": 20, "shape": [5], "dtype": "float32"}


def test_unwritten_details_count_the_holes():
    found = run_example(declare(leaves_the_last_element), vec(6), Backend())
    assert found.details == {"unwritten": 1, "total": 6, "first_index": (5,), "output": 0}


def test_mutated_input_names_the_input():
    found = run_example(declare(mutates_its_input), vec(3), Backend())
    assert found.details == {"inputs": ["x"]}


def test_a_gap_read_is_a_poisoned_read():
    subject = declare(reads_the_gaps, inputs=VECTOR_ANY)
    assert run_example(subject, vec(4), Backend()) == EXAMPLE_HONOURED  # unit stride: fine
    found = run_example(subject, vec(4, {"x": Layout("sliced", steps=(2,))}), Backend())
    assert (found.outcome, found.kind) == ("unsafe", "poisoned-read")


def test_a_read_past_the_end_is_a_poisoned_read():
    def reads_one_more(x):
        longer = torch.as_strided(x, (x.numel() + 1,), (1,), x.storage_offset())
        return x * 2 + 0 * longer[-1]  # BUG: the sentinel after x leaks in

    found = run_example(declare(reads_one_more), vec(4), Backend())
    assert (found.outcome, found.kind) == ("unsafe", "poisoned-read")


def test_the_worst_finding_wins():
    def everything_wrong(x):
        out = torch.empty_like(x)
        out[:-1] = x[:-1] * 3  # mismatch and unwritten
        x.add_(1)  # mutated input
        return out

    found = run_example(declare(everything_wrong), vec(4), Backend())
    assert found.kind == "mutated-input"


KINDS_BY_CLASS = {
    "crash": ["exception", "unclean-rejection"],
    "unsafe": ["mutated-input", "oob-write", "unwritten", "poisoned-read"],
    "wrong": ["accepted-out-of-contract", "bad-shape", "bad-output", "nan-mismatch", "mismatch",
              "nondeterministic"],
}


@pytest.mark.parametrize("worse, better", [("crash", "unsafe"), ("unsafe", "wrong"), ("crash", "wrong")])
def test_worst_ranks_crash_over_unsafe_over_wrong(worse, better):
    from triton_conformance.model.outcomes import worst

    for a in KINDS_BY_CLASS[worse]:
        for b in KINDS_BY_CLASS[better]:
            pair = [Finding(better, b, ""), Finding(worse, a, "")]
            assert worst(pair).kind == a and worst(pair[::-1]).kind == a


def test_worst_prefers_memory_damage_to_a_poisoned_read():
    from triton_conformance.model.outcomes import worst

    # a write past the end or into an input also changes what later reads see; report the cause
    for kind in ("mutated-input", "oob-write"):
        assert worst([Finding("unsafe", "poisoned-read", ""), Finding("unsafe", kind, "")]).kind == kind
    assert worst([Finding("wrong", "mismatch", ""), Finding("wrong", "nan-mismatch", "")]).kind == "nan-mismatch"
    assert worst([Finding("wrong", "made-up", ""), Finding("wrong", "mismatch", "")]).kind == "mismatch"
    assert worst([]) is None


@pytest.mark.parametrize("launcher", [checks_dtype, trips_over_torch], ids=lambda f: f.__name__)
def test_in_contract_dtype_runs_normally(launcher):
    assert run_example(declare(launcher), vec(4), Backend()) == EXAMPLE_HONOURED


def computes_half_wrong(x):
    return correct(x) + (x.dtype == torch.float16)  # right in fp32, off by one for fp16 inputs


# The Triton tutorials' idiom, compiled outside pytest's assertion rewriting (which would add a message).
_launchers = {"torch": torch, "correct": correct}
exec("def bare_assert(x):\n    assert x.dtype == torch.float32\n    return correct(x)\n", _launchers)
bare_assert = _launchers["bare_assert"]


@pytest.mark.parametrize("launcher, strict, expected", [
    (checks_dtype, False, EXAMPLE_REJECTED),
    (raises_key_error, False, EXAMPLE_REJECTED),  # whatever its type, it is the launcher's own refusal
    (bare_assert, False, EXAMPLE_REJECTED_UNEXPLAINED),  # a refusal, noted for having no message
    (raises_blank, False, EXAMPLE_REJECTED_UNEXPLAINED),
    (trips_over_torch, False, EXAMPLE_REJECTED_UNEXPLAINED),  # it never computed on the input
    (correct, False, EXAMPLE_ACCEPTED),  # outside the claim, and right: the claim could be wider
    (computes_half_wrong, False, ("wrong", "mismatch")),  # the real bug: garbage for an input it accepts
    # strict: today's must-refuse rule
    (checks_dtype, True, EXAMPLE_REJECTED),
    (raises_key_error, True, EXAMPLE_REJECTED),
    (correct, True, ("wrong", "accepted-out-of-contract")),
    (bare_assert, True, ("crash", "unclean-rejection")),
    (trips_over_torch, True, ("crash", "unclean-rejection")),
    (raises_blank, True, ("crash", "unclean-rejection")),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_out_of_contract_dtype(launcher, strict, expected):
    spec = Spec(dims={"N": 4}, dtypes={"x": "float16"}, layouts={})
    got = run_example(declare(launcher, strict=strict), spec, Backend())
    assert (got if isinstance(got, str) else (got.outcome, got.kind)) == expected


def test_accepted_and_wrong_says_the_input_was_outside_the_contract():
    spec = Spec(dims={"N": 4}, dtypes={"x": "float16"}, layouts={})
    found = run_example(declare(computes_half_wrong), spec, Backend())
    # its first words say so (issue 28: it read like an in-contract failure until its second half)
    assert found.message.startswith("outside the contract (x.dtype=float16 not in ('float32',)), accepted by the "
                                    "launcher: "), found.message
    assert found.details["outside_contract"] == ["x.dtype=float16 not in ('float32',)"]


@pytest.mark.parametrize("launcher", [correct, bare_assert], ids=["accepted", "unclean"])
def test_every_strict_finding_outside_the_contract_says_so_first(launcher):
    spec = Spec(dims={"N": 4}, dtypes={"x": "float16"}, layouts={})
    found = run_example(declare(launcher, strict=True), spec, Backend())
    assert found.message.startswith("outside the contract (x.dtype=float16 not in ('float32',)): "), found.message


def test_an_unclean_rejection_keeps_the_traceback_and_reasons():
    spec = Spec(dims={"N": 4}, dtypes={"x": "float16"}, layouts={})
    found = run_example(declare(trips_over_torch, strict=True), spec, Backend())
    assert "only one of size or scale_factor" in found.message
    assert "interpolate" in found.details["traceback"]
    assert found.details["expected"] == "reject"
    assert found.details["reasons"] == ["x.dtype=float16 not in ('float32',)"]


def test_either_examples_may_be_rejected_or_honoured():
    matrix_spec = Spec(dims={"M": 1, "N": 4}, dtypes={"x": "float32"}, layouts={"x": Layout("size1", odd_stride=7)})

    def refuses_odd_strides(x):
        if x.stride() != (x.shape[1], 1):
            raise ValueError(f"x.stride()={x.stride()}, expected ({x.shape[1]}, 1)")
        return correct(x)

    assert run_example(declare(refuses_odd_strides, inputs=MATRIX, dims=MN), matrix_spec, Backend()) \
        == EXAMPLE_REJECTED
    assert run_example(declare(correct, inputs=MATRIX, dims=MN), matrix_spec, Backend()) == EXAMPLE_HONOURED


def test_scalars_reach_the_launcher_and_the_oracle():
    def scale(x, alpha):
        return x * alpha

    def ignores_alpha(x, alpha):
        return x * 2

    kw = dict(scalars={"alpha": Scalar(0.5, 4.0)}, oracle=lambda x, alpha: x * alpha)
    spec = vec(4, scalars={"alpha": 3.0})
    assert run_example(declare(scale, **kw), spec, Backend()) == EXAMPLE_HONOURED
    assert run_example(declare(ignores_alpha, **kw), spec, Backend()).kind == "mismatch"


def test_a_tolerance_override_widens_the_bound():
    assert run_example(declare(off_by_a_little), vec(4), Backend()).kind == "mismatch"
    loose = declare(off_by_a_little, tolerance=Tolerance(atol=1e-2))
    assert run_example(loose, vec(4), Backend()) == EXAMPLE_HONOURED


def test_the_tolerance_scales_with_the_reduced_dim():
    def sloppy_sum(x):
        # off by 64 fp32 unit roundoffs of the largest sum: past (4 + 8) u for K = 1,
        # inside 8 * sqrt(256) u for K = 256
        s = x.sum(-1)
        return s + 64 * 2.0**-24 * s.abs().max()

    def sloppier_sum(x):
        # off by 64 * 17 u * sum|x|: past what even the sum's terms allow, 8 u * (1 + sqrt(256)) * sum|x|
        return x.sum(-1) + 64 * 17 * 2.0**-24 * x.abs().sum(-1)

    kw = dict(inputs=MATRIX, dims={"M": Dim(1, 4), "N": Dim(1, 4096)}, oracle=lambda x: x.sum(-1))
    spec = Spec(dims={"M": 2, "N": 256}, dtypes={"x": "float32"}, layouts={})
    assert run_example(declare(sloppy_sum, reduces="N", **kw), spec, Backend()) == EXAMPLE_HONOURED
    # Undeclared, the plain bound (K = 1) fails it; the sum is then judged against its terms
    # (oracles/magnitude.py), which carry the sum's depth whether or not the contract names it.
    assert run_example(declare(sloppy_sum, **kw), spec, Backend()) == EXAMPLE_HONOURED
    for declared in ({"reduces": "N"}, {}):
        assert run_example(declare(sloppier_sum, **declared, **kw), spec, Backend()).kind == "mismatch"


# -- run_cell: search a cell, shrink, report ----------------------------------

CELL_BUGS = [
    # (launcher, inputs, dims, cell, outcome, finding)
    (writes_past_the_end, VECTOR, N, "layout:contiguous", "unsafe", "oob-write"),
    (leaves_the_last_element, VECTOR, N, "layout:contiguous", "unsafe", "unwritten"),
    (mutates_its_input, VECTOR, N, "layout:contiguous", "unsafe", "mutated-input"),
    (reads_the_gaps, VECTOR_ANY, N, "layout:sliced", "unsafe", "poisoned-read"),
    (off_by_a_little, VECTOR, N, "layout:contiguous", "wrong", "mismatch"),
    (makes_a_nan, VECTOR, N, "shape:tiny", "wrong", "nan-mismatch"),
    (computes_half_wrong, VECTOR, N, "dtype:float16", "wrong", "mismatch"),
    (raises_inside, VECTOR, N, "layout:contiguous", "crash", "exception"),
    # strict contracts: every input outside the claims must be refused, in words
    (correct, MATRIX, MN, "layout:transposed", "wrong", "accepted-out-of-contract", True),
    (correct, VECTOR, N, "dtype:float16", "wrong", "accepted-out-of-contract", True),
    (correct, VECTOR, N, "shape:beyond-range", "wrong", "accepted-out-of-contract", True),
    (trips_over_torch, VECTOR, N, "dtype:float16", "crash", "unclean-rejection", True),
]


@pytest.mark.parametrize("launcher, inputs, dims, cell_name", [
    (correct, MATRIX, MN, "layout:transposed"), (correct, VECTOR, N, "dtype:float16"),
    (correct, VECTOR, N, "shape:beyond-range"),
], ids=["transposed", "float16", "beyond-range"])
def test_right_answers_beyond_the_claim_are_accepted_and_shown_as_such(launcher, inputs, dims, cell_name):
    result = cell(declare(launcher, inputs=inputs, dims=dims), cell_name)
    assert result.outcome == "accepted" and result.passed, result.message
    assert "accepted and right: the claim could be wider" in result.message


@pytest.mark.parametrize("launcher, inputs, dims, cell_name, outcome, finding, strict",
                         [c + (False,) * (7 - len(c)) for c in CELL_BUGS],
                         ids=[f"{c[0].__name__}-{c[3]}" + ("-strict" if len(c) > 6 else "") for c in CELL_BUGS])
def test_run_cell_catches_the_bug(launcher, inputs, dims, cell_name, outcome, finding, strict):
    subject = declare(launcher, inputs=inputs, dims=dims, strict=strict)
    result = cell(subject, cell_name)
    assert (result.outcome, result.finding) == (outcome, finding), result.message
    assert not result.passed
    assert (result.subject, result.family, result.cell) == (subject.name, subject.name, cell_name)
    # a counterexample that rebuilds and fails the same way
    spec = Spec.from_dict(result.counterexample.spec)
    again = run_example(subject, spec, Backend())
    assert isinstance(again, Finding) and again.kind == finding
    # and a reproducer that names the subject, the cell and the exact spec
    assert subject.name in result.reproducer and cell_name in result.reproducer
    assert f"({finding})" in result.reproducer
    assert f"example = {spec!r}" in result.reproducer and "Spec(" in result.reproducer


def test_counterexamples_shrink_to_the_smallest_failure():
    result = cell(declare(off_by_a_little, dims={"N": Dim(1, 4096)}), "layout:contiguous")
    assert result.counterexample["dims"] == {"N": 1}
    result = cell(declare(writes_past_the_end, dims={"N": Dim(1, 4096)}), "shape:non-pow2")
    assert result.counterexample["dims"] == {"N": 3}  # the smallest size that is not a power of two


def test_a_shrunk_gap_read_needs_two_elements():
    result = cell(declare(reads_the_gaps, inputs=VECTOR_ANY), "layout:sliced")
    assert result.counterexample["dims"] == {"N": 2}
    assert result.counterexample["layouts"]["x"]["kind"] == "sliced"


@pytest.mark.parametrize("cell_name", ["layout:contiguous", "layout:transposed", "layout:sliced", "layout:padded",
                                       "layout:offset", "layout:broadcast", "layout:size1", "layout:mixed",
                                       "memory", "determinism", "shape:tiny", "shape:non-pow2", "dtype:float32"])
def test_a_correct_any_layout_launcher_honours_every_cell(cell_name):
    subject = declare(correct, inputs={"x": Tensor(("M", "N"), layouts="any")}, dims=MN)
    result = cell(subject, cell_name)
    assert result.outcome == "honoured", (result.finding, result.message)
    assert result.passed and result.finding is None and result.counterexample is None
    assert result.examples >= 1 and result.rejected_examples == 0


@pytest.mark.parametrize("launcher, dims, cell_name", [
    (checks_dtype, N, "dtype:float16"),
    (checks_dtype, N, "dtype:bfloat16"),
    (checks_dims, N, "shape:beyond-range"),
    (checks_contiguous, {"M": Dim(2, 64), "N": Dim(2, 64)}, "layout:transposed"),
    (checks_contiguous, {"M": Dim(2, 64), "N": Dim(2, 64)}, "layout:sliced"),
], ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", ""))
def test_clean_rejections_make_a_rejected_cell(launcher, dims, cell_name):
    inputs = MATRIX if "M" in dims else VECTOR
    result = cell(declare(launcher, inputs=inputs, dims=dims), cell_name)
    assert result.outcome == "rejected", (result.finding, result.message)
    assert result.passed
    assert result.examples == result.rejected_examples >= 1


def test_a_rejecting_launcher_still_honours_in_contract_cells():
    result = cell(declare(checks_dtype), "dtype:float32")
    assert result.outcome == "honoured" and result.rejected_examples == 0


def drifting():
    """A launcher whose result moves by one more ulp on every call (like an ever-changing reduction order)."""
    calls = itertools.count()

    def drifts(x):
        out = x * 2
        k = next(calls)
        return out + k * torch.finfo(out.dtype).eps * out.abs()  # BUG: never the same bits twice

    return drifts


def flipping():
    """A launcher with two possible results, alternating (like two orders of an atomic reduction)."""
    calls = itertools.count()

    def flips(x):
        out = x * 2
        return out + (next(calls) % 2) * torch.finfo(out.dtype).eps * out.abs()  # BUG: two answers

    return flips


def drifts_from_the_third_call():
    """A launcher whose bits change from the third call in a row on the same inputs (as one that switches
    to another reduction order once a shape is hot): only a third call on an example's inputs shows it."""
    state = {"last": None, "in_a_row": 0}

    def third_call_drifts(x):
        key = (tuple(x.shape), tuple(x.flatten().tolist()))
        state["in_a_row"] = state["in_a_row"] + 1 if key == state["last"] else 1
        state["last"] = key
        out = x * 2
        return out + (state["in_a_row"] >= 3) * torch.finfo(out.dtype).eps * out.abs()  # BUG: the third call on

    return third_call_drifts


def test_the_determinism_cell_catches_nondeterminism():
    # was a bug: reported as unsafe/poisoned-read
    result = cell(declare(drifting()), "determinism")
    assert (result.outcome, result.finding) == ("wrong", "nondeterministic")
    # The determinism cell's own third call: every other cell calls an example twice, and passes this one.
    late = declare(drifts_from_the_third_call())
    assert cell(late, "layout:contiguous").outcome == "honoured"
    result = cell(late, "determinism")
    assert (result.outcome, result.finding) == ("wrong", "nondeterministic"), (result.outcome, result.message)


def test_nondeterminism_is_told_apart_from_a_poisoned_read_in_every_cell():
    found = run_example(declare(drifting()), vec(4), Backend())
    assert (found.outcome, found.kind) == ("wrong", "nondeterministic")
    gap = run_example(declare(reads_the_gaps, inputs=VECTOR_ANY), vec(4, {"x": Layout("sliced", steps=(2,))}),
                      Backend())
    assert gap.kind == "poisoned-read"


def test_a_two_valued_nondeterminism_is_not_a_poisoned_read():
    found = run_example(declare(flipping()), vec(4), Backend())
    assert (found.outcome, found.kind) == ("wrong", "nondeterministic")


def test_nondeterminism_is_not_blamed_on_subjects_that_do_not_claim_determinism():
    subject = declare(jitters, deterministic=False)
    assert cell(subject, "determinism").outcome == "skipped"
    assert cell(subject, "layout:contiguous").outcome == "honoured"


@pytest.mark.parametrize("cell_name", ["layout:transposed", "layout:padded", "layout:sliced", "layout:broadcast"])
def test_an_is_contiguous_check_passes_the_layout_cells(cell_name):
    # was a bug: a (1, 1) "transposed" input has contiguous strides, yet had to be rejected
    result = cell(declare(checks_contiguous, inputs=MATRIX, dims=MN), cell_name)
    assert result.passed, (result.finding, result.counterexample)
    assert result.rejected_examples >= 1


def test_in_contract_cells_draw_in_contract_dims():
    seen = []
    result = cell(declare(checks_dims, dims={"N": Dim(8, 64)}), "layout:contiguous", on_example=seen.append,
                  max_examples=60)
    assert result.passed
    assert all(8 <= s.dims["N"] <= 64 for s in seen), sorted({s.dims["N"] for s in seen})


def test_on_example_sees_every_example():
    seen = []
    result = cell(declare(correct), "layout:contiguous", on_example=seen.append)
    assert len(seen) == result.examples == PROFILES["ci"].max_examples == 10  # 0 == 0 passed before
    assert all(isinstance(s, Spec) for s in seen)


def test_max_examples_overrides_the_profile():
    seen = []
    cell(declare(correct), "layout:contiguous", on_example=seen.append, max_examples=3)
    assert len(seen) == 3


def test_the_ci_profile_is_repeatable():
    subject = declare(correct)
    first, second = [], []
    cell(subject, "layout:contiguous", on_example=first.append)
    cell(subject, "layout:contiguous", on_example=second.append)
    assert len(first) == 10 and first == second  # two empty lists were equal too


@pytest.mark.parametrize("subject_kw, cell_name, reason", [
    ({}, "values:nan", "value class 'nan' not claimed"),
    ({}, "layout:transposed", "needs an input of rank >= 2"),
    ({"deterministic": False}, "determinism", "does not claim determinism"),
], ids=["unclaimed-values", "rank-1-transpose", "nondeterministic"])
def test_inapplicable_cells_are_skipped(subject_kw, cell_name, reason):
    result = cell(declare(raises_inside, **subject_kw), cell_name)  # never called
    assert result.outcome == "skipped" and reason in result.message and result.passed


def test_untestable_dtypes_are_skipped_with_the_backends_reason():
    backend = Backend(untestable_dtypes=(("bfloat16", "bf16 is broken here"),))
    result = run_cell(declare(raises_inside), "dtype:bfloat16", backend=backend, config=run_config(profile="ci"))
    assert (result.outcome, result.message) == ("skipped", "bf16 is broken here")


def test_claimed_nan_values_are_checked():
    subject = declare(correct, values=("nan", "inf"))
    assert cell(subject, "values:nan").outcome == "honoured"
    assert cell(subject, "values:inf").outcome == "honoured"

    def nan_to_zero(x):
        return torch.nan_to_num(x, nan=0.0) * 2  # BUG: hides NaN inputs

    result = cell(declare(nan_to_zero, values=("nan",)), "values:nan")
    assert (result.outcome, result.finding) == ("wrong", "nan-mismatch")


def test_expected_failures_are_carried_on_the_result():
    result = cell(declare(off_by_a_little, xfail="adds 1e-3"), "layout:contiguous")
    assert result.expected_failure == "adds 1e-3" and result.outcome == "wrong"


def test_an_unknown_profile_is_refused():
    with pytest.raises(ConformanceUsageError, match="profile='weekly'"):
        run_config(profile="weekly")


def test_results_round_trip_through_dicts():
    from triton_conformance.model.outcomes import CellResult

    result = cell(declare(leaves_the_last_element), "layout:contiguous")
    assert CellResult.from_dict(result.to_dict()) == result


# -- masks -------------------------------------------------------------------

def masked_softmax(x, mask):
    return torch.softmax(x.masked_fill(~mask, -math.inf), -1)


def masked_softmax_zero_rows(x, mask):
    out = masked_softmax(x, mask)
    return torch.where(mask.any(-1, keepdim=True), out, torch.zeros_like(out))


def masked_softmax_rejecting(x, mask):
    if not bool(mask.any(-1).all()):
        raise ValueError("mask has a fully masked row, expected every row to keep a key")
    return masked_softmax(x, mask)


def masked(launcher, policy, **kw):
    return declare(launcher, inputs={"x": Tensor(("M", "N")), "mask": Mask(("M", "N"), fully_masked=policy)},
                   dims={"M": Dim(1, 16), "N": Dim(1, 64)}, oracle=masked_softmax, **kw)


@pytest.mark.parametrize("launcher, policy, cell_name, outcome, finding", [
    (masked_softmax_zero_rows, "zeros", "mask:fully-masked", "honoured", None),
    (masked_softmax_zero_rows, "zeros", "mask:causal", "honoured", None),
    (masked_softmax_zero_rows, "zeros", "mask:broadcast", "honoured", None),
    (masked_softmax, "nan", "mask:fully-masked", "honoured", None),
    (masked_softmax, "zeros", "mask:fully-masked", "wrong", "nan-mismatch"),
    (masked_softmax_zero_rows, "nan", "mask:fully-masked", "wrong", "nan-mismatch"),
    (masked_softmax_rejecting, "reject", "mask:fully-masked", "rejected", None),
    # Outside the contract (policy 'reject'), the NaN rows it returns are what the oracle gives: right.
    (masked_softmax, "reject", "mask:fully-masked", "accepted", None),
    (masked_softmax_zero_rows, "reject", "mask:fully-masked", "wrong", "nan-mismatch"),
], ids=lambda v: getattr(v, "__name__", v))
def test_fully_masked_row_policies(launcher, policy, cell_name, outcome, finding):
    result = cell(masked(launcher, policy), cell_name)
    assert (result.outcome, result.finding) == (outcome, finding), result.message


def test_a_strict_contract_must_refuse_fully_masked_rows():
    result = cell(masked(masked_softmax, "reject", strict=True), "mask:fully-masked")
    assert (result.outcome, result.finding) == ("wrong", "accepted-out-of-contract"), result.message


# -- reproducers -------------------------------------------------------------

def test_the_reproducer_runs_and_fails_the_same_way(monkeypatch, capsys):
    subject = declare(writes_past_the_end)
    result = cell(subject, "layout:contiguous")
    assert result.reproducer.startswith(f"# {subject.name}[layout:contiguous]: unsafe (oob-write)")
    # run it here, but keep triton out of this process: the interpreter backend is a plain CPU Backend
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(backend_module, "current_backend", lambda device: Backend())
    with pytest.raises(AssertionError, match=rf"{subject.name}: unsafe \(oob-write\)"):
        exec(compile(result.reproducer, "<reproducer>", "exec"), {})
    printed = capsys.readouterr().out
    assert "x: shape=(" in printed and "verdict: unsafe / oob-write" in printed


def writes_one_byte_poison(x):
    # 0xA5 is the first output poison of one-byte dtypes: a legitimate result all the same
    out = torch.empty(x.shape, dtype=torch.uint8)
    out.fill_(0xA5)
    return out


def test_a_result_equal_to_one_poison_is_not_unwritten():
    subject = declare(writes_one_byte_poison, oracle=lambda x: torch.full(x.shape, 165.0, dtype=torch.float64))
    result = cell(subject, "layout:contiguous")
    assert result.outcome == "honoured", (result.finding, result.message)


def test_an_error_scale_with_too_few_scales_is_an_error_of_the_declaration():
    def pair(x):
        return x * 2, x * 3

    subject = declare(pair, oracle=lambda x: (x * 2, x * 3), error_scale=lambda x: x.abs())
    result = cell(subject, "layout:contiguous")
    assert (result.outcome, result.finding) == ("oracle-error", "oracle-raised"), result.message
    assert "returned 1 scale(s) for the oracle's 2 output(s)" in result.message


def test_the_bitwise_comparison_tells_signed_zeros_and_float64_ulps_apart():
    from triton_conformance.conformance.battery.checks import Run, differing_outputs

    def run(*outputs):
        return Run(tuple(outputs), None)

    zero, minus_zero = torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0])
    one = torch.tensor([1.0], dtype=torch.float64)
    above = torch.nextafter(one, torch.tensor([2.0], dtype=torch.float64))  # equal once rounded to fp32
    assert differing_outputs(run(zero, one), run(minus_zero, above)) == [0, 1]
    assert differing_outputs(run(zero, one), run(zero.clone(), one.clone())) == []
