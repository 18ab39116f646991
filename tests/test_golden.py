"""Golden tests: tiny attention problems whose answers are derived by hand.

The expected numbers are computed here from closed forms (``e / (2e + 2)``
and friends), never from a kernel or from torch's attention, so a shared
mistake between a kernel and an oracle cannot hide.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernels_under_test.attention import attention_masked, attention_naive  # noqa: E402
from kernels_under_test.flash_attention import flash_attention, flash_attention_causal  # noqa: E402

TOL = {torch.float32: 1e-6, torch.float16: 2e-3}


def _run(kernel, q, k, v, sm_scale):
    if kernel is attention_masked:
        mask = torch.ones((q.shape[0], q.shape[1], k.shape[1]), dtype=torch.bool)
        return kernel(q=q, k=k, v=v, mask=mask, sm_scale=sm_scale)
    return kernel(q=q, k=k, v=v, sm_scale=sm_scale)


KERNELS = pytest.mark.parametrize(
    "kernel", [attention_naive, flash_attention, attention_masked], ids=lambda s: s.name
)
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)


# %%
# The four-token trace
# --------------------
# q = [1, 0] against keys [1, 0], [0, 1], [1, 1], [0, 0]: the scores are
# s * [1, 0, 1, 0] for a scale s, so with a = exp(s) the weights are
# [a, 1, a, 1] / (2a + 2).  With V = K the output is
# w0 * [1, 0] + w1 * [0, 1] + w2 * [1, 1] = [2a, a + 1] / (2a + 2).

FOUR_KEYS = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]


def four_token_expected(sm_scale):
    a = math.exp(sm_scale)
    weights = [a / (2 * a + 2), 1 / (2 * a + 2), a / (2 * a + 2), 1 / (2 * a + 2)]
    output = [2 * a / (2 * a + 2), (a + 1) / (2 * a + 2)]
    return weights, output


def four_token_problem(dtype, v_is_identity):
    """q = [1, 0] against FOUR_KEYS; V = K, or the identity (q and k padded with zeros to D = 4)."""
    if not v_is_identity:
        q = torch.tensor([[[1.0, 0.0]]], dtype=dtype)
        return q, torch.tensor([FOUR_KEYS], dtype=dtype), torch.tensor([FOUR_KEYS], dtype=dtype)
    q = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]], dtype=dtype)
    k = torch.tensor([[row + [0.0, 0.0] for row in FOUR_KEYS]], dtype=dtype)
    return q, k, torch.eye(4, dtype=dtype)[None]


@KERNELS
@DTYPES
def test_four_token_hand_derivation(kernel, dtype):
    # The trace as usually quoted (to 3 digits) uses the 1/sqrt(d) scale of d = 2; checked on the
    # kernels themselves, and on four_token_expected, which the tests below take their answers from.
    quoted_weights, quoted_output = [0.335, 0.165, 0.335, 0.165], [0.670, 0.500]
    weights, output = four_token_expected(1 / math.sqrt(2))
    assert weights == pytest.approx(quoted_weights, abs=5e-4) and output == pytest.approx(quoted_output, abs=5e-4)
    out = _run(kernel, *four_token_problem(dtype, v_is_identity=False), 1 / math.sqrt(2))
    assert out[0, 0].double().tolist() == pytest.approx(quoted_output, abs=5e-4 + TOL[dtype])
    out = _run(kernel, *four_token_problem(dtype, v_is_identity=True), 1 / math.sqrt(2))
    assert out[0, 0].double().tolist() == pytest.approx(quoted_weights, abs=5e-4 + TOL[dtype])
    # With sm_scale = 1 the weights are e / (2e + 2) and 1 / (2e + 2), the output [e / (e + 1), 1 / 2].
    e = math.e
    out = _run(kernel, *four_token_problem(dtype, v_is_identity=True), 1.0)
    assert out[0, 0].double().tolist() == pytest.approx([e / (2 * e + 2), 1 / (2 * e + 2)] * 2, abs=TOL[dtype])
    out = _run(kernel, *four_token_problem(dtype, v_is_identity=False), 1.0)
    assert out[0, 0].double().tolist() == pytest.approx([e / (e + 1), 0.5], abs=TOL[dtype])


@KERNELS
@DTYPES
@pytest.mark.parametrize("sm_scale", [1.0, 1 / math.sqrt(2)], ids=["scale=1", "scale=1/sqrt2"])
def test_four_token_output(kernel, dtype, sm_scale):
    q = torch.tensor([[[1.0, 0.0]]], dtype=dtype)
    k = v = torch.tensor([FOUR_KEYS], dtype=dtype)
    _, expected = four_token_expected(sm_scale)
    out = _run(kernel, q, k, v, sm_scale)
    assert out.shape == (1, 1, 2) and out.dtype == dtype
    assert out[0, 0].double().tolist() == pytest.approx(expected, abs=TOL[dtype])


@KERNELS
@DTYPES
@pytest.mark.parametrize("sm_scale", [1.0, 1 / math.sqrt(2)], ids=["scale=1", "scale=1/sqrt2"])
def test_four_token_weights(kernel, dtype, sm_scale):
    # With V = identity the output row *is* the attention weights.  q and k are
    # padded with zeros to the head dim of 4, which leaves every score alone.
    q = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]], dtype=dtype)
    k = torch.tensor([[row + [0.0, 0.0] for row in FOUR_KEYS]], dtype=dtype)
    v = torch.eye(4, dtype=dtype)[None]
    weights, _ = four_token_expected(sm_scale)
    out = _run(kernel, q, k, v, sm_scale)
    assert out[0, 0].double().tolist() == pytest.approx(weights, abs=TOL[dtype])


# %%
# The two-block online softmax
# ----------------------------
# Scores [0, 0, ln 2, ln 2] seen in two blocks of two.  After block 1:
# m = 0, l = 2, acc = v0 + v1 = [1, 1].  Block 2 raises the max to ln 2, so
# l and acc are first rescaled by alpha = exp(0 - ln 2) = 1/2, then each new
# key adds exp(0) = 1: l = 1 + 2 = 3, acc = [0.5, 0.5] + v2 + v3 = [1.5, 1.5].
# out = acc / l = [0.5, 0.5], the same as softmax([1, 1, 2, 2] / 6) @ V.


def two_block_problem(dtype, v_is_identity=False):
    ln2 = math.log(2.0)
    # q . k_j = k_j[0], the scores; the other lanes only match v's head dim.
    d = 4 if v_is_identity else 2
    pad = [0.0] * (d - 1)
    q = torch.tensor([[[1.0] + pad]], dtype=dtype)
    k = torch.tensor([[[s] + pad for s in (0.0, 0.0, ln2, ln2)]], dtype=dtype)
    v = torch.eye(4, dtype=dtype)[None] if v_is_identity else torch.tensor([FOUR_KEYS], dtype=dtype)
    return q, k, v


# With V = FOUR_KEYS a kernel that forgets the rescale also gets [0.5, 0.5] (l = 4, acc = [2, 2]), so the
# non-causal checks use V = identity, where the output is the weights: [1, 1, 2, 2] / 6 with the rescale,
# [1, 1, 1, 1] / 4 without it.


@DTYPES
def test_two_block_hand_derivation(dtype):
    # The derivation's states, seen through the causal kernel with V = identity and block_n = 2:
    # query 1 stops after block 1 (acc1 / l1), query 3 after block 2 (acc2 / l2).
    m1, l1, acc1 = 0.0, 2.0, [1.0, 1.0, 0.0, 0.0]
    m2 = math.log(2.0)
    alpha = math.exp(m1 - m2)
    l2 = l1 * alpha + 2 * math.exp(0.0)
    acc2 = [a * alpha + (c in (2, 3)) for c, a in enumerate(acc1)]
    assert alpha == pytest.approx(0.5) and l2 == pytest.approx(3.0)
    q, k, v = two_block_problem(dtype, v_is_identity=True)
    out = flash_attention_causal(q=q.expand(1, 4, 4), k=k, v=v, sm_scale=1.0, block_n=2)
    rows = out[0].double().tolist()
    assert rows[1] == pytest.approx([a / l1 for a in acc1], abs=TOL[dtype])
    assert rows[3] == pytest.approx([a / l2 for a in acc2], abs=TOL[dtype])
    assert rows[3] == pytest.approx([1 / 6, 1 / 6, 2 / 6, 2 / 6], abs=TOL[dtype])


@DTYPES
@pytest.mark.parametrize("block_n", [2, 4, 32], ids=lambda b: f"block_n={b}")
def test_two_block_online_softmax(dtype, block_n):
    q, k, v = two_block_problem(dtype)
    out = flash_attention(q=q, k=k, v=v, sm_scale=1.0, block_n=block_n)
    assert out[0, 0].double().tolist() == pytest.approx([0.5, 0.5], abs=TOL[dtype])
    q, k, v = two_block_problem(dtype, v_is_identity=True)
    out = flash_attention(q=q, k=k, v=v, sm_scale=1.0, block_n=block_n)
    assert out[0, 0].double().tolist() == pytest.approx([1 / 6, 1 / 6, 2 / 6, 2 / 6], abs=TOL[dtype])


@DTYPES
def test_two_block_causal_rows(dtype):
    # Causal, four queries equal to q: query i sees keys 0..i.
    #   i = 0: v0 = [1, 0];  i = 1: (v0 + v1) / 2 = [0.5, 0.5];
    #   i = 2: (v0 + v1 + 2 v2) / 4 = [0.75, 0.75];  i = 3: the full [0.5, 0.5].
    q, k, v = two_block_problem(dtype)
    q = q.expand(1, 4, 2)
    out = flash_attention_causal(q=q, k=k, v=v, sm_scale=1.0, block_n=2)
    expected = [[1.0, 0.0], [0.5, 0.5], [0.75, 0.75], [0.5, 0.5]]
    assert out[0].double().tolist() == [pytest.approx(row, abs=TOL[dtype]) for row in expected]
