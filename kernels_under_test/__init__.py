"""Kernels under test: the reference subjects of triton-conformance.

Each module holds one kernel family written like a Triton tutorial: the
``@triton.jit`` kernel, its host launcher declared with :func:`triton_conformance.subject`
(the contract it claims), and a demo under ``if __name__ == "__main__":``.
Importing a module only defines things; set ``TRITON_INTERPRET=1`` before
importing triton to run them on the CPU.

- :mod:`.vector_add`: ``add``
- :mod:`.softmax`: ``softmax``, ``softmax_block1024`` (a known bug, ``xfail``)
- :mod:`.gemv`: ``gemv_textbook`` (contiguous only), ``gemv_strided``
- :mod:`.attention`: ``attention_naive``, ``attention_masked``
- :mod:`.flash_attention`: ``flash_attention``, ``flash_attention_causal``
- :mod:`.layer_norm`: ``layer_norm``
- :mod:`.matmul`: ``matmul``
- :mod:`.dropout`: ``relu_dropout`` (stochastic: fused ReLU + dropout)
- :mod:`.stochastic_rounding`: ``stochastic_round_bf16`` (stochastic: rounding to the bfloat16 grid)
- :mod:`.tma_matmul`: ``tma_matmul`` (fp16, through host tensor descriptors)
"""
