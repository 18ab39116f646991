"""Tutorial 06, fused attention (Flash Attention v2): ``attention(q, k, v, causal, sm_scale)`` (an autograd
Function; ``attention = _attention.apply``), forward and backward, as the tutorial writes and tests it.

Claims, from the tutorial: q, k, v of shape (Z, H, N_CTX, HEAD_DIM), one
HEAD_DIM for all three (asserted) and ``HEAD_DIM_K in {16, 32, 64, 128, 256}``
(asserted); fp16 (its ``test_op``, ``dtype=torch.float16``; its fp8 forward:
below); causal or not (its test
runs causal, its benchmark both); ``sm_scale`` 0.5 (test) and 1.3 (benchmark).
The backward returns dq, dk, dv and asserts ``N_CTX % 128 == 0``,
``do.is_contiguous()`` and equal strides for q, k, v, o and do; the forward
offsets k, v and o by q's batch and head strides: row-major inputs (its test
makes them with ``torch.empty``).  A ``Dim`` is a range, so the discrete claims
are declared at one value each: HEAD_DIM = 64 (the test's and benchmark's),
N_CTX = 128 (the smallest multiple of 128; the test runs 1024).  Z and H: the
test runs (1, 2), the benchmark (4, 32); Z * H is a grid axis (at most 65535
on CUDA), declared up to 64 each.

The source is triton-lang/triton c147f098, the tensor-descriptor form: the
forward reads q, k, v and writes o through descriptors over the (Z * H * N_CTX,
HEAD_DIM) rows (declared ``descriptor=True``), host ``TensorDescriptor``s where
``supports_host_descriptor()`` (capability >= 9: the H200 and the
interpreter's compat target) unless Hopper with ``warp_specialize``, and
``tl.make_tensor_descriptor`` in the kernel otherwise.  ``attention``'s
``warp_specialize`` defaults to True; ``test_op`` passes False except on
Blackwell, and the benchmark True on Hopper for the non-causal forward: the
first subject is the test's call (host descriptors), the second the default
(on Hopper, device descriptors).  The fp8 forward (e5m2, v transposed in
memory) is not declared: its v layout is one this suite cannot draw.
"""

import torch
from sources.tutorial_06_fused_attention import attention

from triton_conformance import Dim, Scalar, Tensor, Tolerance, subject
from triton_conformance.model.contract import Backward


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
    inputs={"q": Tensor(("Z", "H", "N_CTX", "HEAD_DIM"), dtypes=("float16",), descriptor=True),
            "k": Tensor(("Z", "H", "N_CTX", "HEAD_DIM"), same_dtype_as="q", descriptor=True),
            "v": Tensor(("Z", "H", "N_CTX", "HEAD_DIM"), same_dtype_as="q", descriptor=True)},
    dims={"Z": Dim(1, 64), "H": Dim(1, 64), "N_CTX": Dim(128, 128), "HEAD_DIM": Dim(64, 64)},
    scalars={"causal": Scalar(kind="bool"), "sm_scale": Scalar(0.5, 1.3)},
    oracle=lambda q, k, v, causal, sm_scale: attention_weights(q, k, causal, sm_scale) @ v,
    reduces="N_CTX",
    # P is rounded to fp16 before the P @ V dot (FlashAttention's rule); its error scales with P @ |V|.
    tolerance=Tolerance(reference_k=4.0),
    error_scale=lambda q, k, v, causal, sm_scale: attention_weights(q, k, causal, sm_scale) @ v.abs(),
    # The backward rounds P (dv = P^T dO) and dS (dq = dS k, dk = dS^T q) to fp16 before fp32 dots: the same
    # FlashAttention rule judges the gradients (within 4x the error of autograd in fp16).
    backward=Backward(grads=("q", "k", "v")),
    max_elements=1 << 15,  # a cost cap for the interpreter (not a claim)
)


@subject(**CONTRACT)
def tutorial_attention(q, k, v, causal, sm_scale):
    """``attention(q, k, v, causal, sm_scale, False)`` as the tutorial's ``test_op`` calls it (off Blackwell)."""
    return attention(q, k, v, causal, sm_scale, False)


@subject(**CONTRACT)
def tutorial_attention_ws(q, k, v, causal, sm_scale):
    """``attention(q, k, v, causal, sm_scale)``: ``warp_specialize=True``, the default (on Hopper: device-side
    descriptors)."""
    return attention(q, k, v, causal, sm_scale)
