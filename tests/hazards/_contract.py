"""The contract every hazard claims: doubling a short contiguous float32 vector."""

import torch

from triton_conformance import Dim, Tensor

HAZARD_CONTRACT = dict(
    family="hazard",
    inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="contiguous")},
    dims={"N": Dim(1, 64)},
    oracle=lambda x: x * 2,
)


def check_hazard_args(x, name):
    """Reject what the contract does not claim, with a clear message (so only in-contract cells are hazards)."""
    if x.dtype != torch.float32:
        raise TypeError(f"{name}: x.dtype={x.dtype}, expected torch.float32")
    if x.dim() != 1 or not 1 <= x.shape[0] <= 64:
        raise ValueError(f"{name}: x.shape={tuple(x.shape)}, expected (N,) with 1 <= N <= 64")
    if not x.is_contiguous() or x.storage_offset() != 0:
        raise ValueError(f"{name}: x.stride()={x.stride()}, offset {x.storage_offset()}, expected contiguous")
