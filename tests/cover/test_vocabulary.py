"""The vocabulary tables (model/vocabulary.py): one row per class, read by the kinds, the strategies and the docs."""

import json
import os
import pathlib
import re

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
from hypothesis import HealthCheck, given, settings

import triton_conformance.model.vocabulary as vocabulary
from tests._subjects import as_subject
from triton_conformance import Backward, Contract, Dim, InvalidArgument, Mask, Tensor
from triton_conformance.conformance.kinds import catalogue, cells_for, kind_of
from triton_conformance.model.vocabulary import LayoutClass, MaskClass, ShapeClass, ValueClass, Vocabulary
from triton_conformance.strategies import build_inputs, specs

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAST = settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _contract(inputs, dims=None, **kw):
    dims = dims or {"M": Dim(1, 64), "N": Dim(1, 4096)}
    oracle = eval(f"lambda {', '.join(inputs)}: None")
    return Contract(inputs=inputs, dims=dims, oracle=oracle, **kw)


# Contracts between them reaching every class a kind emits.
CONTRACTS = {
    "plain": _contract({"x": Tensor(("M", "N"), layouts="any")}, values=("huge", "inf", "nan", "denormal", "ties")),
    "ints": _contract({"x": Tensor(("N",), dtypes=("int8", "int16", "int32", "int64", "uint8", "bool"))},
                      {"N": Dim(1, 100)}),
    "masked": _contract({"x": Tensor(("M", "N")), "mask": Mask(("M", "N"), fully_masked="reject")}),
    "fp8": _contract({"x": Tensor(("M", "N"), dtypes=("float8_e4m3fn", "float8_e5m2", "float32"),
                                  value_range=(-1.0, 1.0))},
                     values=("zero-blocks", "fp8-overflow", "fp8-subnormal", "fp8-ties")),
    "descriptor": _contract({"a": Tensor(("M", "N"), descriptor=True)}),
    "backward": _contract({"x": Tensor(("M", "N"), dtypes=("float16", "bfloat16", "float32", "float64"),
                                       value_range=(-4.0, 4.0))},
                          {"M": Dim(1, 512), "N": Dim(1, 4096)}, values=("huge", "inf", "nan", "denormal", "ties"),
                          backward=Backward(grads=("x",))),
}
# Which table names each searched dimension's classes (a grad class: its part after "grad:").
TABLES = {"layout": "LAYOUTS", "descriptor": "DESCRIPTOR_LAYOUTS", "dtype": "DTYPES", "shape": "SHAPES",
          "values": "VALUES", "mask": "MASKS"}


def _row_of(cell):
    """The vocabulary row a cell is named after, or None for a cell of no table (memory, stochastic, ...)."""
    dimension, _, value = cell.partition(":")
    if dimension == "grad":
        dimension, _, value = value.partition(":")
    table = TABLES.get(dimension)
    return getattr(vocabulary, table)[value] if table and value else None


def _stored_cells():
    """Every cell of the stored results of an earlier run (tests/reports/data): what the kinds emitted then."""
    return sorted({r["cell"] for p in (ROOT / "tests" / "reports" / "data").glob("*.json")
                   for r in json.loads(p.read_text()).get("results", ())})


@pytest.mark.parametrize("name", CONTRACTS)
def test_every_class_a_kind_emits_has_a_row_that_explains_it(name):
    describe = catalogue().describe
    for cell in cells_for(as_subject(CONTRACTS[name])):
        dimension = cell.partition(":")[0]
        row = _row_of(cell)
        if dimension in TABLES or (dimension == "grad" and cell.count(":") == 2):
            assert row is not None and row.text in describe(cell), (cell, describe(cell))


def test_every_row_that_is_a_cell_is_one_of_some_subject():
    emitted = {cell for contract in CONTRACTS.values() for cell in cells_for(as_subject(contract))}
    for dimension, table in TABLES.items():
        for row in getattr(vocabulary, table).rows:
            if getattr(row, "cell", True) and getattr(row, "claim", "claimed") != "always":
                assert f"{dimension}:{row.name}" in emitted, (table, row.name)


def test_every_class_a_stored_run_reported_still_has_a_row():
    # The cells an earlier run's kinds emitted, kept in the repository: a row deleted from a table loses one.
    cells = _stored_cells()
    named = [c for c in cells if c.partition(":")[0] in TABLES]
    assert len(named) >= 20
    for cell in named:
        assert _row_of(cell) is not None, cell
        assert kind_of(cell)[1] == cell.partition(":")[2]


def _glossary_section(title):
    text = (ROOT / "docs" / "glossary.md").read_text()
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- \*\*([\w-]+)\*\*:", section, flags=re.M)


@pytest.mark.parametrize("title, table", [
    ("Layout classes", vocabulary.LAYOUTS), ("Shape classes", vocabulary.SHAPES),
    ("Value classes", vocabulary.VALUES), ("Mask classes", vocabulary.MASKS),
], ids=["layouts", "shapes", "values", "masks"])
def test_the_glossary_documents_exactly_the_rows_that_are_cells(title, table):
    documented = _glossary_section(title)
    rows = [r.name for r in table.rows if getattr(r, "cell", True)]
    assert sorted(documented) == sorted(rows)


def test_the_glossary_names_every_descriptor_class():
    text = (ROOT / "docs" / "glossary.md").read_text()
    assert set(re.findall(r"`descriptor:([\w-]+)`", text)) == set(vocabulary.DESCRIPTOR_LAYOUTS.names())


# -- a new class is one row -------------------------------------------------------------------------------

FAR = LayoutClass("far-offset", "offset", "a storage offset past 4096 elements", choices=(4097, 8192))
LATE = MaskClass("prefix-row", "prefix", "one prefix of the keys for each batch, as a stride-0 row", one_row=True)


def test_a_layout_row_is_a_layout_cell_and_a_grad_cell_drawn_as_its_row_says(monkeypatch):
    monkeypatch.setattr(vocabulary, "LAYOUTS", vocabulary.LAYOUTS.with_row(FAR, before="mixed"))
    cells = cells_for(as_subject(CONTRACTS["backward"]))
    assert cells.index("layout:far-offset") == cells.index("layout:size1") + 1
    assert "grad:layout:far-offset" in cells
    assert catalogue().describe("layout:far-offset") == "inputs laid out in memory this way: " + FAR.text
    contract = CONTRACTS["plain"]

    @FAST
    @given(specs(contract, layout="far-offset"))
    def check(spec):
        assert spec.layouts["x"].kind == "far-offset" and spec.layouts["x"].offset in FAR.choices
        assert build_inputs(contract, spec).views["x"].storage_offset() in FAR.choices

    check()


def test_a_mask_row_is_a_mask_cell_filled_as_its_row_says(monkeypatch):
    monkeypatch.setattr(vocabulary, "MASKS", vocabulary.MASKS.with_row(LATE))
    contract = CONTRACTS["masked"]
    assert [c for c in cells_for(as_subject(contract)) if c.startswith("mask:")][-1] == "mask:prefix-row"
    assert catalogue().describe("mask:prefix-row").endswith(LATE.text)

    @FAST
    @given(specs(contract, mask="prefix-row"))
    def check(spec):
        assert spec.mask == "prefix-row" and spec.layouts["mask"].broadcast == (0,)
        keep = build_inputs(contract, spec).views["mask"]
        assert keep.stride(0) == 0 and bool(keep[:, 0].all())  # a prefix keeps the first key of every row

    check()


def test_a_value_row_is_claimable_a_values_cell_and_filled_as_its_row_says(monkeypatch):
    import torch

    row = ValueClass("some-nans", "nans", "some elements NaN, as the nan class draws them")
    monkeypatch.setattr(vocabulary, "VALUES", vocabulary.VALUES.with_row(row, before="zero-blocks"))
    contract = _contract({"x": Tensor(("M", "N"))}, values=("some-nans",))  # claimable: the contract reads the row
    subject = as_subject(contract)
    assert [c for c in cells_for(subject) if c.startswith("values:")] == [
        "values:huge", "values:inf", "values:nan", "values:denormal", "values:ties", "values:some-nans"]
    kind, value = kind_of("values:some-nans")
    assert kind.skip_reason(subject, value, None) is None and kind.skip_reason(subject, "huge", None) is not None
    assert catalogue().describe("values:some-nans").endswith(row.text)

    @FAST
    @given(specs(contract, values="some-nans"))
    def check(spec):
        assert bool(torch.isnan(build_inputs(contract, spec).views["x"]).any())

    check()


def test_a_shape_row_that_is_no_cell_stays_out_of_the_matrix(monkeypatch):
    row = ShapeClass("huge-batch", "specs", "a batch past any grid", cell=False)
    monkeypatch.setattr(vocabulary, "SHAPES", vocabulary.SHAPES.with_row(row))
    assert "shape:huge-batch" not in cells_for(as_subject(CONTRACTS["plain"]))


def test_a_table_refuses_a_name_twice_a_row_of_another_kind_and_an_unknown_class():
    with pytest.raises(InvalidArgument, match="twice: \\['a'\\]"):
        Vocabulary("t", "", (MaskClass("a", "all", "x"), MaskClass("a", "all", "y")))
    with pytest.raises(InvalidArgument, match="expected a MaskClass"):
        vocabulary.MASKS.with_row(FAR)
    with pytest.raises(InvalidArgument, match="mask: class='nope', expected one of"):
        vocabulary.MASKS["nope"]
    with pytest.raises(InvalidArgument, match="row.draw='spiral'"):
        from triton_conformance.strategies._internal.layouts import drawn_layouts
        drawn_layouts(LayoutClass("spiral", "spiral", "a spiral"), 2)
