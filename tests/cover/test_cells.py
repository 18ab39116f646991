"""The cell kinds' registry and what each example must do (conformance/kinds, conformance/expectation.py)."""

import pytest
import torch

from triton_conformance import Contract, Dim, Dropout, InvalidArgument, Mask, Scalar, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.expectation import Expectation, expectation
from triton_conformance.conformance.kinds import catalogue, cells_for, kind_of
from triton_conformance.strategies import Layout, Spec, strides_for
from tests._subjects import as_subject


def skip_reason(contract, cell, backend=None):
    kind, value = kind_of(cell)
    return kind.skip_reason(as_subject(contract), value, backend or Backend())


def make(inputs=None, dims=None, **kw):
    inputs = inputs or {"x": Tensor(("M", "N"), dtypes=("float32",))}
    dims = dims or {"M": Dim(1, 64), "N": Dim(1, 4096)}
    names = list(inputs) + list(kw.get("scalars", {}))
    oracle = eval(f"lambda {', '.join(names)}: None")
    return Contract(inputs=inputs, dims=dims, oracle=oracle, **kw)


PLAIN = make()
HALF_AND_SINGLE = make({"x": Tensor(("M", "N"), dtypes=("float32", "float16", "float64"), layouts="any")})
INTS = make({"x": Tensor(("N",), dtypes=("int32", "int64"))}, {"N": Dim(1, 100)})
MASKED = make({"x": Tensor(("M", "N")), "mask": Mask(("M", "N"), fully_masked="reject")})
NONDET = make(deterministic=False)
STOCHASTIC = make(scalars={"p": Scalar(0.0, 0.9), "seed": Scalar(0, 99, kind="int")}, model=Dropout())
VECTOR = make({"x": Tensor(("N",))}, {"N": Dim(1, 100)})


# -- cells_for -------------------------------------------------------------

def test_a_plain_contract_gets_exactly_these_cells_in_this_order():
    assert cells_for(as_subject(PLAIN)) == [
        "layout:contiguous", "layout:transposed", "layout:sliced", "layout:padded", "layout:offset",
        "layout:broadcast", "layout:size1", "layout:mixed",
        "dtype:float32", "dtype:float16", "dtype:bfloat16",  # the claimed one first
        "shape:tiny", "shape:non-pow2", "shape:beyond-block", "shape:empty", "shape:beyond-range",
        "shape:large-index",
        "values:huge", "values:inf", "values:nan", "values:denormal", "values:ties",
        "memory", "determinism",
    ]


@pytest.mark.parametrize("contract, dtypes", [
    (PLAIN, ["float32", "float16", "bfloat16"]),
    (HALF_AND_SINGLE, ["float32", "float16", "float64", "bfloat16"]),
    (INTS, ["int32", "int64"]),
], ids=["fp32-claims-probe-the-rest", "claimed-first-no-duplicates", "integer-subject"])
def test_dtype_cells_probe_unclaimed_float_dtypes(contract, dtypes):
    assert [c for c in cells_for(as_subject(contract)) if c.startswith("dtype:")] == [f"dtype:{d}" for d in dtypes]


def test_mask_subjects_get_a_cell_per_mask_class():
    assert [c for c in cells_for(as_subject(MASKED)) if c.startswith("mask:")] == [
        "mask:causal", "mask:random", "mask:padding", "mask:all", "mask:fully-masked", "mask:broadcast"]


def test_stochastic_subjects_get_their_designs_and_no_determinism_cell():
    cells = cells_for(as_subject(STOCHASTIC))
    assert "determinism" not in cells
    assert [c for c in cells if c.startswith("stochastic:")] == [
        "stochastic:rate", "stochastic:values", "stochastic:edges", "stochastic:reproducibility",
        "stochastic:seeds", "stochastic:independence"]


def test_nondeterministic_subjects_have_no_determinism_cell():
    assert "determinism" not in cells_for(as_subject(NONDET))
    assert "memory" in cells_for(as_subject(NONDET))


def test_every_cell_has_one_owner_and_an_explanation():
    for cell in cells_for(as_subject(MASKED)) + cells_for(as_subject(STOCHASTIC)):
        kind, value = kind_of(cell)
        assert kind.cell(value) == cell
        assert catalogue().describe(cell), cell
    assert "2^31" in catalogue().describe("shape:large-index")
    with pytest.raises(InvalidArgument, match="cell='layout:diagonal', expected one of"):
        kind_of("layout:diagonal")


# -- skip reasons ------------------------------------------------------------

SKIPS = [
    (VECTOR, "layout:transposed", "needs an input of rank >= 2"),
    (VECTOR, "layout:padded", "needs an input of rank >= 2"),
    (VECTOR, "layout:broadcast", None),
    (VECTOR, "layout:sliced", None),
    (PLAIN, "layout:transposed", None),
    (PLAIN, "layout:mixed", "no input claims arbitrary layouts"),
    (HALF_AND_SINGLE, "layout:mixed", None),
    (make(dims={"M": Dim(2, 8), "N": Dim(3, 8)}), "layout:size1", "no dim admits size 1"),
    (PLAIN, "layout:size1", None),
    (PLAIN, "values:nan", "value class 'nan' not claimed"),
    (make(values=("nan",)), "values:nan", None),
    (make(values=("nan",)), "values:inf", "value class 'inf' not claimed"),
    (make(dims={"M": Dim(1, 8), "N": Dim(1, 63)}), "shape:beyond-block", "no dim can exceed a block"),
    (make(dims={"M": Dim(1, 8), "N": Dim(1, 64)}), "shape:beyond-block", None),
    (make(dims={"M": Dim(1, 1 << 24), "N": Dim(0, 1 << 30)}), "shape:beyond-range",
     "every dim range is unbounded in practice"),
    (PLAIN, "shape:beyond-range", None),
    (PLAIN, "shape:empty", None),
    (NONDET, "determinism", "subject does not claim determinism"),
    (STOCHASTIC, "determinism", "stochastic subject"),
    (PLAIN, "determinism", None),
    (PLAIN, "memory", None),
    (PLAIN, "dtype:bfloat16", None),
]


@pytest.mark.parametrize("contract, cell, reason", SKIPS,
                         ids=[f"{i}-{cell}-{'skip' if r else 'runs'}" for i, (_, cell, r) in enumerate(SKIPS)])
def test_skip_reason(contract, cell, reason):
    got = skip_reason(contract, cell)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got
        assert got.code.startswith(cell.partition(":")[0] + ":"), "a reason code of the cell's own dimension"


def test_a_skipped_result_carries_its_reason_code_and_whole_message():
    from triton_conformance.conformance.runner import run_cell

    result = run_cell(as_subject(PLAIN), "values:nan", backend=Backend())
    assert result.outcome == "skipped" and result.message == "value class 'nan' not claimed"
    assert result.details["skip_code"] == "values:not-claimed"


def test_untestable_dtypes_skip_with_the_given_reason():
    backend = Backend(untestable_dtypes=(("bfloat16", "interpreter bf16 is broken"),))
    assert skip_reason(PLAIN, "dtype:bfloat16", backend) == "interpreter bf16 is broken"
    assert skip_reason(PLAIN, "dtype:float16", backend) is None


# -- expectation -------------------------------------------------------------

def spec(dims=None, dtypes=None, layouts=None, mask=None):
    return Spec(dims=dims or {"M": 4, "N": 8}, dtypes=dtypes or {"x": "float32"}, layouts=layouts or {},
                mask=mask)


ANY = make({"x": Tensor(("M", "N"), layouts="any")})
MASK_ZEROS = make({"x": Tensor(("M", "N")), "mask": Mask(("M", "N"), fully_masked="zeros")})
EXPECT = [
    ("in-contract", PLAIN, spec(), "honour", ()),
    ("dim-at-max", PLAIN, spec(dims={"M": 64, "N": 4096}), "honour", ()),
    ("dim-above", PLAIN, spec(dims={"M": 65, "N": 8}), "reject", ("dim M=65 outside [1, 64]",)),
    ("dim-zero", PLAIN, spec(dims={"M": 0, "N": 8}), "reject", ("dim M=0 outside [1, 64]",)),
    ("dtype", PLAIN, spec(dtypes={"x": "float16"}), "reject", ("x.dtype=float16 not in ('float32',)",)),
    ("transposed-contig", PLAIN, spec(layouts={"x": Layout("transposed", perm=(1, 0))}), "reject",
     ("x is transposed, contract claims contiguous only",)),
    # torch's is_contiguous(): a view that starts one element into its storage is contiguous
    ("offset-contig", PLAIN, spec(layouts={"x": Layout("offset", offset=1)}), "honour", ()),
    ("transposed-any", ANY, spec(layouts={"x": Layout("transposed", perm=(1, 0))}), "honour", ()),
    ("broadcast-any", ANY, spec(layouts={"x": Layout("broadcast", broadcast=(0,))}), "honour", ()),
    ("size1-contig", PLAIN, spec(dims={"M": 1, "N": 8}, layouts={"x": Layout("size1", odd_stride=7)}), "either",
     ("x has size-1 dims with odd strides",)),
    ("fully-masked-reject", MASKED, spec(dtypes={"x": "float32", "mask": "bool"}, mask="fully-masked"), "reject",
     ("mask has fully masked rows, policy is 'reject'",)),
    ("fully-masked-zeros", MASK_ZEROS, spec(dtypes={"x": "float32", "mask": "bool"}, mask="fully-masked"),
     "honour", ()),
    ("random-mask-reject-policy", MASKED, spec(dtypes={"x": "float32", "mask": "bool"}, mask="random"),
     "honour", ()),
    ("breaches-beat-either", PLAIN, spec(dims={"M": 1, "N": 5000}, layouts={"x": Layout("size1", odd_stride=7)}),
     "reject", ("dim N=5000 outside [1, 4096]",)),
    ("every-breach-named", PLAIN, spec(dims={"M": 99, "N": 8}, dtypes={"x": "float64"},
                                       layouts={"x": Layout("sliced", steps=(1, 2))}), "reject",
     ("dim M=99 outside [1, 64]", "x.dtype=float64 not in ('float32',)",
      "x is sliced, contract claims contiguous only")),
]


@pytest.mark.parametrize("contract, example, kind, reasons", [e[1:] for e in EXPECT], ids=[e[0] for e in EXPECT])
def test_expectation(contract, example, kind, reasons):
    assert expectation(contract, example) == Expectation(kind, reasons)


@pytest.mark.parametrize("dims, layout, kind", [
    ({"M": 1, "N": 1}, Layout("transposed", perm=(1, 0)), "honour"),
    ({"M": 1, "N": 8}, Layout("padded", pad=3), "either"),  # the size-1 dim's stride is 11, not 8
    ({"M": 1, "N": 8}, Layout("sliced", steps=(2, 1)), "either"),
    ({"M": 1, "N": 8}, Layout("broadcast", broadcast=(0,)), "either"),
], ids=["transposed-1x1", "padded-one-row", "sliced-one-row", "broadcast-one-row"])
def test_a_layout_with_contiguous_strides_is_not_out_of_contract(dims, layout, kind):
    # was a bug: contiguity was judged by the layout's label, so no launcher could pass both
    # layout:contiguous and layout:transposed on a (1, 1) input
    shape = (dims["M"], dims["N"])
    strides, offset, _ = strides_for(shape, layout)
    contiguous, _, _ = strides_for(shape, Layout())
    # same addresses as a contiguous tensor: nothing tells them apart
    numbered = torch.arange(64)
    assert torch.equal(numbered.as_strided(shape, strides, offset), numbered.as_strided(shape, contiguous, 0))
    assert expectation(PLAIN, spec(dims=dims, layouts={"x": layout})).kind == kind


# -- cell ids ----------------------------------------------------------------

def test_every_cell_id_splits_back_into_its_subject_and_cell():
    from triton_conformance.model.cells import cell_id, split_cell_id

    for contract in (PLAIN, HALF_AND_SINGLE, MASKED, STOCHASTIC):
        for cell in cells_for(as_subject(contract)):
            assert split_cell_id(cell_id("zoo_softmax_v1", cell)) == ("zoo_softmax_v1", cell)
    assert cell_id("add", "layout:transposed") == "add[layout:transposed]"
    for name in ("add", "add[layout", "[memory]", "tests/test_x.py::test_y"):
        assert split_cell_id(name) is None, name


def test_the_layout_cells_are_named_after_the_one_layout_vocabulary():
    from triton_conformance.model.spec import LAYOUT_CLASSES
    from triton_conformance.model.vocabulary import LAYOUTS

    assert LAYOUT_CLASSES == LAYOUTS.names(scope="tensor") and all(r.text for r in LAYOUTS.rows)
    dimensions = {d.name: d for d in catalogue().dimensions}
    assert [c.value for c in dimensions["layout"].classes] == [*LAYOUT_CLASSES, "mixed"]
    grad_layouts = [c.value[len("layout:"):] for c in dimensions["grad"].classes if c.value.startswith("layout:")]
    assert grad_layouts and grad_layouts == [k for k in LAYOUT_CLASSES if k in grad_layouts]  # in the same order


def test_a_spec_is_a_value_with_an_identity():
    from triton_conformance.model.spec import Layout, Spec

    a = Spec(dims={"M": 3, "N": 5}, dtypes={"x": "float16"}, layouts={"x": Layout("transposed", perm=(1, 0))},
             scalars={"eps": 0.0})
    same = Spec(dims={"N": 5, "M": 3}, dtypes={"x": "float16"},
                layouts={"x": Layout("transposed", perm=(1, 0)), "out": Layout()}, scalars={"eps": 0.0})
    assert a == same and hash(a) == hash(same) and {a: 1}[same] == 1  # dict order and explicit contiguous
    assert a != Spec(dims={"M": 3, "N": 5}, dtypes={"x": "float16"},
                     layouts={"x": Layout("transposed", perm=(1, 0))}, scalars={"eps": -0.0})
    assert a != Spec(dims={"M": 3, "N": 5}, dtypes={"x": "float16"}, layouts={}, scalars={"eps": 0.0})
    assert a != Spec.from_dict({**a.to_dict(), "seed": 1}) and a == Spec.from_dict(a.to_dict())
