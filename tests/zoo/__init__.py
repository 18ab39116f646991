"""A bug zoo: realistic buggy variants of the kernels under test.

Each ``zoo_<family>.py`` module declares buggy subjects that claim exactly the
contract of the correct kernel they mutate (the bug is that they break that
claim), each marked ``xfail`` with the bug in words, and a list ``BUGS`` of
``(subject name, contract cell, expected outcome, expected finding)`` saying
which cell should catch the bug and how, e.g.::

    ("zoo_add_missing_store_mask", "memory", "unsafe", "oob-write")

The cells are the suite's best guess; a bug may also surface in other cells.
Nothing in ``kernels_under_test`` imports this package.  Importing a zoo
module registers its subjects, so :func:`all_bugs` imports them on demand.
"""

import importlib

MODULES = (
    "zoo_vector_add",
    "zoo_softmax",
    "zoo_gemv",
    "zoo_attention",
    "zoo_flash_attention",
    "zoo_layer_norm",
    "zoo_matmul",
    "zoo_dropout",
    "zoo_large_index",
    "zoo_stochastic_rounding",
    "zoo_features",
    "zoo_launchers",
    "zoo_gradients",
    "zoo_gradient_reach",
    "zoo_add_rms_norm",
    "zoo_autotune",
    "zoo_autotune_reach",
    "zoo_semantics",
    "zoo_tolerance",
    "zoo_fp8",
    "zoo_tma",
    "zoo_cuda_dispatch",
    "zoo_adamw",
    "zoo_precision",
    "zoo_group_norm",
)


def correct_twin(buggy, registry):
    """The kernel under test whose contract ``buggy`` claims: same family, inputs, dims and
    scalars, and (where that leaves more than one, e.g. causal or not) the same oracle, and then
    the one in ``kernels_under_test`` (a zoo module may declare a correct kernel of the same claims)."""
    claims = lambda s: (s.family, dict(s.contract.inputs), dict(s.contract.dims), dict(s.contract.scalars))  # noqa: E731
    twins = [s for s in registry if s.xfail is None and claims(s) == claims(buggy)]
    if len(twins) > 1:
        twins = [s for s in twins if s.contract.oracle is buggy.contract.oracle]
    if len(twins) > 1:
        twins = [s for s in twins if s.module.startswith("kernels_under_test.")]
    if len(twins) != 1:
        raise LookupError(f"{buggy.name}: expected one correct twin, found {[s.name for s in twins]}")
    return twins[0]


def all_correct():
    """Import every zoo module and return the concatenation of their ``CORRECT``: ``(subject name,
    contract cell)`` for the correct kernels a zoo module declares beside its bugs."""
    correct = []
    for name in MODULES:
        correct += getattr(importlib.import_module(f"{__name__}.{name}"), "CORRECT", [])
    return correct


def all_bugs():
    """Import every zoo module and return the concatenation of their ``BUGS``."""
    bugs = []
    for name in MODULES:
        bugs += importlib.import_module(f"{__name__}.{name}").BUGS
    return bugs
