"""fp8: torch's scaled GEMM (``torch._scaled_mm``), with and without its fast accumulator, and its casts.

``_scaled_mm`` takes a row-major ``a``, a column-major ``b``, per-tensor fp32 scales and sizes in
multiples of 16 (at least 16): the launcher pads with zeros (exact) and copies to those layouts, as a user's
wrapper would.  Declared as the fp8 GEMMs of ``kernels_under_test`` are: the oracle sees ``a`` and
``b`` dequantized, and the products' magnitudes scale the error.  Neither declares a ``dot_precision``:
on CUDA a reduction over fp8 inputs is judged as Hopper's tensor cores sum it (docs/tolerance.md, fp8).
"""

import torch

from triton_conformance import Dim, Tensor, Tolerance, subject
from triton_conformance.model.scales import Scale
from triton_conformance.oracles.quantization import fp8_cast

FP8 = ("float8_e4m3fn",)
GEMM = dict(
    inputs={"a": Tensor(("M", "K"), dtypes=FP8, layouts="any"),
            "b": Tensor(("K", "N"), dtypes=FP8, layouts="any"),
            "a_scale": Scale(("M", "K"), of="a", block=(None, None)),  # per tensor
            "b_scale": Scale(("K", "N"), of="b", block=(None, None))},
    # K past 64, where the fast accumulator's linear term rules; small M and N: the CPU's fp8 GEMM is slow.
    dims={"M": Dim(1, 64), "K": Dim(1, 1024), "N": Dim(1, 64)},
    oracle=lambda a, b, a_scale, b_scale: a @ b,  # a and b arrive dequantized
    reduces="K",
    error_scale=lambda a, b, a_scale, b_scale: a.abs() @ b.abs(),
)


def _padded(t, rows, cols):
    """``t`` in a zero (rows, cols) row-major tensor of its dtype, at the top left."""
    out = torch.zeros((rows, cols), dtype=t.dtype, device=t.device)
    out[:t.shape[0], :t.shape[1]] = t
    return out


def scaled_mm(a, b, a_scale, b_scale, fast):
    M, K = a.shape
    N = b.shape[1]
    # At least 16: torch 2.13's CPU _scaled_mm with K = 0 returns uninitialised memory (3.1e34 seen), not 0.
    m, k, n = (max(16, -(-d // 16) * 16) for d in (M, K, N))
    # Scales copied: on the H200 a scale at a 4-byte storage offset made cuBLASLt refuse the fast GEMM
    # (CUBLAS_STATUS_NOT_SUPPORTED, layout:offset at nightly seed 970174307), an opaque error of torch's.
    out = torch._scaled_mm(_padded(a, m, k), _padded(b.t(), n, k).t(), scale_a=a_scale.reshape(()).clone(),
                           scale_b=b_scale.reshape(()).clone(), out_dtype=torch.float32, use_fast_accum=fast)
    return out[:M, :N]


@subject(**GEMM, family="torch_scaled_mm")
def torch_scaled_mm(a, b, a_scale, b_scale):
    """``torch._scaled_mm`` in fp32 out, its accumulator promoted (the default)."""
    return scaled_mm(a, b, a_scale, b_scale, fast=False)


@subject(**GEMM, family="torch_scaled_mm_fast")
def torch_scaled_mm_fast(a, b, a_scale, b_scale):
    """``torch._scaled_mm(..., use_fast_accum=True)``: the tensor cores' own accumulator on Hopper."""
    return scaled_mm(a, b, a_scale, b_scale, fast=True)


@subject(inputs={"x": Tensor(("M", "N"), dtypes=("float32", "float16", "bfloat16"), layouts="any")},
         dims={"M": Dim(0, 1024), "N": Dim(0, 1024)}, family="torch_to_float8",
         oracle=lambda x: fp8_cast(x, "float8_e4m3fn", saturate=False), tolerance=Tolerance(rtol=0.0, atol=0.0),
         values=("fp8-overflow", "fp8-subnormal", "fp8-ties", "inf", "nan"))
def torch_to_float8(x):
    """``x.to(torch.float8_e4m3fn)``: round to nearest even; past 448 (and inf) NaN, e4m3fn has no infinity."""
    return x.to(torch.float8_e4m3fn)


SUBJECTS = (torch_scaled_mm, torch_scaled_mm_fast, torch_to_float8)
