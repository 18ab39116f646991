"""liger-kernel 0.8.5 (LinkedIn): five of its Triton kernels, declared as the library claims them.

No shim code: the library is imported as installed, and the suite's interpreter
compatibility layer (``triton_conformance.compat``, on by default under the
interpreter) supplies what the CPU lacks (libdevice ``rsqrt``/``tanh``, Python
float kernel arguments specialised to fp32 scalars).

Each subject is the library's own public ``torch.autograd.Function`` (what
``LigerRMSNorm``, ``LigerLayerNorm``, ``LigerSwiGLUMLP``, ... call in their
``forward``), registered as it is: the suite calls ``Function.apply`` with the
declared inputs at their places among ``forward``'s parameters, so the inputs
carry ``forward``'s own names (``X``, ``W``, ``input_``).  Only Gemma's RMSNorm,
whose ``casting_mode="gemma"`` is a string argument, is a plain function around
``apply``.  The claims come from the library's code:

- every ``forward`` is decorated ``@ensure_contiguous``, which calls
  ``.contiguous()`` on every tensor argument, so any strides, offsets and
  stride-0 broadcasts are accepted (copied): ``layouts="any"``;
- ``calculate_settings(n)`` sets ``BLOCK_SIZE = next_power_of_2(n)`` and raises
  ``RuntimeError`` past 65536: the last dim is claimed up to 65536, and a wider
  one is refused by the library's own code;
- inputs are ``(..., H)`` viewed as ``(-1, H)``: any number of rows (one
  program each, ``program_id(0).to(tl.int64)``).  Rows are declared up to 2^24
  ("unbounded in practice" to the suite);
- dtypes: fp16, bf16 and fp32 (``torch_to_triton_dtype`` in the backward
  passes knows exactly these three; liger's own tests run fp32 and bf16, most
  also fp16).

The oracles are the math, in float64, written here (not the library's code).

Three Functions also declare their backward (``backward=Backward(...)``: the ``grad``
cells judge it against float64 autograd of the oracle), as their ``backward`` and
its kernel compute it: RMSNorm (llama casting, dY overwritten in place, dW's terms
in x's dtype), Gemma's RMSNorm (all fp32, dY kept) and LayerNorm.  SwiGLU and
GEGLU are not declared: their backward writes da and db into the saved a and b
("recomputation to save memory"), the caller's inputs when they were contiguous,
and a contract has no way to allow a backward to overwrite its saved inputs.
"""

import torch

from liger_kernel.ops.geglu import LigerGELUMulFunction
from liger_kernel.ops.layer_norm import LigerLayerNormFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.softmax import LigerSoftmaxFunction
from liger_kernel.ops.swiglu import LigerSiLUMulFunction

from triton_conformance import Dim, Scalar, Tensor, register, subject
from triton_conformance.model.contract import Backward

DTYPES = ("float16", "bfloat16", "float32")
ROWS = Dim(1, 1 << 24)       # any number of rows: one program each, int64 row offsets
HIDDEN = Dim(1, 65536)       # calculate_settings: RuntimeError past 65536
EPS = Scalar(1e-6, 1e-4)     # HF models use 1e-6 .. 1e-5
# A cost cap for the drawn examples on the interpreter (not a claim).
# The interpreter's cost is programs (rows here) x work per program: 4096 elements keep an
# example with N = 1 at <= 4096 programs.
MAX_ELEMENTS = 1 << 12


def _rms(x, eps):
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


# -- RMSNorm ---------------------------------------------------------------------------------
# y = x / sqrt(mean(x^2) + eps) * (offset + w)   (docstring of LigerRMSNormFunction)
# casting_mode "llama" (the default): mean(x^2) and rstd in fp32, x * rstd rounded to x's dtype
# before the weight multiply, "as HF Llama does"; "gemma": everything in fp32, one final rounding.

def _rms_norm_scale(X, W, eps, offset):
    # llama mode rounds x * rstd to x's dtype before multiplying by (offset + w), and offset + w
    # is itself rounded (to fp32, or x's dtype): relative to |offset| + |w|, not |offset + w|,
    # which cancels when w is near -offset.
    return (X * _rms(X, eps)).abs() * (abs(offset) + W.abs())


def _rms_norm_grad_scale(X, W, eps, offset, grad_output):
    # _rms_norm_backward_kernel: m = dy * (w + offset) in fp32, dx = rstd * (m - x * rstd^2 * mean(m * x)),
    # dW = the sum over rows of dy * x * rstd.  dx's two terms cancel (a row of one element has dx ~ 0
    # and terms ~ rstd |m|), and w + offset cancels where w is near -offset: the scales are the terms'.
    rstd = _rms(X, eps)
    m = grad_output.abs() * (abs(offset) + W.abs())
    dx = rstd * (m + X.abs() * rstd * rstd * (X.abs() * m).mean(-1, keepdim=True))
    rows = tuple(range(X.dim() - 1))
    return {"X": dx, "W": (grad_output * X * rstd).abs().sum(rows)}


# The backward, from LigerRMSNormFunction.backward and rms_norm_backward:
# - X and W get gradients (it returns dX, dW, then None for eps, offset, casting_mode, in_place, row_mode);
# - in_place=True (the default, "to save memory"): dX is written into dY, so grad_output is overwritten
#   (after @ensure_contiguous, which copies a non-contiguous dY first);
# - dW: one fp32 partial row per program (_dW of (sm_count, H)), summed by _dW.sum(0): no atomics,
#   deterministic;
# - casting_mode "llama" (as HF Llama, whose weight multiplies x * rstd cast to x's dtype): the kernel
#   adds dY_row * (X_row * rstd_row).to(X_dtype), a product of two x-dtype values, so each term of dW
#   is rounded to x's dtype before the fp32 sum: dW's precision is the input's (accumulate "input").
RMS_NORM_BACKWARD = Backward(grads=("X", "W"), overwrites_grad_output=True, deterministic=True,
                             accumulate={"W": "input"}, error_scale=_rms_norm_grad_scale)

# LigerRMSNormFunction.forward(ctx, X (B, T, H), W (H,), eps, offset=0.0, casting_mode="llama",
# in_place=True, row_mode=None): the defaults are kept (in_place only concerns the backward).
register(
    LigerRMSNormFunction,
    name="liger_rms_norm",
    family="rms_norm",
    inputs={"X": Tensor(("B", "T", "H"), dtypes=DTYPES, layouts="any"),
            "W": Tensor(("H",), dtypes=DTYPES, layouts="any")},
    dims={"B": Dim(1, 64), "T": ROWS, "H": HIDDEN},
    scalars={"eps": EPS, "offset": Scalar(0.0, 1.0)},
    oracle=lambda X, W, eps, offset: X * _rms(X, eps) * (offset + W),
    error_scale=_rms_norm_scale,
    reduces="H",
    backward=RMS_NORM_BACKWARD,
    max_elements=MAX_ELEMENTS,
)


def _gemma_grad_scale(x, weight, eps, grad_output):
    scales = _rms_norm_grad_scale(x, weight, eps, 1.0, grad_output)
    return {"x": scales["X"], "weight": scales["W"]}


@subject(
    family="rms_norm",
    inputs={"x": Tensor(("M", "H"), dtypes=DTYPES, layouts="any"),
            "weight": Tensor(("H",), dtypes=DTYPES, layouts="any")},
    dims={"M": ROWS, "H": HIDDEN},
    scalars={"eps": EPS},
    oracle=lambda x, weight, eps: x * _rms(x, eps) * (1.0 + weight),
    reduces="H",
    # As LigerRMSNormForGemma: in_place=False, so dY is left alone; everything in fp32.
    backward=Backward(grads=("x", "weight"), deterministic=True, error_scale=_gemma_grad_scale),
    max_elements=MAX_ELEMENTS,
)
def liger_rms_norm_gemma(x, weight, eps):
    """Gemma's RMSNorm: offset=1.0, casting_mode="gemma" (all fp32, then cast back), as LigerRMSNormForGemma."""
    return LigerRMSNormFunction.apply(x, weight, eps, 1.0, "gemma", False)


# -- LayerNorm -------------------------------------------------------------------------------
# mean, var, rstd in fp32; y = (x - mean) * rstd * w + b rounded once to x's dtype.

def _layer_norm_scale(X, W, B, eps):
    rstd = torch.rsqrt(X.var(-1, unbiased=False, keepdim=True) + eps)
    return X.abs().amax(-1, keepdim=True) * rstd * W.abs() + B.abs()


def _layer_norm_grad_scale(X, W, B, eps, grad_output):
    # _layer_norm_backward_kernel, all in fp32: x_hat = (x - mean) * rstd, wdy = w * dy,
    # dx = (wdy - (x_hat * mean(x_hat * wdy) + mean(wdy))) * rstd, dW = sum(dy * x_hat), dB = sum(dy).
    # x - mean cancels (rounding relative to the row's largest |x|, as in the forward's scale), and
    # dx's terms cancel: the scales are the terms', with |x_hat| bounded by max|x| * rstd.
    rstd = torch.rsqrt(X.var(-1, unbiased=False, keepdim=True) + eps)
    a = X.abs().amax(-1, keepdim=True) * rstd
    wdy = W.abs() * grad_output.abs()
    dx = rstd * (wdy + a * (a * wdy).mean(-1, keepdim=True) + wdy.mean(-1, keepdim=True))
    return {"X": dx, "W": (grad_output.abs() * a).sum(0), "B": grad_output.abs().sum(0)}


# LigerLayerNormFunction.forward(ctx, X (..., H), W (H,), B (H,), eps); ValueError if W does not match H.
# Its backward returns DX, DW, DB (None for eps), DX freshly allocated (dY untouched), DW and DB from
# fp32 per-program partials summed by .sum(0): no atomics, deterministic.
register(
    LigerLayerNormFunction,
    name="liger_layer_norm",
    family="layer_norm",
    inputs={"X": Tensor(("M", "H"), dtypes=DTYPES, layouts="any"),
            "W": Tensor(("H",), dtypes=DTYPES, layouts="any"),
            "B": Tensor(("H",), dtypes=DTYPES, layouts="any")},
    dims={"M": ROWS, "H": HIDDEN},
    scalars={"eps": EPS},
    oracle=lambda X, W, B, eps: torch.nn.functional.layer_norm(X, (X.shape[-1],), W, B, eps),
    error_scale=_layer_norm_scale,
    reduces="H",
    backward=Backward(grads=("X", "W", "B"), deterministic=True, error_scale=_layer_norm_grad_scale),
    max_elements=MAX_ELEMENTS,
)


# -- SwiGLU / GEGLU (the gated MLP activations) ----------------------------------------------
# c = silu(a) * b and c = gelu_tanh(a) * b: the activation in fp32, cast to b's dtype, times b.
# a and b are the gate and up projections, both (..., N).

def _gated_scale(act):
    return lambda a, b: act(a).abs() * b.abs()


def _geglu_scale(a, b):
    # 0.5 * a * (1 + tanh(...)): for negative a, 1 + tanh cancels, so the fp32 rounding of tanh
    # is relative to |0.5 a| (|a| / 2 <= |a|), not to the small gelu(a).
    return a.abs() * b.abs()


# LigerSiLUMulFunction.forward(ctx, a, b, gate_multiplier=1.0, down_multiplier=1.0): silu(a) * b
# (LigerSwiGLUMLP's activation).
register(
    LigerSiLUMulFunction,
    name="liger_swiglu",
    family="swiglu",
    inputs={"a": Tensor(("M", "N"), dtypes=DTYPES, layouts="any"),
            "b": Tensor(("M", "N"), dtypes=DTYPES, layouts="any")},
    dims={"M": ROWS, "N": HIDDEN},
    oracle=lambda a, b: torch.nn.functional.silu(a) * b,
    error_scale=_gated_scale(torch.nn.functional.silu),
    max_elements=MAX_ELEMENTS,
)

# LigerGELUMulFunction.forward(ctx, a, b): gelu(a, approximate="tanh") * b (LigerGEGLUMLP's activation).
register(
    LigerGELUMulFunction,
    name="liger_geglu",
    family="geglu",
    inputs={"a": Tensor(("M", "N"), dtypes=DTYPES, layouts="any"),
            "b": Tensor(("M", "N"), dtypes=DTYPES, layouts="any")},
    dims={"M": ROWS, "N": HIDDEN},
    oracle=lambda a, b: torch.nn.functional.gelu(a, approximate="tanh") * b,
    error_scale=_geglu_scale,
    max_elements=MAX_ELEMENTS,
)


# -- Softmax ---------------------------------------------------------------------------------
# Over the last dim; the row max is subtracted before exp (both kernels), so huge logits are claimed.

# LigerSoftmaxFunction.forward(ctx, input_): softmax over the last dim (LigerSoftmax's forward).
register(
    LigerSoftmaxFunction,
    name="liger_softmax",
    family="softmax",
    inputs={"input_": Tensor(("M", "N"), dtypes=DTYPES, layouts="any")},
    dims={"M": ROWS, "N": HIDDEN},
    oracle=lambda input_: torch.softmax(input_, dim=-1),
    reduces="N",
    values=("huge",),
    max_elements=MAX_ELEMENTS,
)
