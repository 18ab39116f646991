"""Autotune bugs that the config and key cells reach only when they run the backward and prime other sizes
(issue 23 section 2), each beside its correct twin.

No kernel in ``kernels_under_test`` declares these contracts, so the correct
twins live here too, without ``xfail``.

* **A backward's multi-row configs.**  A LayerNorm whose backward kernel is
  ``@triton.autotune``'d over the rows a program takes (``BLOCK_M`` 1, 1, 4,
  8) and, generalised from one row to a block of rows, sums ``xhat * w * g``
  over the whole block instead of each row (``tl.sum`` without ``axis=1``): dx
  is wrong in the configs with ``BLOCK_M > 1`` only.  The grad cells run the
  first config on the interpreter; ``autotune:config2`` pins ``BLOCK_M=4`` and
  runs the backward battery.
* **A split-K key without K.**  A split-K matmul gives each of ``SPLIT_K``
  programs an equal share ``K // SPLIT_K`` of the reduction, and its pruning
  keeps only the splits that divide K; but its ``key=["M", "N"]`` omits K, so a
  split chosen at one K is reused at another with the same M and N, and drops
  the last ``K % SPLIT_K`` columns.  At K = 1 only ``SPLIT_K=1`` survives, so a
  key probe priming at the minimum alone never caches the harmful split;
  ``autotune:key`` primes at the drawn K's neighbours too.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels_under_test.layer_norm import layer_norm_error_scale
from triton_conformance import Dim, Scalar, Tensor, register, subject
from triton_conformance.model.contract import Backward

BUGS = [
    ("zoo_layer_norm_autotuned_bwd_block_sum", "autotune:config2", "wrong", "mismatch"),
    ("zoo_matmul_split_k_key_omits_k", "autotune:key", "wrong", "mismatch"),
]

# %%
# LayerNorm, its backward autotuned over the rows a program takes
# ---------------------------------------------------------------


@triton.jit
def ln_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=0) / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, diff * rstd * w + b, mask=mask)


ROWS_CONFIGS = [triton.Config({"BLOCK_M": m}, num_warps=w) for m, w in ((1, 1), (1, 4), (4, 4), (8, 8))]


@triton.jit
def _ln_bwd_body(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride_gm, stride_gn, M, N,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PER_ROW: tl.constexpr):
    pid = tl.program_id(axis=0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    g = tl.load(g_ptr + rows[:, None] * stride_gm + cols[None, :] * stride_gn, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0)
    mean = tl.load(mean_ptr + rows, mask=rows < M, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=rows < M, other=0.0)
    xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
    wg = w[None, :] * g
    if PER_ROW:
        c1 = tl.sum(xhat * wg, axis=1)[:, None] / N
    else:
        c1 = tl.sum(xhat * wg) / N  # BUG: summed over the whole block of rows (the same when BLOCK_M = 1)
    c2 = tl.sum(wg, axis=1)[:, None] / N
    tl.store(dx_ptr + rows[:, None] * N + cols[None, :], (wg - (xhat * c1 + c2)) * rstd[:, None], mask=mask)
    # This program's share of dW and dB, in its own row of the partial buffers.
    tl.store(dw_ptr + pid * N + cols, tl.sum(g * xhat, axis=0), mask=cols < N)
    tl.store(db_ptr + pid * N + cols, tl.sum(g, axis=0), mask=cols < N)


@triton.autotune(configs=ROWS_CONFIGS, key=["M", "N"])
@triton.jit
def ln_bwd_kernel(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride_gm, stride_gn, M, N,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    _ln_bwd_body(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride_gm, stride_gn, M, N,
                 BLOCK_M, BLOCK_N, True)


@triton.autotune(configs=ROWS_CONFIGS, key=["M", "N"])
@triton.jit
def ln_bwd_kernel_block_sum(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride_gm, stride_gn,
                            M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    _ln_bwd_body(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride_gm, stride_gn, M, N,
                 BLOCK_M, BLOCK_N, False)


LN_DIMS = {"M": Dim(1, 64), "N": Dim(1, 1024)}


def _check_ln_args(x, weight, bias):
    if x.dim() != 2 or x.dtype != torch.float32:
        raise ValueError(f"layer_norm: x (M, N) float32, got {tuple(x.shape)} {x.dtype}")
    M, N = x.shape
    if not (LN_DIMS["M"].admits(M) and LN_DIMS["N"].admits(N)):
        raise ValueError(f"layer_norm: x.shape={(M, N)}, expected 1 <= M <= 64, 1 <= N <= 1024")
    for name, t in (("weight", weight), ("bias", bias)):
        if t.shape != (N,) or t.dtype != x.dtype:
            raise ValueError(f"layer_norm: {name} ({N},) float32, got {tuple(t.shape)} {t.dtype}")


def _ln_function(bwd_kernel):
    class LayerNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, eps):
            _check_ln_args(x, weight, bias)
            x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
            M, N = x.shape
            y = torch.empty_like(x)
            mean = torch.empty((M,), dtype=torch.float32, device=x.device)
            rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
            ln_fwd_kernel[(M,)](x, weight, bias, y, mean, rstd, N, eps, BLOCK_N=triton.next_power_of_2(N))
            ctx.save_for_backward(x, weight, mean, rstd)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, weight, mean, rstd = ctx.saved_tensors
            M, N = x.shape
            dx = torch.empty_like(x)
            # Partial sums: one row for each program of the config with the most (BLOCK_M = 1).
            dw = torch.zeros((M, N), dtype=torch.float32, device=x.device)
            db = torch.zeros((M, N), dtype=torch.float32, device=x.device)
            bwd_kernel[lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)](
                x, weight, grad_output, mean, rstd, dx, dw, db, grad_output.stride(0), grad_output.stride(1), M, N,
                BLOCK_N=triton.next_power_of_2(N))
            return dx, dw.sum(0), db.sum(0), None

    return LayerNorm


def _ln_grad_scale(x, weight, bias, eps, grad_output):
    """The terms each gradient sums, in absolute value (dx's three terms cancel), with ``xhat`` at the size
    of its rounding: ``x - mean`` loses an ulp of max|x|, which rstd amplifies (a near-constant row)."""
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps)
    xhat = x.abs().amax(-1, keepdim=True) * rstd + ((x - mean) * rstd).abs()
    wg = (weight * grad_output).abs()
    dx = rstd * (wg + xhat * (xhat * wg).mean(-1, keepdim=True) + wg.mean(-1, keepdim=True))
    return {"x": dx, "weight": (grad_output.abs() * xhat).sum(0), "bias": grad_output.abs().sum(0)}


LN_AUTOTUNED = dict(
    family="zoo_layer_norm_autotuned_bwd",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",)), "weight": Tensor(("N",), dtypes=("float32",)),
            "bias": Tensor(("N",), dtypes=("float32",))},
    dims=LN_DIMS,
    scalars={"eps": Scalar(1e-6, 1e-3)},
    oracle=lambda x, weight, bias, eps: F.layer_norm(x, x.shape[-1:], weight, bias, eps),
    reduces="N",
    error_scale=layer_norm_error_scale,
    backward=Backward(grads=("x", "weight", "bias"), error_scale=_ln_grad_scale),
)

zoo_layer_norm_autotuned_bwd = register(_ln_function(ln_bwd_kernel), name="zoo_layer_norm_autotuned_bwd",
                                        **LN_AUTOTUNED)
zoo_layer_norm_autotuned_bwd_block_sum = register(
    _ln_function(ln_bwd_kernel_block_sum), name="zoo_layer_norm_autotuned_bwd_block_sum", **LN_AUTOTUNED,
    xfail="the backward's multi-row configs sum xhat * w * g over the block of rows, not each row")


# %%
# Split-K matmul
# --------------
# Program (m, n, s) multiplies a BLOCK_M x BLOCK_N tile over its split s of K,
# an equal share ``K // SPLIT_K`` of it, into its own slice of a workspace
# that the launcher sums.  The pruning keeps the splits that divide K.

SPLIT_CONFIGS = [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": s}, num_warps=w)
                 for s, w in ((1, 2), (2, 2), (4, 4))]
MAX_SPLIT = 4


def keep_splits_that_divide_k(configs, named_args, **kwargs):
    return [c for c in configs if named_args["K"] % c.kwargs["SPLIT_K"] == 0]


@triton.jit
def _split_k_body(a_ptr, b_ptr, ws_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    rm = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    share = K // SPLIT_K  # the pruning keeps only splits that divide K
    start = tl.program_id(axis=2) * share
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(start, start + share, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        in_k = rk < start + share
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & in_k[None, :], other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=in_k[:, None] & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    out = ws_ptr + tl.program_id(axis=2) * M * N + rm[:, None] * N + rn[None, :]
    tl.store(out, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.autotune(configs=SPLIT_CONFIGS, key=["M", "N"],  # BUG: the split's share depends on K
                 prune_configs_by={"early_config_prune": keep_splits_that_divide_k})
@triton.jit
def split_k_kernel_keyed_mn(a_ptr, b_ptr, ws_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            SPLIT_K: tl.constexpr):
    _split_k_body(a_ptr, b_ptr, ws_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K)


@triton.autotune(configs=SPLIT_CONFIGS, key=["M", "N", "K"],
                 prune_configs_by={"early_config_prune": keep_splits_that_divide_k})
@triton.jit
def split_k_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    _split_k_body(a_ptr, b_ptr, ws_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K)


SPLIT_K = dict(
    family="zoo_matmul_split_k",
    inputs={"a": Tensor(("M", "K"), dtypes=("float32",), layouts="any"),
            "b": Tensor(("K", "N"), dtypes=("float32",), layouts="any")},
    dims={"M": Dim(1, 64), "N": Dim(1, 64), "K": Dim(1, 256)},
    oracle=lambda a, b: a @ b,
    reduces="K",
)


def _split_k(kernel, a, b):
    M, K = a.shape
    N = b.shape[1]
    ws = torch.zeros((MAX_SPLIT, M, N), dtype=torch.float32, device=a.device)
    kernel[lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]), meta["SPLIT_K"])](
        a, b, ws, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1))
    return ws.sum(0)


@subject(**SPLIT_K, xfail="key=['M', 'N'] omits K: a split cached at one K drops K % SPLIT_K columns at another")
def zoo_matmul_split_k_key_omits_k(a, b):
    return _split_k(split_k_kernel_keyed_mn, a, b)


@subject(**SPLIT_K)
def zoo_matmul_split_k(a, b):
    return _split_k(split_k_kernel, a, b)
