"""Calling a subject's launcher as every cell does, and reading what it produced.

- A subject whose stochastic model has ``seed=None`` is seeded through the
  global generator: :func:`launch` calls ``torch.manual_seed(seed)`` right
  before the launcher, with the seed the example or the design chose.
- A subject's outputs (:func:`outputs_of`) are what it returned, then the
  contents of the inputs it declares ``inplace``, in declared order.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from triton_conformance.model.subject import Subject

__all__ = ["TORCH_SEED", "torch_seeded", "launch", "outputs_of", "launcher_scalars"]

# The key a design's launch parameters carry a torch.manual_seed seed under (not an identifier,
# so no declared scalar can be called that); it is never passed to the launcher or the oracle.
TORCH_SEED = "torch.manual_seed"


def torch_seeded(subject: Subject) -> bool:
    """Whether ``subject`` draws its randomness from torch's global generator (``model.seed`` is None)."""
    model = subject.contract.model
    return model is not None and model.seed is None


def launcher_scalars(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without the torch seed: what the launcher and the oracle take."""
    return {k: v for k, v in params.items() if k != TORCH_SEED}


def launch(subject: Subject, inputs: Mapping[str, Any], scalars: Mapping[str, Any], *,
           seed: int | None = None, dims: Mapping[str, int] | None = None) -> Any:
    """``subject.launcher(**inputs, **scalars)``, with the contract's keyword dims of ``dims`` (those in no
    input's shape, named by a relation); for a torch-seeded subject, after ``torch.manual_seed(seed)``
    (``seed`` defaults to ``scalars[TORCH_SEED]``)."""
    if seed is None:
        seed = scalars.get(TORCH_SEED)
    if seed is not None and torch_seeded(subject):
        torch.manual_seed(int(seed))  # seeds every device's generator too
    keyword = subject.contract.keyword_values(dims or {})
    return subject.launcher(**inputs, **launcher_scalars(scalars), **keyword)


def _same_tensor(a: Any, b: torch.Tensor) -> bool:
    return a is b or (isinstance(a, torch.Tensor) and a.device == b.device and a.data_ptr() == b.data_ptr()
                      and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype)


def outputs_of(subject: Subject, raw: Any, inputs: Mapping[str, Any]) -> tuple:
    """The outputs the oracle's are compared with: the returned ones (a tuple or list is
    several), then each ``inplace`` input's contents.  With in-place inputs declared, a
    returned None or a returned in-place input itself (``x.add_()`` returns ``x``) is not
    a separate output."""
    returned = tuple(raw) if isinstance(raw, (tuple, list)) else (raw,)
    written = tuple(inputs[n] for n in subject.contract.inplace)
    if not written:
        return returned
    kept = tuple(r for r in returned if r is not None and not any(_same_tensor(r, w) for w in written))
    return kept + written
