"""triton-conformance: a conformance test suite for Triton kernels.

The public API, and only it:

- declaring a subject: :func:`subject` / :func:`register`, the contract's parts
  (``Tensor``, ``Mask``, ``Dim``, ``Scalar``, ``Tolerance``, ``Backward``,
  ``Performance``), the stochastic models (``Dropout``, ``StochasticRounding``, and
  ``StochasticModel`` to write one), and :func:`get_subject`;
- what a declaration gives: the ``Subject`` and its ``Contract`` (which a cell kind is handed);
- the errors a declaration or a configuration raises;
- :func:`counterexample_inputs`: a stored finding's exact tensors, scalars and grad_output (served lazily from
  :mod:`.counterexamples`: it imports torch).

Importing this package (and its pytest plugin) imports neither torch nor triton;
they are loaded when the battery runs.  The package is a leaf every layer
imports, so it names nothing of the engine: a new cell kind comes from
:mod:`triton_conformance.conformance.kinds` (``CellKind``, ``register_kind``).

PYTEST_DONT_REWRITE: the package holds no tests, and the ``triton-conformance`` command imports it
before it starts pytest in the same process, so pytest must not try to rewrite it (it would warn
"Module already imported so cannot be rewritten" on every run).
"""

from triton_conformance import model
from triton_conformance.errors import ConformanceUsageError, InvalidArgument, InvalidContract, StillFails
from triton_conformance.model import *  # noqa: F403 - the declaration API, listed once in model.__all__

from triton_conformance.version import __version__  # noqa: F401 - the one place it is written

__all__ = sorted([*model.__all__, "ConformanceUsageError", "InvalidArgument", "InvalidContract", "StillFails",
                  "__version__", "counterexample_inputs"])


def __getattr__(name: str):
    # counterexample_inputs builds tensors; import torch (and the engine) only when it is asked for.
    if name == "counterexample_inputs":
        from triton_conformance.counterexamples import counterexample_inputs

        return counterexample_inputs
    raise AttributeError(f"module 'triton_conformance' has no attribute {name!r}")
