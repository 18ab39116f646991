"""The contract features real launchers need (issue 12 section 2).

Declared value ranges and the ``values:extreme`` cell, integer inputs tied to a
dim (class indices with an ignore index), boolean flags, inputs that share a
dtype, any dim drawn wide, and per-dtype accumulation in the tolerance.  Each
test fails without its feature; the checks are shown catching a pure-torch bug
and passing its twin (the Triton versions are in ``tests/zoo/zoo_features.py``).
"""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from tests._subjects import as_subject
from hypothesis import find, settings
from hypothesis.errors import NoSuchExample

import triton_conformance as tc
from triton_conformance import Contract, Dim, InvalidContract, Scalar, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.kinds import cells_for
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config
from triton_conformance.oracles.tolerance import UNIT_ROUNDOFF, accumulation_dtype, default_bound
from triton_conformance.strategies import Spec, build_inputs, specs
from triton_conformance.strategies._internal.specs import WIDE_OUTER_FACTOR

_ids = itertools.count()
SEARCH = settings(max_examples=400, derandomize=True, database=None, deadline=None)


def declare(launcher, **kw):
    return tc.register(launcher, name=f"features_{launcher.__name__}_{next(_ids)}", **kw)


def cell(subject, name):
    return run_cell(subject, name, backend=Backend(), config=run_config(profile="ci"))


def contract(inputs, dims, oracle=lambda **kw: None, **kw):
    return Contract(inputs=inputs, dims=dims, oracle=oracle, **kw)


def invalid(match, fn, *args, **kw):
    with pytest.raises(InvalidContract, match=match):
        fn(*args, **kw)


# -- 1. value ranges and the extreme class ------------------------------------

@pytest.mark.parametrize("value_range, match", [
    ((1.0, 1.0), r"value_range=\(1.0, 1.0\), expected low < high"),
    ((2, 1), r"value_range=\(2, 1\), expected low < high"),
    ((0, math.inf), r"value_range=\(0, inf\), expected \(low, high\): two finite numbers"),
    ((math.nan, 1), r"value_range=\(nan, 1\), expected \(low, high\)"),
    ((0, 1, 2), r"value_range=\(0, 1, 2\), expected \(low, high\)"),
    ("wide", r"value_range='wide', expected \(low, high\)"),
])
def test_a_value_range_is_two_finite_numbers_low_below_high(value_range, match):
    invalid("Tensor: " + match, Tensor, ("N",), value_range=value_range)


ROWS = {"x": Tensor(("M", "N"), dtypes=("float32",), value_range=(-1e4, 1e4)), "y": Tensor(("M", "N"))}
MN = {"M": Dim(1, 16), "N": Dim(1, 64)}


def _build(c, values, seed, dims=None, dtype="float32"):
    spec = Spec(dims=dims or {"M": 16, "N": 64}, dtypes={n: dtype for n in c.inputs}, layouts={},
                values=values, seed=seed)
    return build_inputs(c, spec).views


@pytest.mark.parametrize("value_range, lo, hi", [((0.0, 1.0), 0.0, 1.0), ((1e-3, 10.0), 1e-3, 10.0),
                                                 ((-0.25, 0.25), -0.25, 0.25)])
def test_ordinary_values_are_drawn_inside_the_declared_range(value_range, lo, hi):
    c = contract({"x": Tensor(("M", "N"), value_range=value_range), "y": Tensor(("M", "N"))}, MN)
    for seed in range(5):
        views = _build(c, "ordinary", seed)
        x = views["x"]
        assert lo <= float(x.min()) and float(x.max()) <= hi, (seed, float(x.min()), float(x.max()))
        assert x.unique().numel() > x.numel() // 2, "still distinct values"
        assert float(views["y"].min()) < 0 < float(views["y"].max()), "an input without a range keeps N(0, 1)"


def test_ordinary_values_of_a_wide_range_stay_moderate():
    x = _build(contract(ROWS, MN), "ordinary", 3)["x"]
    assert float(x.abs().max()) < 10


def test_extreme_values_reach_the_ends_of_the_range_and_fill_whole_rows():
    c = contract(ROWS, MN)
    seen_low_row = seen_high_row = False
    for seed in range(6):
        views = _build(c, "extreme", seed)
        x = views["x"]
        assert float(x.abs().max()) <= 1e4 and float(x.abs().max()) >= 5e3
        assert float((x.abs() >= 5e3).float().mean()) >= 0.5, "at least half the elements at 0.5..1 of an end"
        seen_low_row |= bool((x <= -5e3).all(dim=-1).any())
        seen_high_row |= bool((x >= 5e3).all(dim=-1).any())
        assert float(views["y"].abs().max()) < 10, "value classes apply per input: y has no range"
    assert seen_low_row and seen_high_row


def test_extreme_values_stay_inside_the_range_after_rounding_to_fp16():
    c = contract({"x": Tensor(("M", "N"), dtypes=("float16",), value_range=(-1e4, 3e3))}, MN)
    x = _build(c, "extreme", 1, dtype="float16")["x"]
    assert -1e4 <= float(x.min()) and float(x.max()) <= 3e3 and float(x.min()) < -5e3


def test_the_extreme_cell_exists_for_ranged_subjects_only_and_cannot_be_claimed():
    assert "values:extreme" in cells_for(as_subject(contract(ROWS, MN)))
    assert "values:extreme" not in cells_for(as_subject(contract({"x": Tensor(("M", "N"))}, MN)))
    invalid(r"values='extreme', expected value classes from .*applies to every input that declares a value_range",
            contract, ROWS, MN, values=("extreme",))


def _online_softmax(x, *, start):
    """A blockwise online softmax in torch: the running max starts at ``start``."""
    m = torch.full(x.shape[:1], start, dtype=torch.float32)
    s = torch.zeros(x.shape[:1], dtype=torch.float32)
    for block in x.float().split(16, dim=1):
        new = torch.maximum(m, block.max(dim=1).values)
        s = s * torch.exp(m - new) + torch.exp(block - new[:, None]).sum(dim=1)
        m = new
    return (torch.exp(x.float() - m[:, None]) / s[:, None]).to(x.dtype)


def test_a_running_max_that_starts_at_zero_is_caught_only_with_a_range():
    def bug(x):
        return _online_softmax(x, start=0.0)

    def twin(x):
        return _online_softmax(x, start=-math.inf)

    plain = {"x": Tensor(("M", "N"), dtypes=("float32",))}
    kw = dict(dims=MN, oracle=lambda x: torch.softmax(x, -1), reduces="N")
    unranged = declare(bug, inputs=plain, **kw)
    assert "values:extreme" not in cells_for(unranged)
    assert cell(unranged, "layout:contiguous").outcome == "honoured", "N(0, 1) rows never show it"
    ranged = {"x": Tensor(("M", "N"), dtypes=("float32",), value_range=(-1e4, 1e4))}
    caught = cell(declare(bug, inputs=ranged, **kw), "values:extreme")
    assert (caught.outcome, caught.finding) == ("wrong", "nan-mismatch"), caught.message
    assert cell(declare(twin, inputs=ranged, **kw), "values:extreme").outcome == "honoured"


# -- 2. integer inputs tied to a dim ---------------------------------------------

CE = {"logits": Tensor(("M", "V"), dtypes=("float32",)),
      "target": Tensor(("M",), dtypes=("int64",), index_of="V", special=(-100,))}
MV = {"M": Dim(1, 64), "V": Dim(1, 32)}


@pytest.mark.parametrize("kw, match", [
    (dict(dtypes=("float32",), index_of="V"), r"Tensor: dtypes=\('float32',\), expected integer dtypes"),
    (dict(dtypes=("int64",), index_of="V", value_range=(0, 4)), r"Tensor: value_range=\(0, 4\), expected None"),
    (dict(dtypes=("int64",), special=(-100,)), r"Tensor: special=\(-100,\), expected index_of= set as well"),
    (dict(dtypes=("uint8",), index_of="V", special=(-100,)), r"Tensor: special=-100, expected a value representable "
                                                             r"in uint8, \[0, 255\]"),
    (dict(dtypes=("int64",), index_of="V", special=(0.5,)), r"Tensor: special=0.5, expected integers"),
    (dict(dtypes=("int64",), index_of="V V"), r"Tensor: index_of='V V', expected a dim symbol"),
])
def test_index_inputs_are_validated(kw, match):
    invalid(match, Tensor, ("M",), **kw)


def test_index_of_names_a_declared_dim():
    invalid(r"Contract: inputs\['t'\].index_of='W', expected a dim declared in dims=\['M', 'V'\]", contract,
            {"x": Tensor(("M", "V")), "t": Tensor(("M",), dtypes=("int64",), index_of="W")}, MV)


def test_indices_are_drawn_below_their_dim_with_the_ignore_index_at_some_positions():
    c = contract(CE, MV)
    for v in (1, 7, 32):
        spec = Spec(dims={"M": 64, "V": v}, dtypes={"logits": "float32", "target": "int64"}, layouts={}, seed=v)
        t = build_inputs(c, spec).views["target"]
        assert t.dtype == torch.int64
        real = t[t != -100]
        assert real.numel() and 0 <= int(real.min()) and int(real.max()) < v
        assert 0 < int((t == -100).sum()) < t.numel()


def test_the_oracle_gets_integer_inputs_as_integers():
    seen = {}

    def oracle(logits, target):
        seen["dtypes"] = (logits.dtype, target.dtype)
        return F.cross_entropy(logits, target, ignore_index=-100, reduction="none")

    def launcher(logits, target):
        return F.cross_entropy(logits, target, ignore_index=-100, reduction="none")

    result = cell(declare(launcher, inputs=CE, dims=MV, oracle=oracle, reduces="V"), "layout:contiguous")
    assert result.outcome == "honoured", result.message
    assert seen["dtypes"] == (torch.float64, torch.int64)


def test_a_loss_that_ignores_the_ignore_index_is_caught():
    def bug(logits, target):
        safe = target.clamp(min=0)  # gathers a real class for ignored rows and keeps its loss
        return torch.logsumexp(logits, -1) - logits.gather(1, safe[:, None])[:, 0]

    def twin(logits, target):
        loss = torch.logsumexp(logits, -1) - logits.gather(1, target.clamp(min=0)[:, None])[:, 0]
        return torch.where(target == -100, 0.0, loss)

    kw = dict(inputs=CE, dims=MV, oracle=lambda logits, target: F.cross_entropy(
        logits, target, ignore_index=-100, reduction="none"), reduces="V")
    caught = cell(declare(bug, **kw), "dtype:float32")
    assert (caught.outcome, caught.finding) == ("wrong", "mismatch"), caught.message
    assert cell(declare(twin, **kw), "dtype:float32").outcome == "honoured"


# -- 3. boolean flags ---------------------------------------------------------------

def test_bool_scalars_take_no_bounds_and_are_drawn_true_and_false():
    flag = Scalar(kind="bool")
    assert (flag.low, flag.high) == (False, True)
    invalid(r"Scalar: low=0, expected no low for a bool flag", Scalar, 0, kind="bool")
    invalid(r"Scalar: low=None, expected a finite number", Scalar, kind="float")
    invalid(r"Scalar: kind='flag', expected one of \('float', 'int', 'bool'\)", Scalar, kind="flag")
    c = contract({"x": Tensor(("N",))}, {"N": Dim(1, 8)}, scalars={"relu": flag})
    for want in (True, False):
        spec = find(specs(c), lambda s, w=want: s.scalars["relu"] is w, settings=SEARCH)
        assert type(spec.scalars["relu"]) is bool


def test_a_flag_reaches_the_launcher_and_the_oracle():
    seen = set()

    def launcher(x, relu):
        seen.add(relu)
        return x.clamp(min=0) if relu else x.clone()

    subject = declare(launcher, inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 64)},
                      oracle=lambda x, relu: x.clamp(min=0) if relu else x, scalars={"relu": Scalar(kind="bool")})
    assert cell(subject, "layout:contiguous").outcome == "honoured"
    assert seen == {True, False}


# -- 4. inputs that share a dtype ---------------------------------------------------------

SHARED = {"x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any"),
          "w": Tensor(("N",), same_dtype_as="x", layouts="any")}


def test_same_dtype_inputs_take_the_dtypes_of_the_one_they_follow():
    c = contract(SHARED, MN)
    assert c.inputs["w"].dtypes == ("float16", "float32")
    chained = contract(dict(SHARED, b=Tensor(("N",), same_dtype_as="w")), MN)
    assert chained.inputs["b"].same_dtype_as == "x" and chained.inputs["b"].dtypes == ("float16", "float32")


@pytest.mark.parametrize("inputs, match", [
    ({"x": Tensor(("N",)), "w": Tensor(("N",), same_dtype_as="z")}, r"inputs\['w'\].same_dtype_as='z', expected "
                                                                    r"the name of a Tensor input"),
    ({"x": Tensor(("N",), same_dtype_as="w"), "w": Tensor(("N",), same_dtype_as="x")}, r"expected no cycle"),
    ({"x": Tensor(("N",), dtypes=("float16",)), "w": Tensor(("N",), dtypes=("float32",), same_dtype_as="x")},
     r"inputs\['w'\].dtypes=\('float32',\), expected those of 'x', \('float16',\), or none"),
])
def test_same_dtype_declarations_are_validated(inputs, match):
    invalid(match, contract, inputs, {"N": Dim(1, 8)})


@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16", "float64"])
def test_dtype_cells_and_probes_change_same_dtype_inputs_together(dtype):
    c = contract(SHARED, MN)
    with pytest.raises(NoSuchExample):
        find(specs(c, dtype=dtype), lambda s: s.dtypes["w"] != s.dtypes["x"], settings=SEARCH)
    assert find(specs(c, dtype=dtype), lambda s: True, settings=SEARCH).dtypes["w"] == dtype


def test_a_launcher_that_needs_equal_dtypes_is_honoured_only_when_the_contract_says_so():
    def launcher(x, w):
        assert x.dtype == w.dtype, f"x is {x.dtype}, w is {w.dtype}"
        return x * w

    kw = dict(dims=MN, oracle=lambda x, w: x * w)
    tied = declare(launcher, inputs=SHARED, **kw)
    assert cell(tied, "dtype:float16").outcome == "honoured"
    untied = declare(launcher, inputs=dict(SHARED, w=Tensor(("N",), dtypes=("float32", "float16"), layouts="any")),
                     **kw)
    spec = find(specs(untied.contract, dtype="float16"), lambda s: True, settings=SEARCH)
    assert spec.dtypes == {"x": "float16", "w": "float16"}, "claiming the same dtypes already ties them"
    loose = declare(launcher, inputs=dict(SHARED, w=Tensor(("N",), dtypes=("float32",), layouts="any")), **kw)
    assert not cell(loose, "dtype:float16").passed, "without the tie, w stays fp32 in the fp16 cell"


# -- 5. any dim drawn wide ------------------------------------------------------------

LONG_BATCH = {"x": Tensor(("M", "N"), dtypes=("float32",))}
LONG_DIMS = {"M": Dim(1, 1 << 16), "N": Dim(1, 8192)}


def test_another_dim_than_the_reduced_one_is_sometimes_drawn_wide_within_the_budget():
    c = contract(LONG_BATCH, LONG_DIMS, reduces="N")
    strategy = specs(c, max_elements=4096, max_outer=16)
    wide = find(strategy, lambda s: s.dims["M"] > 16, settings=SEARCH)
    assert wide.dims["N"] <= 16 and wide.dims["M"] * wide.dims["N"] <= 4096
    with pytest.raises(NoSuchExample):
        find(strategy, lambda s: s.dims["M"] > WIDE_OUTER_FACTOR * 16 or s.dims["M"] * s.dims["N"] > 4096,
             settings=SEARCH)


def test_the_beyond_block_cell_may_pin_an_outer_dim_with_the_rest_small():
    c = contract(LONG_BATCH, LONG_DIMS, reduces="N")
    spec = find(specs(c, shape="beyond-block", max_elements=4096, max_outer=16), lambda s: s.dims["M"] >= 4097,
                settings=SEARCH)
    assert spec.dims["N"] == 1
    find(specs(c, shape="beyond-block", max_elements=4096, max_outer=16), lambda s: s.dims["N"] >= 4097,
         settings=SEARCH)


def _packed_sum(x, *, floor):
    """Row sums computed in tiles of 2048 rows: ``floor`` drops a partial last tile, as ``M // 2048`` would."""
    M = x.shape[0]
    tiles = max(1, M // 2048) if floor else -(-M // 2048)
    out = torch.empty(M, dtype=x.dtype)
    for t in range(tiles):
        out[t * 2048:(t + 1) * 2048] = x[t * 2048:(t + 1) * 2048].sum(-1)
    return out


def test_a_grid_bug_past_2048_short_rows_is_caught_by_a_wide_outer_dim():
    def bug(x):
        return _packed_sum(x, floor=True)

    def twin(x):
        return _packed_sum(x, floor=False)

    kw = dict(inputs=LONG_BATCH, dims=LONG_DIMS, oracle=lambda x: x.sum(-1), reduces="N")
    caught = cell(declare(bug, **kw), "shape:beyond-block")
    assert (caught.outcome, caught.finding) == ("unsafe", "unwritten"), caught.message
    assert caught.counterexample.spec["dims"]["M"] > 2048
    assert cell(declare(twin, **kw), "shape:beyond-block").outcome == "honoured"


# -- 6. per-dtype accumulation ---------------------------------------------------------

@pytest.mark.parametrize("accumulate, match", [
    ("half", r"accumulate='half', expected a float dtype .*'input' \(the input dtype\), or a mapping"),
    ({"int8": "float16"}, r"accumulate='int8', expected input dtypes from"),
    ({"float16": "fp16"}, r"accumulate\['float16'\]='fp16', expected an accumulation dtype from"),
])
def test_accumulate_is_a_dtype_input_or_a_mapping(accumulate, match):
    invalid("Contract: " + match, contract, {"x": Tensor(("N",))}, {"N": Dim(1, 8)}, accumulate=accumulate)


def test_the_accumulation_dtype_follows_the_example_input_dtype():
    inputs = {"x": Tensor(("N",), dtypes=("float16", "float32")), "i": Tensor(("N",), dtypes=("int32",))}
    mapping = contract(inputs, {"N": Dim(1, 8)}, accumulate={"float16": "float16", "float32": "float32"})
    assert mapping.accumulation({"x": "float16", "i": "int32"}) == "float16"
    assert mapping.accumulation({"x": "float32", "i": "int32"}) == "float32"
    assert mapping.accumulation({"x": "bfloat16", "i": "int32"}) == "float32", "a dtype it leaves out: fp32"
    assert contract(inputs, {"N": Dim(1, 8)}, accumulate="input").accumulation({"x": "float16"}) == "float16"
    assert contract(inputs, {"N": Dim(1, 8)}).accumulation({"x": "float16"}) == "float32"
    assert accumulation_dtype({"float16": "float16"}, "float16") == "float16"
    assert accumulation_dtype("input", None) == "float32"
    wide = default_bound(out_dtype="float16", accumulate="input", input_dtype="float16", reduction=64)
    narrow = default_bound(out_dtype="float16", accumulate="float32", reduction=64)
    assert wide.rtol == pytest.approx(UNIT_ROUNDOFF["float16"] * (4 + 8 * 8)) and narrow.rtol < wide.rtol / 7


def test_the_judge_bound_uses_the_declared_per_dtype_accumulation():
    def launcher(x):
        return x.sum(-1)

    s = declare(launcher, inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"))}, dims=MN,
                oracle=lambda x: x.sum(-1), reduces="N", accumulate={"float16": "float16"})
    out = torch.zeros(4, dtype=torch.float16)
    ref = torch.ones(4, dtype=torch.float64)
    fp16 = Judge(s).bound({"M": 4, "N": 64}, {"x": "float16"}, out, ref)
    fp32 = Judge(s).bound({"M": 4, "N": 64}, {"x": "float32"}, out.float(), ref)
    assert fp16.rtol == pytest.approx(UNIT_ROUNDOFF["float16"] * (4 + 8 * 8))
    assert fp32.rtol == pytest.approx(UNIT_ROUNDOFF["float32"] * (4 + 8 * 8))


def _fp16_lane_sum(x):
    """16 lanes accumulating every 16th element in the input dtype (fp16 rounds every partial sum)."""
    M, N = x.shape
    acc = torch.zeros(M, 16, dtype=x.dtype)
    padded = torch.cat([x, torch.zeros(M, (-N) % 16, dtype=x.dtype)], dim=1)
    for block in padded.split(16, dim=1):
        acc = acc + block
    return acc.float().sum(-1).to(x.dtype)


def test_an_fp16_accumulator_is_caught_unless_declared():
    kw = dict(inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"))}, dims={"M": Dim(1, 64),
              "N": Dim(1, 8192)}, oracle=lambda x: x.sum(-1), reduces="N")
    caught = cell(declare(_fp16_lane_sum, **kw), "dtype:float16")
    assert (caught.outcome, caught.finding) == ("wrong", "mismatch"), caught.message
    declared = declare(_fp16_lane_sum, accumulate={"float16": "float16", "float32": "float32"}, **kw)
    assert cell(declared, "dtype:float16").outcome == "honoured"
    assert cell(declared, "dtype:float32").outcome == "honoured"


def test_a_wide_draw_shrinks_back_to_the_ordinary_one():
    c = contract(LONG_BATCH, LONG_DIMS, reduces="N")
    spec = find(specs(c, max_elements=4096, max_outer=16), lambda s: s.dims["N"] >= 1, settings=SEARCH)
    assert spec.dims["M"] <= 16


def test_cells_that_run_at_a_fixed_size_pass_a_flag_as_false_not_a_midpoint():
    from triton_conformance import Scalar
    from triton_conformance.conformance.kinds.large_index.example import large_index_plan

    assert Scalar(kind="bool").representative() is False
    assert Scalar(3, 9, kind="int").representative() == 3
    assert Scalar(0.0, 1.0).representative() == 0.5
    contract = Contract(inputs={"x": Tensor(("N",), dtypes=("float16",))}, dims={"N": Dim(1, 1 << 32)},
                        scalars={"flag": Scalar(kind="bool")}, oracle=lambda x, flag: x)
    assert large_index_plan(contract).scalars == {"flag": False}  # it was 0.5
