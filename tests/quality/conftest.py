"""Quality tests run real Triton kernels through the interpreter."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit is defined

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def backend():
    from triton_conformance import compat
    from triton_conformance.conformance.backend import current_backend

    # Workers install every shim; kernels run in this process need the fp8 casts too (a correct quantizer
    # is wrong under the interpreter's own), and the descriptor checks (a misaligned one is a finding).
    compat.install(["fp8", "descriptors"])
    return current_backend("interpreter")


@pytest.fixture(scope="session")
def kernels():
    """Import kernels_under_test (registers its subjects) and return the subject registry."""
    import importlib

    from triton_conformance.model.subject import registry

    for name in ("vector_add", "softmax", "gemv", "attention", "flash_attention", "layer_norm", "matmul", "dropout",
                 "stochastic_rounding", "fp8_quant", "fp8_matmul", "tma_matmul", "adamw", "group_norm"):
        importlib.import_module(f"kernels_under_test.{name}")
    return registry
