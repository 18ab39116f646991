"""Related dims: ``Product("C", ("G", "Cg"))`` (C = G x Cg) and ``Divisible("C", by="G")`` (C % G == 0).

Declarations are validated; drawn specs satisfy every relation by construction in every shape class, with
the classes landing on the sources; the out-of-range cell breaks relations on purpose and such a spec is
outside the contract; the per-dim shrink keeps them; dims in no input's shape reach the launcher and the
oracle by keyword.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from tests._subjects import as_subject
from triton_conformance import Contract, Dim, Divisible, InvalidContract, Product, Scalar, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.search.shrink import minimize_dims
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.relations import broken_relations
from triton_conformance.model.subject import Subject
from triton_conformance.strategies import Spec, specs

X = {"x": Tensor(("N", "C", "HW"), dtypes=("float32",)), "w": Tensor(("C",), dtypes=("float32",))}
DIMS = {"N": Dim(1, 4), "C": Dim(1, 256), "G": Dim(1, 32), "Cg": Dim(1, 64), "HW": Dim(1, 64)}
PRODUCT = dict(inputs=X, dims=DIMS, oracle=lambda x, w, G, Cg: x, relations=(Product("C", ("G", "Cg")),))
DIVISIBLE = dict(inputs=X, dims={k: v for k, v in DIMS.items() if k != "Cg"}, oracle=lambda x, w, G: x,
                 relations=(Divisible("C", by="G"),))


def _drawn(contract, **options):
    seen = []

    @settings(max_examples=150, database=None, deadline=None)
    @given(specs(contract, **options))
    def collect(spec):
        seen.append(spec)

    collect()
    return seen


@pytest.mark.parametrize("declaration", [PRODUCT, DIVISIBLE], ids=["product", "divisible"])
@pytest.mark.parametrize("shape", ["any", "tiny", "non-pow2", "beyond-block", "wide-outer"])
def test_every_drawn_spec_keeps_the_relations(declaration, shape):
    wide = shape == "wide-outer"  # a long batch: N past 128, HW the widest
    dims = dict(declaration["dims"], N=Dim(1, 300), HW=Dim(1, 1024)) if wide else declaration["dims"]
    contract = Contract(**{**declaration, "dims": dims})
    drawn = _drawn(contract, shape=shape)
    assert drawn and all(not broken_relations(contract.relations, s.dims) for s in drawn)
    assert all(expectation(contract, s).kind == "honour" for s in drawn)


def test_the_shape_classes_land_on_the_sources():
    contract = Contract(**PRODUCT)
    odd = _drawn(contract, shape="non-pow2")
    assert any(s.dims["Cg"] > 1 and s.dims["Cg"] & (s.dims["Cg"] - 1) and s.dims["G"] >= 2 for s in odd)
    tiny = _drawn(contract, shape="tiny")
    assert all(s.dims["G"] <= 3 and s.dims["Cg"] <= 3 for s in tiny)
    wide = _drawn(Contract(**DIVISIBLE), shape="beyond-block")  # C is the widest: pinned, G moved to divide it
    assert all(s.dims["C"] > 128 and s.dims["C"] % s.dims["G"] == 0 for s in wide)


@pytest.mark.parametrize("declaration", [PRODUCT, DIVISIBLE], ids=["product", "divisible"])
def test_out_of_range_specs_also_break_a_relation_inside_the_ranges(declaration):
    contract = Contract(**declaration)
    drawn = _drawn(contract, shape="beyond-range")
    assert all(expectation(contract, s).kind == "reject" for s in drawn)
    in_ranges = [s for s in drawn if all(contract.dims[k].admits(v) for k, v in s.dims.items())]
    assert in_ranges, "some draws break only a relation"
    reasons = expectation(contract, in_ranges[0]).reasons
    assert any(r.startswith("dims break the relation C ") for r in reasons), reasons


def test_the_per_dim_shrink_moves_sources_and_rebuilds_the_derived_dim():
    subject = as_subject(Contract(**PRODUCT))
    start = Spec(dims={"N": 3, "G": 12, "Cg": 9, "HW": 5, "C": 108}, dtypes={"x": "float32", "w": "float32"},
                 layouts={})
    fails = lambda spec: Finding("wrong", "mismatch", "") if spec.dims["Cg"] >= 3 else None  # noqa: E731
    spec, _ = minimize_dims(subject, start, Finding("wrong", "mismatch", ""), fails)
    assert spec.dims == {"N": 1, "G": 1, "Cg": 3, "HW": 1, "C": 3}


def test_keyword_dims_reach_the_launcher_and_the_oracle():
    seen = []

    def launcher(x, w, G):
        seen.append((G, x.shape[1]))
        dims = {"N": x.shape[0], "C": x.shape[1], "HW": x.shape[2], "G": G}
        if not all(contract.dims[s].admits(n) for s, n in dims.items()):
            raise ValueError(f"dims {dims} outside {contract.dims}")
        if x.shape[1] % G:
            raise ValueError(f"C={x.shape[1]} not divisible by G={G}")
        return x.reshape(x.shape[0], G, -1).sum(-1)

    contract = Contract(**{**DIVISIBLE, "oracle": lambda x, w, G: x.reshape(x.shape[0], G, -1).sum(-1)})
    subject = Subject(name="grouped_sum", family="grouped_sum", launcher=launcher, contract=contract,
                      module=__name__)
    assert run_cell(subject, "shape:non-pow2", backend=Backend()).outcome == "honoured"
    assert seen and all(c % g == 0 for g, c in seen) and any(g > 1 for g, _ in seen)
    assert run_cell(subject, "shape:beyond-range", backend=Backend()).outcome == "rejected"
    assert any(c % g for g, c in seen)  # the relation was broken on purpose, and refused


@pytest.mark.parametrize("change, match", [
    (dict(relations=(Product("C", ("G", "Q")),)), r"relations='C == G \* Q', expected dims declared in dims="),
    (dict(relations=(Product("C", ("G", "Cg")), Divisible("C", by="G"))),
     r"relations='C % G == 0', expected one relation per derived dim \('C' is already C == G \* Cg\)"),
    (dict(relations=(Product("C", ("G", "Cg")), Product("Cg", ("G", "HW")))),
     r"expected sources that no other relation derives \(\['Cg'\] are derived"),
    (dict(relations=()), r"dims=\['Cg', 'G'\], expected every declared dim to appear in some input's shape or "
                         r"relation"),
    (dict(dims={**DIMS, "C": Dim(3000, 4000)}), r"relations='C == G \* Cg', expected dims whose ranges let it hold"),
    (dict(relations=(Product("C", ("G", "Cg")),), oracle=lambda x, w: x),
     r"oracle=.* does not accept the declared inputs \['x', 'w', 'G', 'Cg'\]"),
    (dict(scalars={"G": Scalar(1, 2)}), r"dims='G', expected a dim handed by keyword .* named apart from the "
                                        r"inputs and scalars"),
    (dict(relations=("C = G * Cg",)), r"relations='C = G \* Cg', expected Product\(dim, factors\) or Divisible"),
])
def test_a_bad_relation_is_named(change, match):
    with pytest.raises(InvalidContract, match=match):
        Contract(**{**PRODUCT, **change})


def test_a_divisor_starts_at_one_and_a_product_has_two_factors():
    with pytest.raises(InvalidContract, match=r"dims\['G'\]=.*expected a divisor's range to start at 1 or more"):
        Contract(**{**DIVISIBLE, "dims": {**DIVISIBLE["dims"], "G": Dim(0, 8)}})
    with pytest.raises(InvalidContract, match=r"Product: factors='G', expected two or more dim names"):
        Product("C", "G")
    with pytest.raises(InvalidContract, match=r"Divisible: by='C', expected the name of a dim other than 'C'"):
        Divisible("C", by="C")


def test_the_group_norm_declares_its_relation():
    from kernels_under_test.group_norm import GROUP_NORM_CONTRACT, group_norm_reference

    assert GROUP_NORM_CONTRACT["relations"] == (Divisible("C", by="G"),)
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    w, b = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    ref = torch.nn.functional.group_norm(x, 3, w, b, 1e-5)
    assert torch.allclose(group_norm_reference(x, w, b, 1e-5, 3), ref)
