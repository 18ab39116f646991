"""Tutorial 06, fused attention (Flash Attention v2): ``attention(q, k, v, causal, sm_scale)`` (an autograd
Function; ``attention = _attention.apply``), forward and backward, as the tutorial writes and tests it.

Claims, from the tutorial: q, k, v of shape (Z, H, N_CTX, HEAD_DIM), one
HEAD_DIM for all three (asserted) and ``HEAD_DIM_K in {16, 32, 64, 128, 256}``
(asserted); fp16 (its ``test_op``, ``dtype=torch.float16``; the benchmark's fp8
forward needs fp8 inputs the interpreter cannot make); causal or not (its test
runs causal, its benchmark both); ``sm_scale`` 0.5 (test) and 1.3 (benchmark).
The backward returns dq, dk, dv and asserts ``N_CTX % 128 == 0``,
``do.is_contiguous()`` and equal strides for q, k, v, o and do; the forward
offsets k, v and o by q's batch and head strides: row-major inputs (its test
makes them with ``torch.empty``).  A ``Dim`` is a range, so the discrete claims
are declared at one value each: HEAD_DIM = 64 (the test's and benchmark's),
N_CTX = 128 (the smallest multiple of 128; the test runs 1024).  Z and H: the
test runs (1, 2), the benchmark (4, 32); Z * H is a grid axis (at most 65535
on CUDA), declared up to 64 each.

This version (triton-lang/triton dc6ee3ed, the only one the search store holds)
cannot run on triton 3.9, GPU or interpreter: its module imports
``triton.tools.experimental_descriptor`` (gone in 3.9), its TMA forward calls
``driver.active.utils.fill_1d_tma_descriptor`` and
``tl._experimental_descriptor_load`` (gone), and its other forward
``tl.make_block_ptr`` (removed in 3.9: NotImplementedError).  The module is
imported at the call, so that each cell records that and the other tutorials
still run (FINDINGS.md, tutorial 06).
"""

import torch

from triton_conformance import Dim, Scalar, Tensor, Tolerance, subject
from triton_conformance.model.contract import Backward

INCOMPATIBLE = ("tutorial 06 at dc6ee3ed imports triton.tools.experimental_descriptor and uses tl.make_block_ptr / "
                "tl._experimental_descriptor_load, all removed in triton 3.9: FINDINGS.md, tutorial 06")


def attention_weights(q, k, causal, sm_scale):
    """softmax(q k^T * sm_scale), keys after the query masked off when causal: the tutorial's reference."""
    s = q @ k.transpose(-1, -2) * sm_scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(~torch.ones((n, n), dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return torch.softmax(s, dim=-1)


# The tutorial's claims (a dict: the same contract can be checked on a torch twin in the kernel's precision).
CONTRACT = dict(
    family="attention",
    inputs={"q": Tensor(("Z", "H", "N_CTX", "HEAD_DIM"), dtypes=("float16",)),
            "k": Tensor(("Z", "H", "N_CTX", "HEAD_DIM"), same_dtype_as="q"),
            "v": Tensor(("Z", "H", "N_CTX", "HEAD_DIM"), same_dtype_as="q")},
    dims={"Z": Dim(1, 64), "H": Dim(1, 64), "N_CTX": Dim(128, 128), "HEAD_DIM": Dim(64, 64)},
    scalars={"causal": Scalar(kind="bool"), "sm_scale": Scalar(0.5, 1.3)},
    oracle=lambda q, k, v, causal, sm_scale: attention_weights(q, k, causal, sm_scale) @ v,
    reduces="N_CTX",
    # P is rounded to fp16 before the P @ V dot (FlashAttention's rule); its error scales with P @ |V|.
    tolerance=Tolerance(reference_k=4.0),
    error_scale=lambda q, k, v, causal, sm_scale: attention_weights(q, k, causal, sm_scale) @ v.abs(),
    # The backward rounds P (dv = P^T dO) and dS (dq = dS k, dk = dS^T q) to fp16 before its dots: terms formed in fp16.
    backward=Backward(grads=("q", "k", "v"), accumulate={"q": "input", "k": "input", "v": "input"}),
    max_elements=1 << 15,  # a cost cap for the interpreter (not a claim)
)


@subject(**CONTRACT, xfail=INCOMPATIBLE)
def tutorial_attention(q, k, v, causal, sm_scale):
    """``attention(q, k, v, causal, sm_scale)`` as the tutorial's ``test_op`` calls it."""
    # Imported here: on triton 3.9 the module raises (see above), and each cell records it.
    from sources.tutorial_06_fused_attention import attention

    return attention(q, k, v, causal, sm_scale)
