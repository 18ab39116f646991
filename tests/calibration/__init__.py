"""torch's own operations, declared as subjects: the calibration of the tolerance.

A tolerance is right only when torch's own ops, in the kernel's precision,
pass every cell at every seed.  Each module here declares torch functions as
subjects (the launcher is the op itself on the example's fp16, bf16 or fp32
inputs; the oracle is the same op, evaluated by the suite in float64), with
the contract a user would write for a Triton kernel doing the same thing.
``bench/calibration.py`` runs them at fresh seeds of the ``nightly`` profile
and counts failing cells (the target is none); ``tests/quality/test_calibration.py``
runs a few seeds in CI.

One family a module; :func:`subjects` imports them all.
"""

import importlib

MODULES = ("reductions", "normalization", "linear", "activations", "losses", "fp8")


def subjects():
    """Import every calibration module and return its subjects, in declaration order."""
    found = []
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        found += list(module.SUBJECTS)
    return found
