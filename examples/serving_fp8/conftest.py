"""The serving-stack fp8 example: vLLM's and SGLang's kernels, cut into sources/ by get_serving_kernels.py
(upstream's code, not committed), declared in serving_subjects.py.  Without sources/ nothing is declared
(run_examples.py names what is missing)."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ("vllm_fp8_utils", "sglang_fp8_quant", "sglang_fp8_gemm")
PARTIAL = False  # one subjects module imports all three: nothing runs without every one


def missing():
    """The modules sources/ lacks (run_examples.py names them)."""
    return [s for s in SOURCES if not os.path.exists(os.path.join(HERE, "sources", f"{s}.py"))]


def pytest_conformance_modules(config):
    return [] if missing() else ["serving_subjects"]
