"""The fp8 shim (triton_conformance/compat/fp8.py): the interpreter's fp8 casts, made to agree with torch's
round-to-nearest-even and with the GPU's saturation (cvt.rn.satfinite)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import pytest
import torch
import triton

from triton_conformance import compat

pytestmark = [pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the layer is interpreter-only"),
              pytest.mark.usefixtures("no_shims")]

from tests.compat_kernels import fp8_casts  # after TRITON_INTERPRET

FORMATS = (torch.float8_e4m3fn, torch.float8_e5m2)


def cast(x, dtype, toward_zero=False):
    y = torch.empty(x.shape, dtype=dtype)
    fp8_casts.to_fp8[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), TOWARD_ZERO=toward_zero, BLOCK=1024)
    return y


def differing(y, ref):
    return int((y.view(torch.uint8) != ref.view(torch.uint8)).sum())


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_the_20001_point_sweep_agrees_with_torch_in_every_value(dtype):
    x = torch.linspace(-448, 448, 20001)
    assert differing(cast(x, dtype), x.to(dtype)) > 0  # the interpreter's own cast: carries and ties lost
    compat.install(["fp8"])
    assert differing(cast(x, dtype), x.to(dtype)) == 0
    tiny = torch.finfo(dtype).smallest_normal
    near_zero = torch.linspace(-4 * tiny, 4 * tiny, 4001)  # subnormals and the ties between them
    assert differing(cast(near_zero, dtype), near_zero.to(dtype)) == 0


def test_past_the_largest_finite_value_the_cast_saturates_as_on_the_gpu():
    compat.install(["fp8"])
    x = torch.tensor([447.0, 464.0, 465.0, 1e6, float("inf"), -float("inf"), float("nan"), -0.0])
    got = cast(x, torch.float8_e4m3fn).float()
    assert got[:6].tolist() == [448.0, 448.0, 448.0, 448.0, 448.0, -448.0]  # 464 is a tie: to even, 448
    assert got[6].isnan() and got[7].item() == 0.0 and got[7].signbit()
    e5 = cast(torch.tensor([61439.0, 61440.0, 1e9, -float("inf")]), torch.float8_e5m2).float()
    assert e5.tolist() == [57344.0, 57344.0, 57344.0, -57344.0]  # no infinities from the satfinite cast


def test_rtz_rounds_toward_zero_and_decoding_is_exact_for_every_bit_pattern():
    compat.install(["fp8"])
    x = torch.tensor([1.0 + 2**-4, -(1.0 + 0.124), 127.99, 500.0])
    assert cast(x, torch.float8_e4m3fn, toward_zero=True).float().tolist() == [1.0, -1.0, 120.0, 448.0]
    for dtype in FORMATS:
        q = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
        for out in (torch.float32, torch.float16, torch.bfloat16):
            y = torch.empty(256, dtype=out)
            fp8_casts.from_fp8[(1,)](q, y, 256, BLOCK=256)
            ref = q.to(out)
            assert torch.equal(y.isnan(), ref.isnan()) and torch.equal(y[~ref.isnan()], ref[~ref.isnan()]), (dtype, out)
