"""Tensor descriptors in the contract: the hardware's rules, the declaration, the descriptor cells' draws."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel is defined: a later module's run on the interpreter

import pytest
from hypothesis import HealthCheck, given, settings

from tests._subjects import as_subject
from triton_conformance import Contract, Dim, InvalidContract, Tensor
from triton_conformance.conformance.kinds import cells_for
from triton_conformance.model.descriptors import DESCRIPTOR_LAYOUT_CLASSES, descriptor_breaches
from triton_conformance.strategies import build_inputs, specs

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

ALIGNED = 0x1000  # a 16-byte aligned address


def rules(*args, **kwargs):
    return [b.rule for b in descriptor_breaches(*args, **kwargs)]


@pytest.mark.parametrize(("address", "itemsize", "strides", "block", "expected"), [
    (ALIGNED, 2, (64, 1), (32, 32), []),
    (ALIGNED + 2, 2, (64, 1), (32, 32), ["base"]),  # one fp16 element into its storage
    (ALIGNED, 2, (33, 1), (32, 32), ["strides"]),  # rows of K+1 = 33 elements: 66 bytes
    (ALIGNED, 4, (4, 1), (32, 32), []),  # 16 bytes of fp32: aligned
    (ALIGNED, 2, (1, 40), (32, 32), ["strides", "last-dim"]),  # a transpose: strided last dim
    (ALIGNED, 2, (64, 1), (512, 32), ["block"]),  # a block dim past 256
    (ALIGNED, 2, (64, 1), (32, 4), ["block"]),  # a last block dim of 8 bytes
    (ALIGNED, 1, (16, 1), (32, 16), []),  # fp8: 16 elements are 16 bytes
    (ALIGNED, 2, (64, 1), None, []),  # the block not known: not judged
], ids=["aligned", "base", "rows", "fp32-rows", "transposed", "big-block", "narrow-block", "fp8", "no-block"])
def test_each_rule_is_broken_by_exactly_its_numbers(address, itemsize, strides, block, expected):
    assert rules(address, itemsize, strides, block) == expected


def test_a_breach_says_the_rule_and_the_numbers():
    (breach,) = descriptor_breaches(ALIGNED, 2, (33, 1), (32, 32))
    assert "33 elements = 66 bytes" in breach.detail


@pytest.mark.parametrize("bad", ["yes", 1.0, None])
def test_descriptor_takes_a_bool(bad):
    with pytest.raises(InvalidContract, match=r"descriptor=.*expected True"):
        Tensor(("M", "K"), descriptor=bad)


def test_a_descriptor_input_needs_a_rank():
    with pytest.raises(InvalidContract, match="rank from 1 to 5"):
        Tensor((), descriptor=True)
    assert "descriptor=True" in repr(Tensor(("M",), descriptor=True))
    assert "descriptor" not in repr(Tensor(("M",)))


def _contract(**decl):
    return Contract(inputs={"a": Tensor(("M", "K"), dtypes=("float16", "float32"), layouts="any", **decl),
                            "b": Tensor(("K", "N"), dtypes=("float16", "float32"), layouts="any")},
                    dims={"M": Dim(1, 64), "K": Dim(1, 64), "N": Dim(1, 64)}, oracle=lambda a, b: a @ b)


def test_only_a_subject_with_a_descriptor_input_gets_the_descriptor_cells():
    with_descriptor = cells_for(as_subject(_contract(descriptor=True)))
    assert [c for c in with_descriptor if c.startswith("descriptor:")] == [
        f"descriptor:{k}" for k in DESCRIPTOR_LAYOUT_CLASSES]
    assert not [c for c in cells_for(as_subject(_contract())) if c.startswith("descriptor")]


def _breaks(kind, view):
    """Whether a torch view breaks ``kind``'s rule, read from torch's own strides and address."""
    if kind == "misaligned-base":
        return view.data_ptr() % 16 != 0
    if kind == "unaligned-rows":
        return view.stride(0) * view.element_size() % 16 != 0
    return view.stride(-1) != 1


@pytest.mark.parametrize("kind", DESCRIPTOR_LAYOUT_CLASSES)
def test_a_descriptor_cell_draws_only_views_that_break_its_rule(kind):
    contract = _contract(descriptor=True)

    @FAST
    @given(specs(contract, descriptor=kind))
    def check(spec):
        assert set(spec.layouts) == {"a"}  # b is not read through a descriptor
        built = build_inputs(contract, spec)
        a = built.views["a"]
        assert _breaks(kind, a), (spec, a.stride(), a.data_ptr() % 16)
        assert tuple(a.shape) == (spec.dims["M"], spec.dims["K"])  # a legal view of the declared shape

    check()


def test_a_descriptor_draw_needs_a_descriptor_input():
    from triton_conformance import InvalidArgument

    with pytest.raises(InvalidArgument, match="descriptor='transposed'"):
        specs(_contract(), descriptor="transposed")
    with pytest.raises(InvalidArgument, match="descriptor="):
        specs(_contract(descriptor=True), descriptor="sliced")
