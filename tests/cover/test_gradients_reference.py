"""The FlashAttention rule (``Tolerance(reference_k=...)``) judges gradients as it judges outputs: within k times
the error of the oracle's autograd run in the inputs' own dtype.

An attention twin in torch, in the precision FlashAttention's backward keeps (Triton's tutorial 06): fp32 dots of
fp16 operands, P and dS rounded to fp16 before their dots.  Judged against float64 with fp32 accumulation alone it
is wrong by ~1e-3 (the fp16 roundings); the rule's fp16 reference admits that, and still catches a backward that
masks keys the forward attended to (tutorial 06 at release/3.6.x: non-causal gradients computed causally).
"""

import itertools

import torch

import triton_conformance as tc
from triton_conformance import Dim, Tensor, Tolerance
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config
from triton_conformance.model.contract import Backward

_ids = itertools.count()
SCALE = 0.5


def oracle(q, k, v):
    return torch.softmax(q @ k.T * SCALE, dim=-1) @ v


class Attention(torch.autograd.Function):
    """softmax(q k^T * SCALE) v for fp16 (N, D) q, k, v, forward and backward in FlashAttention's precision."""

    masked_backward = False

    @classmethod
    def forward(cls, ctx, q, k, v):
        p = torch.softmax(q.float() @ k.float().T * SCALE, dim=-1)
        ctx.save_for_backward(q, k, v, p)
        return (p.half().float() @ v.float()).half()

    @classmethod
    def backward(cls, ctx, do):
        q, k, v, p = ctx.saved_tensors
        if cls.masked_backward:  # keys past the query dropped, as a causal backward does
            p = p * torch.ones_like(p).tril()
        do = do.float()
        dv = p.half().float().T @ do
        dp = do @ v.float().T
        ds = (p * (dp - (dp * p).sum(-1, keepdim=True))).half().float()
        return (ds @ k.float() * SCALE).half(), (ds.T @ q.float() * SCALE).half(), dv.half()


def declare(masked_backward=False):
    fn = type("Attention_masked" if masked_backward else "Attention", (Attention,),
              {"masked_backward": masked_backward})
    return tc.register(fn, name=f"cover_gradients_reference_{next(_ids)}",
                       inputs={"q": Tensor(("N", "D"), dtypes=("float16",)), "k": Tensor(("N", "D"), same_dtype_as="q"),
                               "v": Tensor(("N", "D"), same_dtype_as="q")},
                       dims={"N": Dim(16, 64), "D": Dim(16, 32)}, oracle=oracle, reduces="N",
                       tolerance=Tolerance(reference_k=4.0), backward=Backward(grads=("q", "k", "v")))


def cell(subject, name="grad:layout:contiguous"):
    return run_cell(subject, name, backend=Backend(), config=run_config(profile="ci"))


def test_fp16_roundings_in_the_backward_are_within_the_rules_fp16_reference():
    result = cell(declare())
    assert result.outcome == "honoured", result.message


def test_a_backward_that_masks_attended_keys_is_wrong():
    result = cell(declare(masked_backward=True))
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message
    assert "oracle_in_input_dtype" in result.message
