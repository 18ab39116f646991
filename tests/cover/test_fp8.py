"""fp8 in the contract: the dtypes, their tolerance entries, the fp8 value classes and the quantizer oracles."""

from types import SimpleNamespace

import pytest
import torch

from tests.cover.test_cells import make
from triton_conformance import Dim, InvalidContract, Tensor
from triton_conformance.oracles.quantization import group_quantized, static_quantized
from triton_conformance.oracles.tolerance import (
    LARGEST_FINITE,
    UNIT_ROUNDOFF,
    default_bound,
)
from triton_conformance.strategies._internal.values import fill_values


def test_fp8_dtypes_are_subject_dtypes_and_unknown_ones_are_refused_by_name():
    contract = make({"a": Tensor(("M", "N"), dtypes=("float8_e4m3fn", "float8_e5m2")),
                     "s": Tensor(("M",), dtypes=("float8_e8m0fnu",))}, {"M": Dim(1, 8), "N": Dim(1, 8)})
    assert contract.inputs["a"].dtypes == ("float8_e4m3fn", "float8_e5m2")
    with pytest.raises(InvalidContract, match="dtypes='float8_e4m3'"):
        Tensor(("N",), dtypes=("float8_e4m3",))


def test_an_fp8_output_is_bounded_by_its_own_unit_roundoff():
    for dtype, u, largest in (("float8_e4m3fn", 2.0**-4, 448.0), ("float8_e5m2", 2.0**-3, 57344.0)):
        assert UNIT_ROUNDOFF[dtype] == u and LARGEST_FINITE[dtype] == largest
        assert float(torch.finfo(getattr(torch, dtype)).max) == largest
        assert default_bound(out_dtype=dtype).rtol == pytest.approx(4 * u + 8 * 2.0**-24)


def fill(value_class, shape=(6, 64), dtype=torch.float32, seed=3):
    return fill_values(shape, dtype, value_class, seed)


def test_zero_blocks_zero_whole_rows_and_keep_the_others_ordinary():
    x = fill("zero-blocks")
    zero_rows = (x == 0).all(dim=1)
    assert 1 <= int(zero_rows.sum()) < x.shape[0] and (x[~zero_rows] != 0).all()


def test_fp8_ties_lie_halfway_on_the_e4m3_grid_with_a_448_every_16th_element():
    x = fill("fp8-ties")
    assert (x[:, ::16].abs() == 448).all()
    ties = x[:, 1:16].reshape(-1)
    down = ties.to(torch.float8_e4m3fn).double()  # nearest even: one neighbour
    other = 2 * ties - down  # the value as far on the other side
    assert (other.to(torch.float8_e4m3fn).double() == other).all() and (other != down).all()


def test_fp8_overflow_straddles_the_largest_finite_values_and_subnormals_lie_below_the_normals():
    x = fill("fp8-overflow", shape=(4, 512)).abs()
    assert (x >= 224).all() and (x < 4 * 57344).all()
    for largest in (448.0, 57344.0):
        assert ((x > largest) & (x < 4 * largest)).any() and ((x < largest) & (x > largest / 2)).any()
    tiny = fill("fp8-subnormal", shape=(4, 512)).abs()
    assert (tiny < 2.0**-6).all() and (tiny < 2.0**-14).sum() > 100


def test_the_group_quantizer_oracle_gives_an_all_zero_group_a_positive_scale_and_zeros():
    x = torch.randn(3, 40, dtype=torch.float64).float().double()
    x[1, :32] = 0  # the first group of row 1
    q, s = group_quantized(x, group=32, eps=1e-10)
    assert s.shape == (3, 2) and s[1, 0] == (torch.tensor(1e-10, dtype=torch.float32) / 448).double() > 0
    assert (q[1, :32] == 0).all() and not q.isnan().any()
    assert (q.abs().amax(dim=1) == 448).all()  # each row's largest element lands on the largest value


def test_the_static_oracle_saturates_or_makes_infinities_as_declared():
    x = torch.tensor([70000.0, -1e9, float("inf"), float("nan"), 61439.0], dtype=torch.float64)
    made = static_quantized(x, 1.0, dtype="float8_e5m2", saturate=False)
    saturated = static_quantized(x, 1.0, dtype="float8_e5m2", saturate=True)
    assert made[:3].tolist() == [float("inf"), -float("inf"), float("inf")] and made[4] == 57344
    assert saturated[:3].tolist() == [57344.0, -57344.0, 57344.0] and saturated[3].isnan()


def test_fp8_fast_accumulation_widens_only_where_declared_on_cuda_with_fp8_inputs():
    from tests._subjects import as_subject
    from triton_conformance.conformance.judge import Judge

    inputs = {"a": Tensor(("M", "K"), dtypes=("float8_e4m3fn",)), "b": Tensor(("K", "N"), dtypes=("float8_e4m3fn",))}
    dims = {"M": Dim(1, 8), "K": Dim(1, 256), "N": Dim(1, 8)}
    fast = as_subject(make(inputs, dims, reduces="K", dot_precision="fp8-fast-accumulate"))
    plain = as_subject(make(inputs, dims, reduces="K"))
    out, ref = torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64)
    fp8 = {"a": "float8_e4m3fn", "b": "float8_e4m3fn"}

    def rtol(subject, on_cuda, dtypes=fp8):
        on = SimpleNamespace(dtype=out.dtype, device=torch.device("cuda")) if on_cuda else out  # no GPU needed
        return Judge(subject).bound({"K": 256}, dtypes, on, ref).rtol

    assert rtol(plain, False) == rtol(fast, False) == pytest.approx(4 * 2**-24 + 8 * 2**-24 * 16)
    # K = 256 truncated terms: Higham's worst case 256 * u_fast, past 8 * u_fast * sqrt(256) = 128 * u_fast
    assert rtol(fast, True) == pytest.approx(4 * 2**-24 + 2**-13 * 256)
    # A reduction over fp8 inputs on CUDA is the tensor cores' whether declared or not; fp32 inputs are not.
    assert rtol(plain, True) == rtol(fast, True)
    assert rtol(fast, True, {"a": "float32", "b": "float32"}) == rtol(plain, False)
    elementwise = as_subject(make(inputs, dims))  # no reduction, nothing declared: fp32 arithmetic
    assert rtol(elementwise, True) < rtol(fast, True) / 100
    # Short dots keep the probabilistic rule (C sqrt(K) > K below K = 64), and the magnitudes get the same term.
    short = Judge(fast).bound({"K": 16}, fp8, SimpleNamespace(dtype=out.dtype, device=torch.device("cuda")), ref)
    assert short.rtol == pytest.approx(4 * 2**-24 + 8 * 2**-13 * 4)
    wide = Judge(fast).bound({"K": 4096}, fp8, SimpleNamespace(dtype=out.dtype, device=torch.device("cuda")), ref)
    assert wide.per_term * 64 == pytest.approx(2**-13 * 4096), "per_term x sqrt(K) is the linear term"


# -- scales as part of a tensor -------------------------------------------------------------

def scaled_contract(block=(1, 4), applies="multiply", scale_dtypes=("float32",)):
    from triton_conformance.model.scales import Scale

    return make({"a": Tensor(("M", "K"), dtypes=("float8_e4m3fn",), layouts="any"),
                 "a_scale": Scale(("M", "K"), of="a", block=block, applies=applies, dtypes=scale_dtypes,
                                  layouts="any")}, {"M": Dim(1, 8), "K": Dim(1, 16)})


def test_a_scale_declaration_is_validated_by_name():
    from triton_conformance.model.scales import Scale

    with pytest.raises(InvalidContract, match=r"Scale: block=\(4,\), expected one entry per dim"):
        Scale(("M", "K"), of="a", block=(4,))
    with pytest.raises(InvalidContract, match="Scale: applies='times'"):
        Scale(("M", "K"), of="a", block=(1, 4), applies="times")
    with pytest.raises(InvalidContract, match="Scale: dtypes='float16', expected scale dtypes"):
        Scale(("M", "K"), of="a", block=(1, 4), dtypes=("float16",))
    with pytest.raises(InvalidContract, match=r"inputs\['s'\].of='b', expected the name of a Tensor input"):
        make({"a": Tensor(("M", "K")), "s": Scale(("M", "K"), of="b", block=(1, 4))}, {"M": Dim(1, 8), "K": Dim(1, 8)})
    with pytest.raises(InvalidContract, match=r"inputs\['s'\].shape=\('K', 'M'\), expected the dims of 'a'"):
        make({"a": Tensor(("M", "K")), "s": Scale(("K", "M"), of="a", block=(1, 4))}, {"M": Dim(1, 8), "K": Dim(1, 8)})


@pytest.mark.parametrize(("block", "shape"), [((None, None), (1, 1)), ((1, None), (5, 1)), ((1, 4), (5, 3)),
                                               ((4, 4), (2, 3))], ids=["tensor", "row", "group", "block"])
def test_the_scale_is_drawn_with_its_shape_tied_to_the_dims_and_the_oracle_sees_the_dequantized_input(block, shape):
    from tests._subjects import as_subject
    from triton_conformance.conformance.judge import Judge
    from triton_conformance.model.spec import Spec
    from triton_conformance.strategies._internal.tensors import build_inputs

    contract = scaled_contract(block)
    built = build_inputs(contract, Spec(dims={"M": 5, "K": 10}, layouts={}, seed=1,
                                        dtypes={"a": "float8_e4m3fn", "a_scale": "float32"}))
    a, s = built.views["a"], built.views["a_scale"]
    assert tuple(a.shape) == (5, 10) and tuple(s.shape) == shape and (s > 0).all()
    seen = Judge(as_subject(contract)).as_float64(built.views)
    rows, cols = (block[0] or 5), (block[1] or 10)
    expected = a.double() * s.double().repeat_interleave(rows, 0)[:5].repeat_interleave(cols, 1)[:, :10]
    assert torch.equal(seen["a"], expected) and torch.equal(seen["a_scale"], s.double())
    divided = Judge(as_subject(scaled_contract(block, applies="divide"))).as_float64(built.views)["a"]
    assert torch.allclose(divided * s.double().repeat_interleave(rows, 0)[:5].repeat_interleave(cols, 1)[:, :10],
                          a.double())


def test_e8m0_scales_are_powers_of_two():
    from triton_conformance.model.spec import Spec
    from triton_conformance.strategies._internal.tensors import build_inputs

    if not hasattr(torch, "float8_e8m0fnu"):
        pytest.skip("this torch has no float8_e8m0fnu")
    contract = scaled_contract(scale_dtypes=("float8_e8m0fnu",))
    s = build_inputs(contract, Spec(dims={"M": 8, "K": 16}, layouts={}, seed=2,
                                    dtypes={"a": "float8_e4m3fn", "a_scale": "float8_e8m0fnu"})).views["a_scale"].double()
    assert (torch.exp2(torch.log2(s).round()) == s).all() and len(s.unique()) > 1


def test_the_group_quantizer_oracle_forms_each_quotient_as_declared_by_division_or_an_fp32_reciprocal():
    import numpy as np

    x = (torch.randn(64, 256, generator=torch.Generator().manual_seed(5)) * 3).to(torch.bfloat16).double()
    x32 = x.float().numpy()
    amax = np.maximum(np.abs(x32).reshape(64, 2, 128).max(axis=-1), np.float32(1e-10))
    for scale_by, quantize_by in (("reciprocal", "divide"), ("divide", "reciprocal"), ("reciprocal", "reciprocal")):
        # numpy's float32 arithmetic rounds each step once: the kernels' fp32 steps, written out.
        s = amax * (np.float32(1) / np.float32(448)) if scale_by == "reciprocal" else amax / np.float32(448)
        wide = np.repeat(s, 128, axis=1)
        y = x32 * (np.float32(1) / wide) if quantize_by == "reciprocal" else x32 / wide
        expected = torch.from_numpy(np.clip(y, -448, 448)).to(torch.float8_e4m3fn).double()
        q, scales = group_quantized(x, group=128, scale_by=scale_by, quantize_by=quantize_by)
        assert torch.equal(scales, torch.from_numpy(s).double()) and torch.equal(q, expected)
    plain, _ = group_quantized(x, group=128)
    reciprocal, _ = group_quantized(x, group=128, quantize_by="reciprocal")
    assert (plain != reciprocal).any()  # the two rules are different rules on this input
    with pytest.raises(ValueError, match="quantize_by='multiply', expected one of"):
        group_quantized(x, group=128, quantize_by="multiply")
