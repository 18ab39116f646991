"""vLLM's and SGLang's fp8 Triton kernels, declared as their callers use them: per-token-group quantization
(group 128, e4m3fn, row- or column-major scales) and the W8A8 block-scaled GEMM (block [128, 128]).

The kernels and launchers are upstream's, cut verbatim into sources/ by get_serving_kernels.py (vLLM
0.34.0, SGLang 0.5.23; not committed).  Each subject is the library's own launcher called as its caller
calls it; the claims are cited from upstream beside each declaration, the oracles written from the math.

* Quantizers.  ``scale = max(amax, eps) / fp8_max`` per group of 128 along the last dim (eps 1e-10, fp8_max
  448), ``q = clamp(x / scale, -448, 448)`` cast to e4m3fn (round to nearest even): judged bit for bit.
  The fp32 steps are declared as each library writes them: vLLM forms the scale as ``amax * (1.0 /
  fp8_max)`` and ``q`` as ``y / y_s``; SGLang's row-major kernel the scale as ``amax / bit8_max`` and
  ``q`` as ``y * (1.0 / y_s)``, its column-major one ``y / y_s``.  vLLM's callers pass
  ``column_major_scales=False, use_ue8m0=False`` (``_triton_per_token_group_quant_fp8_impl``, the Triton
  linear path) or ``column_major_scales=True`` (the CUTLASS and DeepGEMM paths' ``QuantFP8``).  The
  launchers assert ``x.shape[-1] % group_size == 0`` and ``x.stride(-1) == 1`` (vLLM) or
  ``x.is_contiguous()`` (SGLang): declared ``Divisible("K", by="G")`` with ``G`` = 128, contiguous.
  vLLM's docstring says "x: The input tensor with ndim >= 2": a 3-D subject declares that.
* GEMMs.  ``C = dequant(A) @ dequant(B).T`` with ``A`` (M, K) e4m3fn scaled per token and group of 128
  along K (``As`` (M, cdiv(K, 128)), fp32), ``B`` (N, K) e4m3fn scaled per 128 x 128 block (``Bs``
  (cdiv(N, 128), cdiv(K, 128))), ``block_size=[128, 128]``, bf16 output (``_run_triton`` passes the
  activation's dtype; serving runs bf16).  Both assert ``A.is_contiguous()``; SGLang also
  ``B.is_contiguous()``; vLLM reads B and both scales through their strides.

On the interpreter vLLM's ``current_platform`` answers as its CPU platform does, so its quantizer takes the
Triton fallback it takes on CUDA for a non-contiguous x (a contiguous x goes to its C++ op on CUDA).
Dims without an upstream bound are ``Dim(..., 2^24)`` ("unbounded in practice"); ``max_elements`` is a
cost cap for the interpreter, not a claim.
"""

import torch

from sources.sglang_fp8_gemm import w8a8_block_fp8_matmul_triton
from sources.sglang_fp8_quant import _per_token_group_quant_8bit_raw
from sources.vllm_fp8_utils import per_token_group_quant_fp8, w8a8_triton_block_scaled_mm
from triton_conformance import Dim, Divisible, Tensor, Tolerance, subject
from triton_conformance.model.scales import Scale
from triton_conformance.oracles.quantization import group_quantized

UNBOUNDED = 1 << 24
EPS = 1e-10  # both libraries' default eps
ACTIVATIONS = ("bfloat16", "float16", "float32")  # the kernels load any float and compute in fp32
FP8_VALUES = ("zero-blocks", "fp8-subnormal", "fp8-ties")


# %%
# Per-token-group quantization, group 128
# ---------------------------------------


def quant_contract(family, scale_by, quantize_by, rows=("M",)):
    """A group-128 e4m3fn quantizer over x (*rows, K): q and the fp32 scales bit for bit."""

    def oracle(x, G):
        q, s = group_quantized(x.reshape(-1, x.shape[-1]), group=G, eps=EPS, scale_by=scale_by,
                               quantize_by=quantize_by)
        return q.reshape(x.shape), s.reshape(*x.shape[:-1], s.shape[-1])  # -1 is ambiguous for an empty x

    return dict(
        family=family,
        inputs={"x": Tensor((*rows, "K"), dtypes=ACTIVATIONS, layouts="contiguous")},
        dims={**{r: Dim(1, UNBOUNDED) for r in rows}, "K": Dim(128, UNBOUNDED), "G": Dim(128, 128)},
        relations=(Divisible("K", by="G"),),
        oracle=oracle,
        tolerance=Tolerance(rtol=0.0, atol=0.0),
        values=FP8_VALUES,
        max_elements=1 << 14,
    )


@subject(**quant_contract("vllm_group_quant", scale_by="reciprocal", quantize_by="divide"))
def vllm_per_token_group_quant_fp8(x, G):
    """vLLM: ``per_token_group_quant_fp8(x, group_size, column_major_scales=False, use_ue8m0=False)``."""
    return per_token_group_quant_fp8(x, G, column_major_scales=False, use_ue8m0=False)


@subject(**quant_contract("vllm_group_quant", scale_by="reciprocal", quantize_by="divide"))
def vllm_per_token_group_quant_fp8_colmajor(x, G):
    """vLLM: the same with ``column_major_scales=True`` (scales (M, K/128) with stride (1, M))."""
    return per_token_group_quant_fp8(x, G, column_major_scales=True, use_ue8m0=False)


VLLM_3D_BUG = ("vLLM 0.34.0's Triton fallback of per_token_group_quant_fp8 takes x.shape[1] as the row length and "
               "x.stride(0) as the row stride, so a 3-D x (B, T, K) is read at the wrong places (T < 128: "
               "groups_per_row = T // 128 = 0, an integer division by zero): FINDINGS.md, serving_fp8 bug 1")


@subject(**quant_contract("vllm_group_quant", scale_by="reciprocal", quantize_by="divide", rows=("B", "T")),
         xfail=VLLM_3D_BUG)
def vllm_per_token_group_quant_fp8_3d(x, G):
    """vLLM: ``per_token_group_quant_fp8`` on a 3-D x (B, T, K), as its docstring allows (ndim >= 2)."""
    return per_token_group_quant_fp8(x, G, column_major_scales=False, use_ue8m0=False)


@subject(**quant_contract("sglang_group_quant", scale_by="divide", quantize_by="reciprocal"))
def sglang_per_token_group_quant_fp8(x, G):
    """SGLang: ``per_token_group_quant_fp8(x, group_size)`` (``_per_token_group_quant_8bit_raw`` off CUDA)."""
    return _per_token_group_quant_8bit_raw(x, G)


@subject(**quant_contract("sglang_group_quant", scale_by="divide", quantize_by="divide"))
def sglang_per_token_group_quant_fp8_colmajor(x, G):
    """SGLang: the same with ``column_major_scales=True`` (its column-major kernel divides by the scale)."""
    return _per_token_group_quant_8bit_raw(x, G, column_major_scales=True)


# %%
# W8A8 block-scaled GEMM, block [128, 128]
# ----------------------------------------


def gemm_contract(family, b_layouts):
    """C = dequant(A) @ dequant(B).T in bf16: A per token and group of 128, B per 128 x 128 block."""
    return dict(
        family=family,
        inputs={"A": Tensor(("M", "K"), dtypes=("float8_e4m3fn",), layouts="contiguous"),
                "B": Tensor(("N", "K"), dtypes=("float8_e4m3fn",), layouts=b_layouts),
                "As": Scale(("M", "K"), of="A", block=(1, 128), layouts="any"),
                "Bs": Scale(("N", "K"), of="B", block=(128, 128), layouts="any")},
        dims={"M": Dim(1, UNBOUNDED), "N": Dim(1, UNBOUNDED), "K": Dim(1, UNBOUNDED)},
        oracle=lambda A, B, As, Bs: A @ B.T,  # A and B arrive dequantized
        reduces="K",
        error_scale=lambda A, B, As, Bs: A.abs() @ B.abs().T,
        dot_precision="fp8-fast-accumulate",
        max_elements=1 << 15,
    )


@subject(**gemm_contract("vllm_block_fp8_gemm", b_layouts="any"))
def vllm_w8a8_block_fp8_matmul(A, B, As, Bs):
    """vLLM: ``w8a8_triton_block_scaled_mm(A, B, As, Bs, [128, 128], torch.bfloat16)``."""
    return w8a8_triton_block_scaled_mm(A, B, As, Bs, [128, 128], torch.bfloat16)


@subject(**gemm_contract("sglang_block_fp8_gemm", b_layouts="contiguous"))
def sglang_w8a8_block_fp8_matmul(A, B, As, Bs):
    """SGLang: ``w8a8_block_fp8_matmul_triton(A, B, As, Bs, [128, 128], torch.bfloat16)``."""
    return w8a8_block_fp8_matmul_triton(A, B, As, Bs, [128, 128], torch.bfloat16)
