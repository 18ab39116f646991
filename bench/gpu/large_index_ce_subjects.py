"""Cross entropies with integer targets tied to V by ``index_of``, for ``bench/gpu/large_index_cross_entropy.py``.

- ``ce_rows``: correct, 64-bit row offsets;
- ``ce_rows_int32``: ``row * stride`` in int32: past 2^31 logits the last rows read 8 GiB before them;
- ``ce_grad_inplace_int32``: as fused losses do, it also writes the gradient of the loss into the logits
  in place, with the same int32 offsets: past 2^31 elements its stores land in the gap before the logits.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, subject


@triton.jit
def cross_entropy_kernel(
    loss_ptr,  # *Pointer* to the loss per row (M,), float32
    logits_ptr,  # *Pointer* to the logits (M, V); with GRAD, overwritten by d loss / d logits
    target_ptr,  # *Pointer* to the class index of each row (M,), int64
    stride_row,  # Elements between two rows of logits
    V,  # Classes
    WIDE: tl.constexpr,  # 64-bit row offsets (the fix)
    GRAD: tl.constexpr,  # write the gradient into the logits
    BLOCK: tl.constexpr,  # Classes per program, a power of two >= V
):
    row = tl.program_id(0)
    if WIDE:
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < V
    x = tl.load(logits_ptr + row * stride_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
    target = tl.load(target_ptr + row)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    picked = tl.sum(tl.where(cols == target, x, 0.0), axis=0)
    tl.store(loss_ptr + row, m + tl.log(s) - picked)
    if GRAD:
        grad = e / s - tl.where(cols == target, 1.0, 0.0)
        tl.store(logits_ptr + row * stride_row + cols, grad.to(logits_ptr.dtype.element_ty), mask=mask)


CONTRACT = dict(
    family="cross_entropy_large",
    inputs={"logits": Tensor(("M", "V"), dtypes=("float16",)),
            "target": Tensor(("M",), dtypes=("int64",), index_of="V")},
    dims={"M": Dim(1, 1 << 28), "V": Dim(2, 4096)},
    oracle=lambda logits, target: torch.nn.functional.cross_entropy(logits, target, reduction="none"),
    reduces="V",
)


def _launch(logits, target, wide, grad):
    M, V = logits.shape
    loss = torch.empty(M, dtype=torch.float32, device=logits.device)
    logits = logits.clone() if grad and logits.numel() < (1 << 31) else logits  # keep small inputs unmodified
    cross_entropy_kernel[(M,)](loss, logits, target, logits.stride(0), V, WIDE=wide, GRAD=grad,
                               BLOCK=triton.next_power_of_2(V))
    return loss


@subject(**CONTRACT, name="ce_rows")
def ce_rows(logits, target):
    return _launch(logits, target, True, False)


@subject(**CONTRACT, name="ce_rows_int32", xfail="row * stride_row wraps past 2^31 logits")
def ce_rows_int32(logits, target):
    return _launch(logits, target, False, False)


@subject(**CONTRACT, name="ce_grad_inplace_int32", xfail="its in-place gradient stores wrap past 2^31 logits")
def ce_grad_inplace_int32(logits, target):
    return _launch(logits, target, False, True)
