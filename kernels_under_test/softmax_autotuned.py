"""
Autotuned row softmax
=====================

``out[i, :] = softmax(x[i, :])``, the row read in blocks of ``BLOCK_N`` lanes
with an online max and sum (so any block size is right for any row length),
and ``@triton.autotune`` choosing the block size and warp count per row length.

What the tuning needs to be correct:

* the key is ``n_cols``: the row length is the one shape property the choice
  depends on, so a different length tunes again;
* ``early_config_prune`` drops blocks wider than the row (all but the
  narrowest), so short rows do not tune configs that mask off most lanes;
* the kernel writes only ``out``, and ``x`` is read-only, so the benchmark's
  runs of every config leave nothing to reset (no ``reset_to_zero``).

Under the conformance suite every surviving config is its own
``autotune:configN`` cell, and the ``autotune:benchmark`` / ``order`` / ``key``
cells check the tuning's side effects.
"""

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Tensor, subject

# %%
# Configs and pruning
# -------------------

CONFIGS = [
    triton.Config({"BLOCK_N": 16}, num_warps=1),
    triton.Config({"BLOCK_N": 32}, num_warps=2),
    triton.Config({"BLOCK_N": 64}, num_warps=4),
    triton.Config({"BLOCK_N": 128}, num_warps=8),
]


def prune_wide_blocks(configs, named_args, **kwargs):
    """Keep blocks no wider than the row (rounded up to a power of two); always the narrowest."""
    width = triton.next_power_of_2(named_args["n_cols"])
    kept = [c for c in configs if c.kwargs["BLOCK_N"] <= width]
    return kept or [min(configs, key=lambda c: c.kwargs["BLOCK_N"])]


# %%
# Compute kernel
# --------------


@triton.autotune(configs=CONFIGS, key=["n_cols"], prune_configs_by={"early_config_prune": prune_wide_blocks})
@triton.jit
def softmax_autotuned_kernel(
    out_ptr,  # *Pointer* to the output (M, N)
    x_ptr,  # *Pointer* to the input (M, N)
    stride_xm, stride_xn,  # Strides of x
    stride_om, stride_on,  # Strides of out
    n_cols,  # N
    BLOCK_N: tl.constexpr,  # Lanes per block of the row (tuned)
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_N)
    # Pass 1: the running max m and the running sum l of exp(x - m), rescaled when m grows.
    m = tl.full([BLOCK_N], -float("inf"), tl.float32)
    l = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < n_cols, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        # A lane whose max is still -inf holds no element yet: its sum stays 0 (not NaN from -inf - -inf).
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        l = l * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    scale = tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max))
    den = tl.sum(l * scale, axis=0)
    # Pass 2: write exp(x - max) / sum.
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xn, mask=offs < n_cols, other=-float("inf"))
        out = tl.exp(x.to(tl.float32) - row_max) / den
        tl.store(out_ptr + row * stride_om + offs * stride_on, out.to(out_ptr.dtype.element_ty), mask=offs < n_cols)


# %%
# Launcher and contract
# ---------------------

DIMS = {"M": Dim(1, 64), "N": Dim(1, 2048)}


@subject(
    family="softmax_autotuned",
    inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"), layouts="any")},
    dims=DIMS,
    oracle=lambda x: torch.softmax(x, dim=-1),
    reduces="N",
    values=("huge", "ties"),
)
def softmax_autotuned(x):
    """Softmax over the last dim of a 2-D fp16/fp32 tensor of any layout, its block size autotuned."""
    if x.dtype not in (torch.float16, torch.float32):
        raise TypeError(f"softmax_autotuned: x.dtype={x.dtype}, expected float16 or float32")
    if x.dim() != 2:
        raise ValueError(f"softmax_autotuned: x.dim()={x.dim()}, expected a 2-D tensor (M, N)")
    M, N = x.shape
    for axis, sym in enumerate(("M", "N")):
        if not DIMS[sym].admits(x.shape[axis]):
            raise ValueError(f"softmax_autotuned: x.shape[{axis}]={x.shape[axis]}, expected "
                             f"{DIMS[sym].min} <= {sym} <= {DIMS[sym].max}")
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_autotuned_kernel[(M,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), N)
    return out


if __name__ == "__main__":
    x = torch.randn(3, 300)
    print(torch.allclose(softmax_autotuned(x=x), torch.softmax(x, -1), atol=1e-6))
