"""The Triton tutorials example: the tutorials' own kernels and launchers, verbatim, in sources/ (put there by
get_tutorials.py, not committed), and their subjects, one module a tutorial, declared as each tutorial claims.

A tutorial whose source is not in sources/ is left out (run_examples.py names it)."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
SUBJECTS = {  # subjects module -> the tutorial's module in sources/
    "subjects_01_vector_add": "tutorial_01_vector_add",
    "subjects_02_fused_softmax": "tutorial_02_fused_softmax",
    "subjects_03_matrix_multiplication": "tutorial_03_matrix_multiplication",
    "subjects_05_layer_norm": "tutorial_05_layer_norm",
    "subjects_06_fused_attention": "tutorial_06_fused_attention",
    "subjects_08_grouped_gemm": "tutorial_08_grouped_gemm",
    "subjects_09_persistent_matmul": "tutorial_09_persistent_matmul",
}


def present():
    return [m for m, source in SUBJECTS.items() if os.path.exists(os.path.join(HERE, "sources", f"{source}.py"))]


def pytest_conformance_modules(config):
    return present()


SOURCES = tuple(SUBJECTS.values())
PARTIAL = True  # a folder that runs what it has (each tutorial is a subjects module of its own)


def missing():
    """The tutorials' modules sources/ lacks (run_examples.py names them)."""
    return [source for m, source in SUBJECTS.items() if m not in present()]
