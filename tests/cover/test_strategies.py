"""Strategies: sizes, layouts and strides_for, specs per cell, and build_inputs."""

import math

import pytest
import torch
from hypothesis import HealthCheck, find, given, settings
from hypothesis.errors import NoSuchExample
from hypothesis import strategies as st

from triton_conformance import Contract, Dim, InvalidArgument, Mask, Scalar, Tensor
from triton_conformance.conformance.kinds import kind_of
from triton_conformance.strategies import (
    LAYOUT_CLASSES,
    Layout,
    Spec,
    boundary_sizes,
    build_inputs,
    layouts,
    non_power_of_two_sizes,
    sizes,
    specs,
    strides_for,
)
from triton_conformance.model.spec import GUARD_ELEMENTS
from triton_conformance.strategies._internal.specs import WIDE_OUTER_FACTOR

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# for find() that must come up empty: a bounded, repeatable search
SEARCH = settings(max_examples=300, derandomize=True, database=None, deadline=None)


def is_pow2(n):
    return n > 0 and (n & (n - 1)) == 0


# -- sizes ---------------------------------------------------------------

@pytest.mark.parametrize("lo, hi", [(1, 1), (0, 10), (1, 100), (5, 5000), (4000, 4200)],
                         ids=lambda v: str(v))
def test_boundary_sizes_hold_every_power_of_two_and_its_neighbours(lo, hi):
    got = boundary_sizes(lo, hi)
    assert list(got) == sorted(set(got)), "sorted, no duplicates"
    assert all(lo <= v <= hi for v in got)
    assert lo in got and hi in got
    for k in range(1, 16):
        for v in (2**k - 1, 2**k, 2**k + 1):
            if lo <= v <= hi:
                assert v in got, v
    if lo <= 1 <= hi:
        assert 1 in got


def test_boundary_sizes_include_primes_near_block_sizes():
    got = boundary_sizes(1, 4096)
    assert {61, 67, 127, 131, 509, 521, 1021, 1031} <= set(got)


@given(st.data())
@FAST
def test_sizes_stay_in_bounds_from_small_minimums(data):
    lo = data.draw(st.integers(0, 3), label="lo")
    hi = data.draw(st.integers(lo, 5000), label="hi")
    assert lo <= data.draw(sizes(min_value=lo, max_value=hi)) <= hi


@pytest.mark.parametrize("lo, hi", [(4, 4), (100, 200), (16, 4096), (4000, 8192)], ids=lambda v: str(v))
def test_sizes_stay_in_bounds_from_large_minimums(lo, hi):
    # was a bug: sizes(min_value=100, max_value=200) could draw 3
    with pytest.raises(NoSuchExample):
        find(sizes(min_value=lo, max_value=hi), lambda n: not lo <= n <= hi, settings=SEARCH)


@given(st.data())
@FAST
def test_non_power_of_two_sizes_avoid_powers_of_two(data):
    lo = data.draw(st.integers(1, 100), label="lo")
    hi = data.draw(st.integers(lo + 2, 5000), label="hi")  # always holds some 2^k +- 1 or prime
    n = data.draw(non_power_of_two_sizes(min_value=lo, max_value=hi))
    assert lo <= n <= hi
    assert not is_pow2(n)


def test_non_power_of_two_sizes_fall_back_when_the_range_holds_none():
    assert find(non_power_of_two_sizes(min_value=4, max_value=4), lambda n: True) == 4


@pytest.mark.parametrize("lo, hi", [(1, 8192), (7, 100), (0, 50)], ids=lambda v: str(v))
def test_sizes_shrink_towards_min_value(lo, hi):
    assert find(sizes(min_value=lo, max_value=hi), lambda n: True) == lo


def test_sizes_reach_past_the_largest_block():
    assert find(sizes(min_value=1, max_value=8192), lambda n: n > 4096) > 4096


@pytest.mark.parametrize("call, message", [
    (lambda: sizes(min_value=5, max_value=2), "sizes: cannot have max_value=2 < min_value=5"),
    (lambda: sizes(min_value=-1), "sizes: min_value=-1"),
    (lambda: sizes(max_value=2.5), "sizes: max_value=2.5"),
    (lambda: non_power_of_two_sizes(min_value=3, max_value=1), "non_power_of_two_sizes: cannot have"),
    (lambda: layouts("diagonal", 2), "layouts: kind='diagonal'"),
], ids=["max-below-min", "negative", "float", "npot-max-below-min", "unknown-layout"])
def test_strategies_validate_eagerly(call, message):
    with pytest.raises(InvalidArgument) as info:
        call()  # raised at call time, before any draw
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


# -- layouts and strides_for --------------------------------------------

def torch_layout(shape, layout):
    """The same layout built the way a user would: slice and permute a real tensor."""
    n = len(shape)
    perm = list(layout.perm or range(n))
    steps = layout.steps or (1,) * n
    physical = [1 if d in layout.broadcast else shape[d] for d in range(n)]
    extents = [physical[d] * steps[d] for d in perm]
    if n:
        extents[-1] += layout.pad
    total = math.prod(extents)
    base = torch.empty(layout.offset + total)
    t = base[layout.offset:].view(extents)
    if n:
        t = t[..., : extents[-1] - layout.pad]
        t = t[tuple(slice(None, None, steps[d]) for d in perm)]
        t = t.permute([perm.index(d) for d in range(n)])
        t = t.expand(shape)
    return t


LAYOUT_EXAMPLES = [
    ((5, 7), Layout()),
    ((5, 7), Layout("transposed", perm=(1, 0))),
    ((2, 3, 4), Layout("transposed", perm=(2, 0, 1))),
    ((5, 7), Layout("sliced", steps=(1, 2))),
    ((5, 7), Layout("sliced", steps=(3, 2))),
    ((9,), Layout("sliced", steps=(3,))),
    ((5, 7), Layout("padded", pad=3)),
    ((2, 3, 4), Layout("padded", pad=17)),
    ((5, 7), Layout("offset", offset=1)),
    ((5, 7), Layout("broadcast", broadcast=(0,))),
    ((5, 7), Layout("broadcast", broadcast=(1,))),
    ((2, 3, 4), Layout("broadcast", broadcast=(0, 2))),
    ((4, 6), Layout("mixed", perm=(1, 0), steps=(2, 1), pad=5, offset=3)),
]


@pytest.mark.parametrize("shape, layout", LAYOUT_EXAMPLES, ids=[f"{s}-{l!r}" for s, l in LAYOUT_EXAMPLES])
def test_strides_for_matches_torch(shape, layout):
    t = torch_layout(shape, layout)
    strides, offset, span = strides_for(shape, layout)
    assert strides == t.stride()
    assert offset == t.storage_offset()
    assert span <= layout.offset + t.untyped_storage().nbytes() // t.element_size()


@st.composite
def shapes_and_layouts(draw, min_size=1):
    ndim = draw(st.integers(1, 4), label="ndim")
    shape = tuple(draw(st.lists(st.integers(min_size, 6), min_size=ndim, max_size=ndim), label="shape"))
    kind = draw(st.sampled_from(LAYOUT_CLASSES), label="kind")
    return shape, draw(layouts(kind, ndim), label="layout")


@given(shapes_and_layouts())
@FAST
def test_strides_for_matches_torch_for_drawn_layouts(case):
    shape, layout = case
    expected = torch_layout(shape, Layout(layout.kind, layout.perm, layout.steps, layout.pad, layout.offset,
                                          layout.broadcast))
    strides, offset, _ = strides_for(shape, layout)
    assert offset == expected.storage_offset()
    for d, (got, want) in enumerate(zip(strides, expected.stride())):
        if layout.odd_stride and shape[d] == 1:
            assert got == layout.odd_stride
        elif d in layout.broadcast:
            assert got == 0
        elif shape[d] > 1:  # a size-1 dim may carry any stride
            assert got == want, (d, strides, expected.stride())


@given(shapes_and_layouts(min_size=0))
@FAST
def test_storage_elements_is_exactly_what_the_view_needs(case):
    shape, layout = case
    strides, offset, span = strides_for(shape, layout)
    assert offset == layout.offset
    numbered = torch.arange(span + 1)
    view = numbered[:span].as_strided(shape, strides, offset)  # must fit
    if view.numel():
        assert int(view.max()) == span - 1, "the last storage element is addressed"
        with pytest.raises(RuntimeError):
            torch.arange(span - 1).as_strided(shape, strides, offset)
    else:
        assert span == offset


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4).filter(lambda s: 1 in s), st.data())
@FAST
def test_odd_strides_on_size1_dims_address_the_same_elements(shape, data):
    shape = tuple(shape)
    layout = data.draw(layouts("size1", len(shape)))
    strides, offset, span = strides_for(shape, layout)
    plain, _, _ = strides_for(shape, Layout())
    numbered = torch.arange(span)
    assert torch.equal(numbered.as_strided(shape, strides, offset), numbered.as_strided(shape, plain, offset))


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0,), (3, 0, 2)], ids=str)
def test_strides_for_empty_shapes(shape):
    strides, offset, span = strides_for(shape, Layout())
    assert strides == torch.empty(shape).stride()
    assert span == offset == 0


@pytest.mark.parametrize("kind", LAYOUT_CLASSES)
@pytest.mark.parametrize("ndim", [1, 2, 3], ids=lambda n: f"rank{n}")
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_layouts_draw_their_class(kind, ndim, data):
    layout = data.draw(layouts(kind, ndim))
    if kind == "contiguous":
        assert layout == Layout()
        return
    assert layout.kind == kind
    if kind == "transposed":
        assert sorted(layout.perm) == list(range(ndim))
        if ndim > 1:
            assert layout.perm != tuple(range(ndim))
    elif kind == "sliced":
        assert len(layout.steps) == ndim and max(layout.steps) >= 2 and min(layout.steps) >= 1
    elif kind == "padded":
        assert layout.pad >= 1
    elif kind == "offset":
        assert layout.offset >= 1
    elif kind == "broadcast":
        assert layout.broadcast and set(layout.broadcast) <= set(range(ndim))
        assert list(layout.broadcast) == sorted(set(layout.broadcast))
    elif kind == "size1":
        assert layout.odd_stride > 1


@pytest.mark.parametrize("kind, mildest", [
    ("transposed", Layout("transposed", perm=(1, 0))),
    ("sliced", Layout("sliced", steps=(1, 2))),
    ("padded", Layout("padded", pad=1)),
    ("offset", Layout("offset", offset=1)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_layouts_shrink_to_the_mildest(kind, mildest):
    assert find(layouts(kind, 2), lambda lay: True) == mildest


@pytest.mark.parametrize("layout", [
    Layout(), Layout("transposed", perm=(1, 0)), Layout("mixed", perm=(0, 2, 1), steps=(2, 1, 3), pad=2,
                                                         offset=1, broadcast=(1,), odd_stride=7),
], ids=["default", "transposed", "everything"])
def test_layout_repr_and_dict_round_trip(layout):
    assert eval(repr(layout), {"Layout": Layout}) == layout
    assert Layout.from_dict(layout.to_dict()) == layout
    assert repr(layout).startswith(f"Layout({layout.kind!r}")


def test_layout_repr_omits_defaults():
    assert repr(Layout("offset", offset=1)) == "Layout('offset', offset=1)"


# -- specs ---------------------------------------------------------------

ROWS = Contract(
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any"),
            "w": Tensor(("N",), dtypes=("float16", "float32"), layouts="contiguous")},
    dims={"M": Dim(1, 300), "N": Dim(1, 8192)},
    oracle=lambda x, w, eps, k: x * w,
    reduces="N",
    values=("nan",),
    scalars={"eps": Scalar(1e-6, 1e-2), "k": Scalar(1, 5, kind="int")},
)
ATTN = Contract(
    inputs={"q": Tensor(("B", "M", "D"), layouts="any"), "k": Tensor(("B", "N", "D"), layouts="contiguous"),
            "mask": Mask(("B", "M", "N"), fully_masked="reject")},
    dims={"B": Dim(1, 4), "M": Dim(1, 64), "N": Dim(1, 256), "D": Dim(2, 64)},
    oracle=lambda q, k, mask: q,
)
EMPTY_OK = Contract(inputs={"x": Tensor(("N",))}, dims={"N": Dim(0, 20000)}, oracle=lambda x: x)
CONTRACTS = {"rows": ROWS, "attn": ATTN, "empty_ok": EMPTY_OK}


def count(spec, contract, name):
    return math.prod(spec.dims[s] for s in contract.inputs[name].shape)


def cell_specs(contract, cell, **kw):
    """The strategy the searched kind of ``cell`` draws from (its class pinned, the rest default)."""
    kind, value = kind_of(cell)
    return specs(contract, **kind.spec_options(value), **kw)


def all_drawn(contract, cell, n=25, **kw):
    """Draw ``n`` specs of a cell (stable across runs)."""
    out = []

    @given(cell_specs(contract, cell, **kw))
    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def collect(spec):
        out.append(spec)

    collect()
    return out


def default_parts(contract, spec, *, except_for=()):
    """The parts of a spec that a cell does not own are at their defaults."""
    if "layout" not in except_for:
        mask = contract.mask_name
        assert all(name == mask for name in spec.layouts), spec.layouts
    if "values" not in except_for:
        assert spec.values == "ordinary"
    for name, decl in contract.inputs.items():
        if "dtype" not in except_for:
            assert spec.dtypes[name] in decl.dtypes
    if "dims" not in except_for:
        for sym, n in spec.dims.items():
            assert contract.dims[sym].admits(n), (sym, n)


@pytest.mark.parametrize("kind", [k for k in LAYOUT_CLASSES if k != "contiguous"])
@pytest.mark.parametrize("cname", ["rows", "attn"])
def test_layout_cells_give_some_input_a_layout_of_that_class(cname, kind):
    contract = CONTRACTS[cname]
    for spec in all_drawn(contract, f"layout:{kind}", n=12):
        default_parts(contract, spec, except_for=("layout",))
        assert spec.layouts, spec
        assert all(lay.kind == kind for lay in spec.layouts.values())
        if kind in ("transposed", "padded"):  # rank >= 2 only
            assert all(len(contract.inputs[n].shape) >= 2 for n in spec.layouts)
        if kind == "size1":
            assert 1 in spec.dims.values()


@pytest.mark.parametrize("cname", ["rows", "attn"])
@pytest.mark.parametrize("cell", ["layout:contiguous", "determinism"])
def test_contiguous_cells_draw_default_layouts(cname, cell):
    contract = CONTRACTS[cname]
    for spec in all_drawn(contract, cell):
        default_parts(contract, spec)


@pytest.mark.parametrize("cname", ["rows", "attn"])
def test_memory_cell_lays_out_only_inputs_that_claim_any_layout(cname):
    contract = CONTRACTS[cname]
    seen = set()
    for spec in all_drawn(contract, "memory", n=40):
        for name, lay in spec.layouts.items():
            if name != contract.mask_name:
                assert contract.inputs[name].layouts == "any"
                seen.add(lay.kind)
    assert len(seen) >= 2, "draws a mix of layout classes"


def test_mixed_cell_may_lay_out_any_input():
    names = set()
    for spec in all_drawn(ROWS, "layout:mixed", n=40):
        names |= set(spec.layouts)
    assert names == {"x", "w"}


@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16", "float64"])
def test_dtype_cells_pin_the_dtype_even_when_unclaimed(dtype):
    for spec in all_drawn(ROWS, f"dtype:{dtype}", n=10):
        assert spec.dtypes == {"x": dtype, "w": dtype}
        default_parts(ROWS, spec, except_for=("dtype",))


def test_mask_keeps_its_own_dtype_in_dtype_cells():
    for spec in all_drawn(ATTN, "dtype:float16", n=5):
        assert spec.dtypes == {"q": "float16", "k": "float16", "mask": "bool"}


@pytest.mark.parametrize("value", ["nan", "inf", "huge", "denormal", "ties"])
def test_values_cells_set_the_value_class(value):
    for spec in all_drawn(ROWS, f"values:{value}", n=5):
        assert spec.values == value
        default_parts(ROWS, spec, except_for=("values",))


def test_tiny_shapes():
    for spec in all_drawn(ATTN, "shape:tiny"):
        for sym, n in spec.dims.items():
            assert ATTN.dims[sym].min <= n <= max(3, ATTN.dims[sym].min)


@pytest.mark.parametrize("cname", ["rows", "attn"])
def test_non_pow2_shapes(cname):
    contract = CONTRACTS[cname]
    budget = 1 << 14  # the default
    for spec in all_drawn(contract, "shape:non-pow2"):
        default_parts(contract, spec)
        for sym, n in spec.dims.items():
            if not is_pow2(n):
                continue
            # allowed only where the budget leaves no room for 3
            others = [math.prod(spec.dims[o] for o in decl.shape if o != sym)
                      for decl in contract.inputs.values() if sym in decl.shape]
            assert any(3 * o > budget for o in others) or contract.dims[sym].max < 3, (sym, spec.dims)
        assert not is_pow2(spec.dims[contract.reduces or next(iter(contract.dims))])


def test_beyond_block_pins_the_widest_dim_past_the_largest_block():
    for spec in all_drawn(ROWS, "shape:beyond-block"):
        assert 4097 <= spec.dims["N"] <= 8192
        assert ROWS.dims["M"].admits(spec.dims["M"])


def test_beyond_block_on_a_short_range_takes_its_upper_half():
    for spec in all_drawn(ATTN, "shape:beyond-block"):
        assert 129 <= spec.dims["N"] <= 256  # the widest dim


@pytest.mark.parametrize("cname, zero_dims", [("rows", {"M", "N"}), ("empty_ok", {"N"})])
def test_empty_shapes_pin_a_dim_to_zero(cname, zero_dims):
    contract = CONTRACTS[cname]
    for spec in all_drawn(contract, "shape:empty", n=10):
        zeros = {s for s, n in spec.dims.items() if n == 0}
        assert len(zeros) >= 1 and zeros <= zero_dims


def test_empty_shapes_prefer_dims_that_admit_zero():
    contract = Contract(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 8), "N": Dim(0, 8)},
                        oracle=lambda x: x)
    for spec in all_drawn(contract, "shape:empty", n=10):
        assert spec.dims["N"] == 0


@pytest.mark.parametrize("cname", ["rows", "attn"])
def test_beyond_range_puts_exactly_one_dim_outside_its_range(cname):
    contract = CONTRACTS[cname]
    for spec in all_drawn(contract, "shape:beyond-range"):
        outside = [s for s, n in spec.dims.items() if not contract.dims[s].admits(n)]
        assert len(outside) == 1, spec.dims


def test_beyond_range_goes_below_min_when_min_is_large():
    below = find(cell_specs(ATTN, "shape:beyond-range"), lambda s: s.dims["D"] < 2)
    assert below.dims["D"] in (0, 1)


@pytest.mark.parametrize("mask", ["causal", "random", "padding", "all", "fully-masked"])
def test_mask_cells_set_the_mask_class(mask):
    for spec in all_drawn(ATTN, f"mask:{mask}", n=5):
        assert spec.mask == mask
        default_parts(ATTN, spec)


def test_broadcast_mask_cell_gives_the_mask_one_row_for_all_rows():
    for spec in all_drawn(ATTN, "mask:broadcast", n=5):
        assert spec.mask == "broadcast"
        assert spec.layouts["mask"] == Layout("broadcast", broadcast=(1,))


def test_mask_contracts_default_to_random_masks():
    assert {s.mask for s in all_drawn(ATTN, "layout:contiguous", n=5)} == {"random"}
    assert {s.mask for s in all_drawn(ROWS, "layout:contiguous", n=5)} == {None}


def test_scalars_are_drawn_in_range():
    for spec in all_drawn(ROWS, "layout:contiguous"):
        assert 1e-6 <= spec.scalars["eps"] <= 1e-2
        assert isinstance(spec.scalars["k"], int) and 1 <= spec.scalars["k"] <= 5


ATTN1 = Contract(  # every dim admits 1, so a budget can always be met
    inputs={"q": Tensor(("B", "M", "D"), layouts="any"), "k": Tensor(("B", "N", "D"), layouts="any")},
    dims={"B": Dim(1, 4), "M": Dim(1, 64), "N": Dim(1, 4096), "D": Dim(1, 64)},
    oracle=lambda q, k: q,
)


@pytest.mark.parametrize("cell", ["layout:contiguous", "layout:mixed", "shape:non-pow2", "values:nan"])
@pytest.mark.parametrize("budget", [64, 1 << 14], ids=lambda b: f"budget{b}")
def test_every_input_stays_within_the_element_budget(cell, budget):
    for contract in (ROWS, ATTN1):
        for spec in all_drawn(contract, cell, n=12, max_elements=budget):
            for name in contract.inputs:
                assert count(spec, contract, name) <= budget, (name, spec.dims)


def test_budget_reserves_room_for_later_dims_minimums():
    # was a bug: with D=Dim(2, 64) and max_elements=64, M took all 64 and q=(B, M, D) got 128 elements
    with pytest.raises(NoSuchExample):
        find(specs(ATTN, max_elements=64), lambda s: count(s, ATTN, "q") > 64, settings=SEARCH)


def test_the_contract_budget_caps_too():
    contract = Contract(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 64), "N": Dim(1, 8192)},
                        oracle=lambda x: x, max_elements=100)
    biggest = max(count(s, contract, "x") for s in all_drawn(contract, "layout:contiguous", n=40))
    assert biggest <= 100
    assert find(specs(contract, max_elements=10_000), lambda s: True)  # the tighter cap wins, no error


def test_the_budget_lets_the_widest_dim_use_it():
    n = find(specs(ROWS, max_elements=1 << 14), lambda s: s.dims["N"] > 4096).dims["N"]
    assert n > 4096


def test_max_outer_caps_every_dim_but_the_widest():
    # ... or, in the draws that make M the wide one, caps N instead (test_contract_features.py)
    for spec in all_drawn(ROWS, "layout:contiguous", n=40, max_outer=5):
        assert spec.dims["M"] <= 5 or (spec.dims["N"] <= 5 and spec.dims["M"] <= 5 * WIDE_OUTER_FACTOR), spec.dims


@pytest.mark.parametrize("budget", [256, 4, 255, 15, 1000], ids=lambda b: f"budget{b}")
def test_budget_counts_a_repeated_dim_once_per_occurrence(budget):
    # was a bug: Tensor(("N", "N")) with max_elements=256 drew N=17 (289 elements)
    square = Contract(inputs={"a": Tensor(("N", "N"))}, dims={"N": Dim(1, 4096)}, oracle=lambda a: a)
    with pytest.raises(NoSuchExample):
        find(specs(square, max_elements=budget), lambda s: s.dims["N"] ** 2 > budget, settings=SEARCH)


def test_budget_counts_a_dim_repeated_three_times():
    cube = Contract(inputs={"a": Tensor(("N", "N", "N"))}, dims={"N": Dim(1, 4096)}, oracle=lambda a: a)
    with pytest.raises(NoSuchExample):
        find(specs(cube, max_elements=512), lambda s: s.dims["N"] ** 3 > 512, settings=SEARCH)


def test_specs_shrink_to_the_smallest_example():
    # max_outer=300: no dim but N can be drawn wide (that choice shrinks away: test_contract_features.py)
    spec = find(cell_specs(ROWS, "layout:contiguous", max_outer=300), lambda s: True,
                settings=settings(database=None, derandomize=True))
    assert spec.dims == {"N": 1, "M": 1}
    assert spec.dtypes == {"x": "float16", "w": "float16"}
    assert spec.layouts == {} and spec.values == "ordinary"
    assert spec.scalars == {"eps": 1e-6, "k": 1}
    assert spec.seed < 16  # towards 0 (the shrinker stops a few short of it with an always-true find)


@pytest.mark.parametrize("kw, message", [
    ({"layout": "diagonal"}, "specs: layout='diagonal'"), ({"shape": "huge"}, "specs: shape='huge'"),
    ({"values": "tiny"}, "specs: values='tiny'"), ({"mask": "upper"}, "specs: mask='upper'"),
])
def test_specs_rejects_an_unknown_class(kw, message):
    with pytest.raises(InvalidArgument, match=message):
        specs(ROWS, **kw)


@given(cell_specs(ATTN, "layout:mixed"))
@FAST
def test_spec_repr_evaluates_back_to_the_spec(spec):
    assert repr(spec).startswith("Spec(")
    assert eval(repr(spec), {"Spec": Spec, "Layout": Layout}) == spec
    assert Spec.from_dict(spec.to_dict()) == spec


def test_spec_layout_defaults_to_contiguous():
    spec = Spec(dims={"N": 3}, dtypes={"x": "float32"}, layouts={})
    assert spec.layout("x") == Layout()
    assert spec.elements() == 3


# -- build_inputs ----------------------------------------------------------

def covered_positions(buffer, view):
    """Storage indices of ``buffer`` that ``view`` addresses."""
    numbered = torch.arange(buffer.numel())
    return set(numbered.as_strided(view.shape, view.stride(), view.storage_offset()).reshape(-1).tolist())


def is_sentinel(t, which):
    if t.dtype == torch.bool:
        return t == (which == "big")
    if t.dtype.is_floating_point:
        return torch.isnan(t) if which == "nan" else t == torch.finfo(t.dtype).max / 8
    return t == (-77 if which == "nan" else 99)


PLACEMENT = Contract(
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any"),
            "i": Tensor(("N",), dtypes=("int32",), layouts="any"),
            "mask": Mask(("M", "N"))},
    dims={"M": Dim(1, 9), "N": Dim(1, 9)},
    oracle=lambda x, i, mask: x,
)


@pytest.mark.parametrize("sentinel", ["nan", "big"])
@pytest.mark.parametrize("kind", [k for k in LAYOUT_CLASSES] + ["mixed"])
def test_build_inputs_places_values_in_the_view_and_sentinel_everywhere_else(kind, sentinel):
    for spec in all_drawn(PLACEMENT, f"layout:{kind}", n=8):
        built = build_inputs(PLACEMENT, spec, sentinel=sentinel)
        for name, view in built.views.items():
            buffer = built.buffers[name]
            shape = tuple(spec.dims[s] for s in PLACEMENT.inputs[name].shape)
            strides, offset, span = strides_for(shape, spec.layout(name))
            assert tuple(view.shape) == shape
            assert view.stride() == strides and view.storage_offset() == offset
            assert view.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
            assert buffer.numel() == span + GUARD_ELEMENTS, "a guard band after the last element"
            inside = covered_positions(buffer, view)
            outside = torch.tensor([p not in inside for p in range(buffer.numel())])
            assert bool(is_sentinel(buffer[outside], sentinel).all()), (name, spec)
            if name != "mask" and view.dtype.is_floating_point:
                assert not bool(is_sentinel(view, sentinel).any()), "ordinary values are never the sentinel"


def test_the_two_sentinels_hold_identical_views():
    for spec in all_drawn(PLACEMENT, "layout:mixed", n=10):
        a = build_inputs(PLACEMENT, spec, sentinel="nan")
        b = build_inputs(PLACEMENT, spec, sentinel="big")
        for name in PLACEMENT.inputs:
            assert torch.equal(a.views[name], b.views[name])
            assert not torch.equal(a.buffers[name].float().nan_to_num(1.0), b.buffers[name].float())


@pytest.mark.parametrize("cell", ["layout:mixed", "layout:broadcast", "values:nan"])
def test_a_build_that_copies_another_builds_contents_holds_the_bits_a_fresh_one_draws(cell):
    # An example's later calls copy the first call's contents instead of drawing them again: bit for bit
    # the storage a fresh build in that sentinel holds, NaN payloads and the sentinel around them included.
    for spec in all_drawn(PLACEMENT, cell, n=10):
        first = build_inputs(PLACEMENT, spec, sentinel="nan")
        for sentinel in ("big", "nan"):
            fresh = build_inputs(PLACEMENT, spec, sentinel=sentinel)
            copied = build_inputs(PLACEMENT, spec, sentinel=sentinel, contents_of=first)
            for name in PLACEMENT.inputs:
                assert torch.equal(copied.snapshots[name], fresh.snapshots[name]), (name, spec)
                assert copied.views[name].stride() == fresh.views[name].stride()


def test_broadcast_inputs_have_stride_zero_and_repeat_one_row():
    spec = Spec(dims={"M": 4, "N": 5}, dtypes={"x": "float32", "i": "int32", "mask": "bool"},
                layouts={"x": Layout("broadcast", broadcast=(0,))}, mask="random", seed=3)
    x = build_inputs(PLACEMENT, spec).views["x"]
    assert x.stride() == (0, 1)
    assert torch.equal(x, x[:1].expand(4, 5))
    assert len(set(x[0].tolist())) == 5, "distinct neighbours"


def test_build_inputs_is_reproducible_and_the_seed_matters():
    spec = Spec(dims={"M": 3, "N": 4}, dtypes={"x": "float32", "i": "int32", "mask": "bool"}, layouts={},
                mask="random", seed=11)
    a, b = build_inputs(PLACEMENT, spec), build_inputs(PLACEMENT, spec)
    c = build_inputs(PLACEMENT, Spec(**{**spec.__dict__, "seed": 12}))
    assert torch.equal(a.views["x"], b.views["x"])
    assert not torch.equal(a.views["x"], c.views["x"])
    assert a.views["i"].dtype == torch.int32 and a.views["mask"].dtype == torch.bool


def test_mutated_names_inputs_whose_storage_changed_anywhere():
    spec = Spec(dims={"M": 3, "N": 4}, dtypes={"x": "float32", "i": "int32", "mask": "bool"},
                layouts={"x": Layout("sliced", steps=(1, 2))}, mask="random")
    built = build_inputs(PLACEMENT, spec)
    assert built.mutated() == []
    built.buffers["x"][1] = 0.0  # a gap between x[0, 0] and x[0, 1]
    assert built.mutated() == ["x"]
    built.views["i"][0] += 1
    assert built.mutated() == ["x", "i"]


def test_mutated_sees_a_write_into_the_guard_band():
    spec = Spec(dims={"M": 2, "N": 2}, dtypes={"x": "float32", "i": "int32", "mask": "bool"}, layouts={},
                mask="all")
    built = build_inputs(PLACEMENT, spec)
    built.buffers["i"][-1] = 5
    assert built.mutated() == ["i"]


def test_as_float64_upcasts_tensors_and_keeps_masks_boolean():
    spec = Spec(dims={"M": 2, "N": 3}, dtypes={"x": "float16", "i": "int32", "mask": "bool"}, layouts={},
                mask="causal")
    built = build_inputs(PLACEMENT, spec)
    f64 = built.as_float64()
    assert f64["x"].dtype == f64["i"].dtype == torch.float64
    assert f64["mask"].dtype == torch.bool
    assert torch.equal(f64["x"], built.views["x"].double())


@pytest.mark.parametrize("mask_class", ["causal", "random", "padding", "all", "broadcast"])
def test_masks_keep_at_least_one_key_per_row(mask_class):
    for spec in all_drawn(ATTN, f"mask:{mask_class}", n=6):
        mask = build_inputs(ATTN, spec).views["mask"]
        assert mask.dtype == torch.bool
        assert bool(mask.any(-1).all())
        if mask_class == "causal":
            m, n = mask.shape[-2:]
            assert torch.equal(mask, torch.ones(m, n, dtype=torch.bool).tril().expand_as(mask))
        if mask_class == "all":
            assert bool(mask.all())


def test_fully_masked_masks_have_a_dead_row():
    for spec in all_drawn(ATTN, "mask:fully-masked", n=6):
        mask = build_inputs(ATTN, spec).views["mask"]
        assert bool((~mask.any(-1)).any())


def test_additive_masks_hold_zero_or_minus_inf():
    contract = Contract(inputs={"x": Tensor(("M", "N")), "bias": Mask(("M", "N"), kind="additive")},
                        dims={"M": Dim(1, 8), "N": Dim(1, 8)}, oracle=lambda x, bias: x)
    spec = Spec(dims={"M": 6, "N": 7}, dtypes={"x": "float32", "bias": "float32"}, layouts={}, mask="random")
    bias = build_inputs(contract, spec).views["bias"]
    assert bool(((bias == 0) | (bias == -math.inf)).all())
    assert bool((bias == 0).any(-1).all()) and bool((bias == -math.inf).any())


@pytest.mark.parametrize("value, check", [
    ("nan", lambda x: bool(torch.isnan(x).any())),
    ("inf", lambda x: bool((x == math.inf).any()) and bool((x == -math.inf).any())),
    ("ties", lambda x: bool((x == x.round()).all())),
    ("denormal", lambda x: bool(((x != 0) & (x.abs() < torch.finfo(x.dtype).tiny)).any())),
    ("huge", lambda x: bool((x.abs() > 60).all())),
], ids=lambda v: v if isinstance(v, str) else "")
def test_value_classes_fill_what_they_say(value, check):
    spec = Spec(dims={"M": 8, "N": 9}, dtypes={"x": "float32", "i": "int32", "mask": "bool"}, layouts={},
                values=value, mask="all", seed=5)
    x = build_inputs(PLACEMENT, spec).views["x"]
    assert check(x)


def test_beyond_range_never_steps_past_a_range_that_is_unbounded_in_practice():
    # rows without a bound (max 2^24) beside a bounded feature dim: only the feature dim goes out of range
    rows = Contract(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 1 << 24), "N": Dim(1, 4096)},
                    oracle=lambda x: x)
    for spec in all_drawn(rows, "shape:beyond-range"):
        assert spec.dims["M"] <= 1 << 24 and spec.dims["N"] > 4096, spec.dims
