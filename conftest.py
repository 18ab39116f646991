"""Registers this repo's own subjects, the kernels in kernels_under_test/.

They are named here and imported by the plugin only when ``--conformance`` is
given, after it has switched the Triton interpreter on.
"""

KERNEL_MODULES = [
    "kernels_under_test.vector_add",
    "kernels_under_test.softmax",
    "kernels_under_test.gemv",
    "kernels_under_test.attention",
    "kernels_under_test.flash_attention",
    "kernels_under_test.layer_norm",
    "kernels_under_test.matmul",
    "kernels_under_test.dropout",
    "kernels_under_test.stochastic_rounding",
    "kernels_under_test.rms_norm",
    "kernels_under_test.softmax_autotuned",
    "kernels_under_test.adamw",
    "kernels_under_test.add_rms_norm",
    "kernels_under_test.group_norm",
    "kernels_under_test.fp8_quant",
    "kernels_under_test.fp8_matmul",
    "kernels_under_test.tma_matmul",
]


# The acceptance tests drive pytest itself; pytest only takes this at the top level.
pytest_plugins = ["pytester"]


def pytest_conformance_modules(config):
    return KERNEL_MODULES
