"""fla-core 0.6.0 (flash-linear-attention): five of its Triton kernels, declared as the library claims them.

No shim code: the library is imported as installed.  Every fla kernel is
``@triton.autotune``d (``triton.autotune`` or ``fla_cache_autotune``), and the
chunked ones loop with ``for i_t in range(NT): i_t.to(tl.int64)``; the suite's
compat layer runs the autotuner's own pruning and the first surviving config,
and makes loop variables int32 tensors, as compiled Triton does.

The launchers are the library's public functions, called as its docstrings
show.  Claims, from the code:

- ``@input_guard`` (``fla.utils.decorators``) on every ``forward`` makes each
  tensor argument ``.contiguous()``: any layout is accepted (copied).  The
  SwiGLU forward is ``input_guard(no_guard_contiguous=True)`` and addresses
  ``row * row_stride + col`` itself (``prepare_input`` keeps padded rows,
  offsets and stride-0 row broadcasts, copies the rest): any layout too;
- ``chunk_local_cumsum`` has no guard at all: its docs say "Inputs must be in
  ``[B, T, H, ...]`` format" and its kernels index a dense ``[B, T, H]``
  tensor, so it claims contiguous inputs only;
- norms: ``MAX_FUSED_SIZE = 65536 // x.element_size()`` and a RuntimeError
  past it ("doesn't support feature dim >= 64KB"): D <= 16384 for fp32
  (32768 for fp16/bf16; the contract has one range for all dtypes, so the
  tightest is declared and wider fp16 rows are "beyond the claim");
- dtypes fp16, bf16, fp32 (fla computes in fp32 and casts the result back).

The oracles are the math in float64, written here.
"""

import torch
import torch.nn.functional as F

from fla.modules.activations.ops import swiglu
from fla.modules.norm.l2norm import l2norm
from fla.modules.norm.layernorm import rms_norm
from fla.ops.simple_gla import fused_recurrent_simple_gla
from fla.ops.utils.cumsum import chunk_local_cumsum

from triton_conformance import Dim, Scalar, Tensor, subject

DTYPES = ("float16", "bfloat16", "float32")
TOKENS = Dim(1, 1 << 24)          # rows: no bound in the code (int64 program ids)
FEATURES = Dim(1, 16384)          # 64 KB of fp32 per row
EPS = Scalar(1e-6, 1e-4)
MAX_ELEMENTS = 1 << 14            # cost cap for drawn examples on the interpreter (not a claim)


# -- L2Norm ------------------------------------------------------------------------------------
# y = x * rsqrt(sum(x^2) + eps): eps inside the square root (l2norm_fwd_kernel), not F.normalize's
# x / max(||x||, eps).  Two paths: a BT-row tile kernel for D <= 512, a row kernel above.

@subject(
    family="l2norm",
    inputs={"x": Tensor(("M", "D"), dtypes=DTYPES, layouts="any")},
    dims={"M": TOKENS, "D": FEATURES},
    scalars={"eps": EPS},
    oracle=lambda x, eps: x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps),
    reduces="D",
    max_elements=MAX_ELEMENTS,
    xfail="fla-core 0.6.0 bug: l2norm_fwd allocates y = torch.empty_like(x), which keeps the strides of a "
          "contiguous x whose last dim has size 1 (a (4, 1) view with strides (1, 5), e.g. a transposed row), "
          "and then its own `assert y.stride(-1) == 1` refuses the input",
)
def fla_l2norm(x, eps):
    """fla.modules.norm.l2norm.l2norm(x (..., D), eps) (L2Norm's forward; used on q/k in DeltaNet, GDN)."""
    return l2norm(x, eps=eps)


# -- RMSNorm with a residual (the pre-norm block of every fla model) ---------------------------
# y = (x + residual) * rsqrt(mean((x + residual)^2) + eps) * weight + bias; statistics in fp32.

def _rms_norm_residual(x, residual, weight, bias, eps):
    h = x + residual
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight + bias


def _rms_norm_scale(x, residual, weight, bias, eps):
    h = x + residual
    rstd = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    # x + residual is rounded to fp32 (exact enough), then normalised: errors follow |h| rstd |w| + |b|,
    # and the rounding of x + residual is relative to |x| + |residual|.
    return (x.abs() + residual.abs()) * rstd * weight.abs() + bias.abs()


@subject(
    family="rms_norm",
    inputs={"x": Tensor(("M", "D"), dtypes=DTYPES, layouts="any"),
            "residual": Tensor(("M", "D"), dtypes=DTYPES, layouts="any"),
            "weight": Tensor(("D",), dtypes=DTYPES, layouts="any"),
            "bias": Tensor(("D",), dtypes=DTYPES, layouts="any")},
    dims={"M": TOKENS, "D": FEATURES},
    scalars={"eps": EPS},
    oracle=_rms_norm_residual,
    error_scale=_rms_norm_scale,
    reduces="D",
    max_elements=MAX_ELEMENTS,
)
def fla_rms_norm(x, residual, weight, bias, eps):
    """fla.modules.norm.layernorm.rms_norm(x, weight, bias, residual=residual, eps=eps) (RMSNorm(fuse) forward)."""
    return rms_norm(x, weight, bias, residual=residual, eps=eps)


# -- SwiGLU ------------------------------------------------------------------------------------

@subject(
    family="swiglu",
    inputs={"x": Tensor(("M", "D"), dtypes=DTYPES, layouts="any"),
            "y": Tensor(("M", "D"), dtypes=DTYPES, layouts="any")},
    dims={"M": TOKENS, "D": Dim(1, 1 << 24)},   # no bound on D: a flat index over x.numel()
    oracle=lambda x, y: F.silu(x) * y,
    error_scale=lambda x, y: F.silu(x).abs() * y.abs(),
    max_elements=MAX_ELEMENTS,
)
def fla_swiglu(x, y):
    """fla.modules.activations.ops.swiglu(x, y) = silu(x) * y (GatedMLP's activation); asserts x.shape == y.shape."""
    return swiglu(x, y)


# -- chunk_local_cumsum (the gate cumsum of every chunked fla op) ------------------------------
# o[b, t, h] = sum of g[b, s, h] for s from the start of t's chunk of 64 to t (chunk_size=64, what
# the chunk_* ops pass); the output is fp32 (output_dtype=torch.float, the default).

CHUNK = 64


def _local_cumsum(g):
    B, T = g.shape[:2]
    out = torch.empty_like(g)
    for s in range(0, T, CHUNK):
        out[:, s:s + CHUNK] = g[:, s:s + CHUNK].cumsum(1)
    return out


def _local_cumsum_scale(g):
    B, T = g.shape[:2]
    out = torch.empty_like(g)
    for s in range(0, T, CHUNK):
        out[:, s:s + CHUNK] = g[:, s:s + CHUNK].abs().cumsum(1)
    return out


@subject(
    family="cumsum",
    inputs={"g": Tensor(("B", "T", "H"), dtypes=DTYPES, layouts="contiguous")},
    dims={"B": TOKENS, "T": TOKENS, "H": TOKENS},   # grid NT * B * H: no bound on any of them
    oracle=_local_cumsum,
    error_scale=_local_cumsum_scale,
    reduces="T",
    max_elements=MAX_ELEMENTS,
)
def fla_chunk_local_cumsum(g):
    """fla.ops.utils.cumsum.chunk_local_cumsum(g [B, T, H], chunk_size=64): the scalar-gate kernel."""
    return chunk_local_cumsum(g, chunk_size=CHUNK)


# -- Simple GLA, recurrent form ----------------------------------------------------------------
# S_t = exp(g_t) S_{t-1} + k_t v_t^T,  o_t = scale * q_t^T S_t,  S_0 = h0; returns (o, S_T).
# g is a forget gate in log space (<= 0): fla's docstring example builds it as F.logsigmoid(randn).
# Declared with value_range=(-10, 0): a gate between exp(-10) = 4.5e-5 and 1.

def _simple_gla(q, k, v, g, h0, absolute=False):
    if absolute:
        q, k, v, h0 = q.abs(), k.abs(), v.abs(), h0.abs()
    B, T, H, K = q.shape
    scale = K ** -0.5
    S = h0.clone()
    o = torch.empty(B, T, H, v.shape[-1], dtype=q.dtype, device=q.device)
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None] + k[:, t][..., :, None] * v[:, t][..., None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, S)
    return o, S


def _gla_scale(q, k, v, g, h0):
    o, S = _simple_gla(q, k, v, g, h0, absolute=True)
    return o * q.shape[-1] ** 0.5, S


@subject(
    family="simple_gla",
    inputs={"q": Tensor(("B", "T", "H", "K"), dtypes=DTYPES, layouts="any"),
            "k": Tensor(("B", "T", "H", "K"), dtypes=DTYPES, layouts="any"),
            "v": Tensor(("B", "T", "H", "V"), dtypes=DTYPES, layouts="any"),
            "g": Tensor(("B", "T", "H"), dtypes=DTYPES, layouts="any", value_range=(-10.0, 0.0)),
            "h0": Tensor(("B", "H", "K", "V"), dtypes=("float32",), layouts="any")},
    dims={"B": Dim(1, 1024), "T": Dim(1, 1 << 24), "H": Dim(1, 256), "K": Dim(1, 512), "V": Dim(1, 512)},
    oracle=lambda q, k, v, g, h0: _simple_gla(q, k, v, g, h0),
    # Rounding errors: the state is a running sum over T (the declared reduction) and each output
    # a dot over K of it, so they scale with the recurrence on |q|, |k|, |v|, |h0| times sqrt(K).
    # One scale per output: (o, final state).
    error_scale=_gla_scale,
    reduces="T",
    max_elements=1 << 12,
)
def fla_fused_recurrent_simple_gla(q, k, v, g, h0):
    """fused_recurrent_simple_gla(q, k, v, g=g, initial_state=h0, output_final_state=True) -> (o, final state)."""
    return fused_recurrent_simple_gla(q, k, v, g=g, initial_state=h0, output_final_state=True)
