"""The plain-data model at the bottom of triton-conformance: no torch, no Hypothesis.

- :mod:`.contract`: what a subject claims (``Dim``, ``Tensor``, ``Mask``, ``Scalar``, ``Tolerance``, ``Contract``),
  with :mod:`.claims` (``Backward``, per-device claims) and :mod:`.relations` (``Product``, ``Divisible``);
- :mod:`.stochastic`: models of random outputs (``Dropout``, ``StochasticRounding``);
- :mod:`.performance`: performance contracts;
- :mod:`.subject`: subjects and their registry;
- :mod:`.spec`: one drawn example (``Spec``, ``Layout``);
- :mod:`.vocabulary`: the vocabulary tables, one row per layout, dtype, shape, value and mask class;
- :mod:`.outcomes`: the outcome table, findings and cell results;
- :mod:`.cells`: the catalogue of cells: their order and what each one means;
- :mod:`.config`: the frozen run configuration.

Every layer above imports this one; it imports none of them.
"""

from triton_conformance.model.contract import Backward, Contract, Dim, Mask, Scalar, Tensor, Tolerance
from triton_conformance.model.relations import Divisible, Product
from triton_conformance.model.performance import Performance
from triton_conformance.model.stochastic import Dropout, StochasticModel, StochasticRounding
from triton_conformance.model.subject import Subject, get_subject, register, subject

# The declaration API, which the package root re-exports: the registry, the events of a
# stochastic model and the rest stay in their modules.

__all__ = [
    "Backward",
    "Contract",
    "Dim",
    "Divisible",
    "Dropout",
    "Mask",
    "Performance",
    "Product",
    "Scalar",
    "StochasticModel",
    "StochasticRounding",
    "Subject",
    "Tensor",
    "Tolerance",
    "get_subject",
    "register",
    "subject",
]
