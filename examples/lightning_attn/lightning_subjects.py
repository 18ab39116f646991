"""lightning-attn 0.0.5 (OpenNLPLab, Lightning Attention-2): its three Triton kernels and its front door.

No shim code, and this library needs none of the compat layer's shims either:
plain ``@triton.jit`` kernels behind hand-written launchers, no autotune, no
device queries.  The claims come from its README and code:

- README, "How to use": ``lightning_attn2(q, k, v, s)`` with q, k ``(b, h, n, d)``,
  v ``(b, h, n, e)``, ``s = _build_slope_tensor(h).to(torch.float32)`` of shape
  ``(h, 1, 1)``, d = 64, dtype bf16; and ``lightning_attn_func(q, k, v, s)``
  with d = e = 192 (README) or 64 (examples/ops/example_lightning_attn.py).
  ``s`` is optional in ``lightning_attn_func`` (``s=None``: no decay);
- ``lightning_attn_func`` pads e to a power of two, splits d > 128 into chunks
  of 64, and asserts ``is_support(d) and is_support(e)``.  Its history
  (``supports_dim = [16, 32, 64, 128, 256]`` before) and the README's d = 192
  say: head dims that are multiples of 16.  The contract has no "multiple of"
  constraint, so d and e are declared as ranges (16 .. 256) and every size in
  between is in the contract; see FINDINGS.md for what that means per cell;
- the kernels: every launcher calls ``.contiguous()`` on q, k, v, s (any layout
  is accepted, copied); loads are cast to fp32 and the dots accumulate in fp32;
  ``tl.arange(0, d)`` needs d to be a power of two, so the direct kernels are
  declared with the README's d = 64, and e (tiled by
  ``BLOCK_MODEL = min(next_power_of_2(e), 32)``) 1 .. 256;
- ``SimpleRMSNorm(dim, eps)`` -> ``_SrmsNorm.apply(x, eps)``: x / sqrt(mean(x^2) + eps),
  no weight, "doesn't support feature dim >= 64KB" (RuntimeError), fp16 eps
  clamped to >= 1.6e-5.

Two more subjects call the front door at the head size of the library's own example
(d = e = 64), where bug 2 does not get in the way: with ``s`` it is right on every
input inside the contract (its only failures are an unchecked ``s`` shape outside it),
without it it is bug 1 alone.

The decay ``s`` is a slope in (0, 1] (ALiBi-style, ``_build_slope_tensor``, fp32):
declared with ``value_range=(0, 1)``.

The oracles are the math in float64, written here:
``o_i = sum_{j <= i} exp(-s_h (i - j)) (q_i . k_j) v_j`` (causal linear attention
with decay; s = 0 for the no-decay kernel).
"""

import torch

from lightning_attn.ops import lightning_attn2, lightning_attn2_no_decay, lightning_attn_func
from lightning_attn.ops.triton.srmsnorm import _SrmsNorm

from triton_conformance import Dim, Scalar, Tensor, subject

DTYPES = ("float16", "bfloat16", "float32")
# Known bugs (FINDINGS.md has the reproducers).
BUG1 = ("lightning-attn 0.0.5 bug: lightning_attn_func(q, k, v) without s and d <= 128 calls "
        "lightning_attn2_no_decay(q1, k1, v), names bound only in the d > 128 branch: UnboundLocalError")
BUG2 = ("lightning-attn 0.0.5 bug: is_support(dim) is `16 % dim`, truthy when 16 is NOT a multiple of dim: "
        "the assert refuses d or e = 16 (and 1, 2, 4, 8) and accepts d = 3, 17, 24, ..., which then fail "
        "inside Triton (tl.arange needs a power of two)")
BUG3 = ("lightning-attn 0.0.5 bug: the value dim is tiled by BLOCK_MODEL = min(next_power_of_2(e), 32) with no mask on e, so for e not a power of two below 32 or not a multiple of 32 (e=3, 48) the last tile reads v and writes o past each row: wrong numbers and out-of-bounds writes")
BUG4 = ("lightning-attn 0.0.5 bug: srms_norm_fw offsets rows by `row * stride` with row = tl.program_id(0) and "
        "stride an i32 argument, so past 2^31 elements the offset wraps (int32): the last rows are read and written "
        "2^32 elements before where they are, outside x and y (shape:large-index; the int32 row offsets of the "
        "Triton layer-norm tutorial it was taken from)")
BUG5 = ("lightning-attn 0.0.5 defect (minor, outside the contract): no launcher checks s's shape (h, 1, 1): an "
        "empty s is read anyway (SIGSEGV), an (h, 2, 1) one is taken as (h, 1, 1) without a word")
MAX_ELEMENTS = 1 << 11  # cost cap for drawn examples on the interpreter (not a claim)


def _decay_attention(q, k, v, s=None, absolute=False):
    """float64 causal linear attention with per-head decay s (h, 1, 1); None: no decay."""
    if s is None:
        s = torch.zeros(q.shape[1], dtype=torch.float64, device=q.device)
    n = q.shape[2]
    i = torch.arange(n, dtype=torch.float64, device=q.device)
    dist = i[:, None] - i[None, :]
    decay = torch.where(dist >= 0, torch.exp(-s.to(torch.float64).reshape(1, -1, 1, 1) * dist), 0.0)
    if absolute:
        q, k, v = q.abs(), k.abs(), v.abs()
    scores = q @ k.transpose(-1, -2) * decay
    return scores @ v


def _decay_scale(q, k, v, s=None):
    # Rounding errors follow the same sums on |q|, |k|, |v|, times sqrt(d) for the q.k dot
    # (n, the longer sum, is the declared reduction).
    return _decay_attention(q, k, v, s, absolute=True) * q.shape[-1] ** 0.5


QKV = {"q": Tensor(("b", "h", "n", "d"), dtypes=DTYPES, layouts="any"),
       "k": Tensor(("b", "h", "n", "d"), dtypes=DTYPES, layouts="any"),
       "v": Tensor(("b", "h", "n", "e"), dtypes=DTYPES, layouts="any")}
SLOPE = {"s": Tensor(("h", "one", "one2"), dtypes=("float32",), layouts="any", value_range=(0.0, 1.0))}
BHN = {"b": Dim(1, 64), "h": Dim(1, 128), "n": Dim(1, 1 << 16)}
ONES = {"one": Dim(1, 1), "one2": Dim(1, 1)}


# -- the kernels, called directly (README "How to use": lightning_attn2(q, k, v, s), d = 64) ----

@subject(
    family="lightning_attn2",
    inputs={**QKV, **SLOPE},
    dims={**BHN, "d": Dim(64, 64), "e": Dim(1, 256), **ONES},
    oracle=_decay_attention,
    error_scale=_decay_scale,
    reduces="n",
    max_elements=MAX_ELEMENTS,
    xfail=BUG3,
)
def lightning_attn2_decay(q, k, v, s):
    """lightning_attn.ops.lightning_attn2(q, k, v, s) (= LightningAttention2.apply)."""
    return lightning_attn2(q, k, v, s)


@subject(
    family="lightning_attn2",
    inputs=QKV,
    dims={**BHN, "d": Dim(64, 64), "e": Dim(1, 256)},
    oracle=_decay_attention,
    error_scale=_decay_scale,
    reduces="n",
    max_elements=MAX_ELEMENTS,
    xfail=BUG3,
)
def lightning_attn2_nodecay(q, k, v):
    """lightning_attn.ops.lightning_attn2_no_decay(q, k, v): causal linear attention without decay."""
    return lightning_attn2_no_decay(q, k, v)


# -- the front door (README: lightning_attn_func(q, k, v, s), d = e = 192; s optional) -----------

@subject(
    family="lightning_attn_func",
    inputs={**QKV, **SLOPE},
    dims={**BHN, "d": Dim(16, 256), "e": Dim(16, 256), **ONES},
    oracle=_decay_attention,
    error_scale=_decay_scale,
    reduces="n",
    max_elements=MAX_ELEMENTS,
    xfail=BUG2,
)
def lightning_attn_func_decay(q, k, v, s):
    """lightning_attn.ops.lightning_attn_func(q, k, v, s): pads e, splits d > 128, asserts is_support(d, e)."""
    return lightning_attn_func(q, k, v, s)


@subject(
    family="lightning_attn_func",
    inputs=QKV,
    dims={**BHN, "d": Dim(16, 256), "e": Dim(16, 256)},
    oracle=_decay_attention,
    error_scale=_decay_scale,
    reduces="n",
    max_elements=MAX_ELEMENTS,
    xfail=BUG1 + "; and " + BUG2,
)
def lightning_attn_func_nodecay(q, k, v):
    """lightning_attn.ops.lightning_attn_func(q, k, v) with s=None: the no-decay branch."""
    return lightning_attn_func(q, k, v)


# -- the front door at the head size of the library's own example (examples/ops/example_lightning_attn.py:
# d = e = 64): a multiple of 16 past the inverted assert (bug 2), a power of two (no bug 3).  With s the call
# is right; without s it is bug 1 alone.

@subject(
    family="lightning_attn_func",
    inputs={**QKV, **SLOPE},
    dims={**BHN, "d": Dim(64, 64), "e": Dim(64, 64), **ONES},
    oracle=_decay_attention,
    error_scale=_decay_scale,
    reduces="n",
    max_elements=MAX_ELEMENTS,
    xfail=BUG5,
)
def lightning_attn_func_decay_d64(q, k, v, s):
    """lightning_attn.ops.lightning_attn_func(q, k, v, s) with d = e = 64, as the library's example calls it."""
    return lightning_attn_func(q, k, v, s)


@subject(
    family="lightning_attn_func",
    inputs=QKV,
    dims={**BHN, "d": Dim(64, 64), "e": Dim(64, 64)},
    oracle=_decay_attention,
    error_scale=_decay_scale,
    reduces="n",
    max_elements=MAX_ELEMENTS,
    xfail=BUG1,
)
def lightning_attn_func_nodecay_d64(q, k, v):
    """lightning_attn.ops.lightning_attn_func(q, k, v) with s=None and d = e = 64: bug 1 without bug 2."""
    return lightning_attn_func(q, k, v)


# -- SimpleRMSNorm ------------------------------------------------------------------------------

@subject(
    family="srmsnorm",
    inputs={"x": Tensor(("M", "N"), dtypes=DTYPES, layouts="any")},
    dims={"M": Dim(1, 1 << 24), "N": Dim(1, 16384)},   # 64 KB of fp32 per row
    scalars={"eps": Scalar(1.6e-5, 1e-4)},              # fp16 eps is clamped to >= 1.6e-5
    oracle=lambda x, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps),
    reduces="N",
    max_elements=MAX_ELEMENTS,
    xfail=BUG4,
)
def lightning_srmsnorm(x, eps):
    """lightning_attn.ops.triton.srmsnorm._SrmsNorm.apply(x, eps) (SimpleRMSNorm's forward)."""
    return _SrmsNorm.apply(x, eps)
