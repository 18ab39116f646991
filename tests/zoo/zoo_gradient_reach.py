"""Backward bugs that only a shape class or a value class reaches (issue 23 section 1), each beside its
correct twin.

No kernel in ``kernels_under_test`` declares these contracts, so the correct
twins live here too, without ``xfail``.  Each forward is right; only the
backward is wrong, and only for inputs that an ordinary draw never makes:

* **A wide batch** (``grad:shape:beyond-block``, its long-batch draw): an RMS
  norm backward whose dW partial sums live in a buffer of one slot per SM (132,
  an H100's), a program writing slot ``pid % 132``: past 132 programs a later
  one overwrites an earlier one's partial sum instead of adding to it.
* **A floor where a ceiling belongs** (``grad:shape:beyond-block``): the same
  backward packs 16 rows into a program for a long batch of short rows (M >=
  2048, N < 64) and sizes its partial buffer ``M // 16``: when M is not a
  multiple of 16 the last program writes its partial sums past the buffer.
* **Large logits in range** (``grad:values:extreme``): a cross entropy whose
  backward forms softmax as ``exp(x) * exp(-lse)``: inf or NaN gradients once a
  logit passes about 88, inside the declared ``value_range``; the forward
  subtracts the row max and is right.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels_under_test.rms_norm import rms_norm_grad_scale, rms_norm_oracle
from triton_conformance import Dim, Scalar, Tensor, register
from triton_conformance.model.contract import Backward

BUGS = [
    ("zoo_rms_norm_rows_partials_per_sm", "grad:shape:beyond-block", "wrong", "mismatch"),
    ("zoo_rms_norm_rows_partials_floor", "grad:shape:beyond-block", "unsafe", "oob-write"),
    ("zoo_cross_entropy_grad_exp_overflow", "grad:values:extreme", "wrong", "nan-mismatch"),
]

# %%
# RMS norm over short rows, several rows a program
# ------------------------------------------------
# One tile holds a whole row (N <= 1024).  For a long batch of short rows the
# launcher packs ``BLOCK_M`` rows into a program, so that each program has a
# tile's worth of work; otherwise a program takes one row.  The backward writes
# dx and, per program, the sum of its rows' ``g * x * rstd`` into its slot of a
# partial-dW buffer; ``dw`` is that buffer summed over its slots.


@triton.jit
def rms_rows_fwd_kernel(
    x_ptr, w_ptr, y_ptr, rstd_ptr,  # x, weight, y (M, N); rstd (M,) saved for the backward
    M, N, eps,
    BLOCK_M: tl.constexpr,  # rows per program
    BLOCK_N: tl.constexpr,  # next_power_of_2(N): one tile holds a row
):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    tl.store(rstd_ptr + rows, rstd, mask=rows < M)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_rows_bwd_kernel(
    x_ptr, w_ptr, g_ptr, rstd_ptr, dx_ptr, partial_ptr,  # partial: (slots, N) fp32, one slot a program
    stride_gm, stride_gn,  # grad_output in any layout
    M, N, n_slots,  # the partial buffer's slots
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WRAP_SLOTS: tl.constexpr,  # fewer slots than programs: program pid writes slot pid % n_slots
):
    pid = tl.program_id(axis=0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + rows[:, None] * stride_gm + cols[None, :] * stride_gn, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + rows, mask=rows < M, other=0.0)
    c = tl.sum(x * w[None, :] * g, axis=1) / N * rstd * rstd
    dx = rstd[:, None] * (w[None, :] * g - x * c[:, None])
    tl.store(dx_ptr + rows[:, None] * N + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
    if WRAP_SLOTS:
        slot = pid % n_slots  # BUG (with fewer slots than programs): a later program overwrites a slot
    else:
        slot = pid
    tl.store(partial_ptr + slot * N + cols, tl.sum(g * x * rstd[:, None], axis=0), mask=cols < N)


ROWS_DIMS = {"M": Dim(1, 4096), "N": Dim(1, 1024)}
SM_COUNT = 132  # an H100's SMs


def rows_per_program(M, N):
    """16 rows a program for a long batch of short rows, else one."""
    return 16 if N < 64 and M >= 2048 else 1


def _check_rows_args(x, weight):
    if x.dim() != 2 or x.dtype != torch.float32 or weight.shape != x.shape[1:] or weight.dtype != x.dtype:
        raise ValueError(f"rms_norm_rows: x (M, N) and weight (N,) float32, got {tuple(x.shape)} {x.dtype}, "
                         f"{tuple(weight.shape)} {weight.dtype}")
    M, N = x.shape
    if not (ROWS_DIMS["M"].admits(M) and ROWS_DIMS["N"].admits(N)):
        raise ValueError(f"rms_norm_rows: x.shape={(M, N)}, expected 1 <= M <= 4096, 1 <= N <= 1024")


def rms_rows_forward(x, weight, eps):
    M, N = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    block_m = rows_per_program(M, N)
    rms_rows_fwd_kernel[(triton.cdiv(M, block_m),)](x, weight, y, rstd, M, N, eps, BLOCK_M=block_m,
                                                    BLOCK_N=triton.next_power_of_2(N))
    return y, rstd


def slots_per_program(M, block_m):
    """Correct: one slot for each program, ``cdiv(M, block_m)`` of them."""
    return triton.cdiv(M, block_m)


def slots_per_sm(M, block_m):
    """BUG: one slot per SM, the programs wrapping around them: past 132 programs a slot that an earlier
    program wrote is overwritten, not added to."""
    return min(triton.cdiv(M, block_m), SM_COUNT)


def slots_floor(M, block_m):
    """BUG: ``M // block_m`` where ``cdiv`` belongs: a partial block of rows writes its slot past the buffer."""
    return M // block_m


def rms_rows_backward(x, weight, rstd, g, slots=slots_per_program):
    M, N = x.shape
    block_m = rows_per_program(M, N)
    programs = triton.cdiv(M, block_m)
    n_slots = slots(M, block_m)
    dx = torch.empty_like(x)
    partial = torch.empty((n_slots, N), dtype=torch.float32, device=x.device)
    rms_rows_bwd_kernel[(programs,)](x, weight, g, rstd, dx, partial, g.stride(0), g.stride(1), M, N, n_slots,
                                     BLOCK_M=block_m, BLOCK_N=triton.next_power_of_2(N),
                                     WRAP_SLOTS=slots is slots_per_sm)
    return dx, partial.sum(0).to(weight.dtype)


def _rms_rows_function(slots):
    class RMSNormRows(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps):
            _check_rows_args(x, weight)
            x, weight = x.contiguous(), weight.contiguous()
            y, rstd = rms_rows_forward(x, weight, eps)
            ctx.save_for_backward(x, weight, rstd)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, weight, rstd = ctx.saved_tensors
            dx, dw = rms_rows_backward(x, weight, rstd, grad_output, slots=slots)
            return dx, dw, None

    return RMSNormRows


RMS_ROWS = dict(
    family="zoo_rms_norm_rows",
    inputs={"x": Tensor(("M", "N"), dtypes=("float32",)), "weight": Tensor(("N",), dtypes=("float32",))},
    dims=ROWS_DIMS,
    scalars={"eps": Scalar(1e-6, 1e-3)},
    oracle=rms_norm_oracle,
    reduces="N",
    backward=Backward(grads=("x", "weight"), error_scale=rms_norm_grad_scale),
)

register(_rms_rows_function(slots_per_program), name="zoo_rms_norm_rows", **RMS_ROWS)
register(_rms_rows_function(slots_per_sm), name="zoo_rms_norm_rows_partials_per_sm", **RMS_ROWS,
         xfail="dW's partial sums in one slot per SM (132): past 132 programs a slot is overwritten")
register(_rms_rows_function(slots_floor), name="zoo_rms_norm_rows_partials_floor", **RMS_ROWS,
         xfail="the partial-dW buffer sized M // 16 for a long batch of short rows: the last program writes past it")


# %%
# Cross entropy with its backward
# -------------------------------
# One program per row.  The forward saves each row's logsumexp; the backward
# writes ``dlogits = (softmax(x) - onehot(target)) * g`` with
# ``softmax(x) = exp(x - lse)``.


@triton.jit
def ce_fwd_kernel(loss_ptr, lse_ptr, logits_ptr, target_ptr, V, BLOCK_V: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_V)
    x = tl.load(logits_ptr + row * V + cols, mask=cols < V, other=-float("inf"))
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    t = tl.load(target_ptr + row)
    tl.store(lse_ptr + row, lse)
    tl.store(loss_ptr + row, lse - tl.load(logits_ptr + row * V + t))


@triton.jit
def ce_bwd_kernel(dlogits_ptr, logits_ptr, target_ptr, lse_ptr, g_ptr, stride_g, V, BLOCK_V: tl.constexpr,
                  EXP_OF_SUM: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_V)
    x = tl.load(logits_ptr + row * V + cols, mask=cols < V, other=0.0)
    lse = tl.load(lse_ptr + row)
    if EXP_OF_SUM:
        p = tl.exp(x - lse)
    else:
        p = tl.exp(x) * tl.exp(-lse)  # BUG: exp(x) overflows past x = 88.7, though exp(x - lse) <= 1
    t = tl.load(target_ptr + row)
    g = tl.load(g_ptr + row * stride_g)
    dx = (p - tl.where(cols == t, 1.0, 0.0)) * g
    tl.store(dlogits_ptr + row * V + cols, dx, mask=cols < V)


LOGIT_RANGE = (-100.0, 100.0)


def _check_ce_args(logits, target):
    if logits.dim() != 2 or logits.dtype != torch.float32:
        raise ValueError(f"cross_entropy: logits (M, V) float32, got {tuple(logits.shape)} {logits.dtype}")
    if target.dtype != torch.int64 or target.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy: target int64 of shape {tuple(logits.shape[:1])}, got "
                         f"{tuple(target.shape)} {target.dtype}")
    M, V = logits.shape
    if not (1 <= M <= 64 and 1 <= V <= 1024):
        raise ValueError(f"cross_entropy: logits.shape={(M, V)}, expected 1 <= M <= 64, 1 <= V <= 1024")


def _cross_entropy_function(exp_of_sum):
    class CrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, target):
            _check_ce_args(logits, target)
            logits, target = logits.contiguous(), target.contiguous()
            M, V = logits.shape
            loss = torch.empty((M,), dtype=torch.float32, device=logits.device)
            lse = torch.empty((M,), dtype=torch.float32, device=logits.device)
            ce_fwd_kernel[(M,)](loss, lse, logits, target, V, BLOCK_V=triton.next_power_of_2(V))
            ctx.save_for_backward(logits, target, lse)
            return loss

        @staticmethod
        def backward(ctx, grad_output):
            logits, target, lse = ctx.saved_tensors
            M, V = logits.shape
            dlogits = torch.empty_like(logits)
            ce_bwd_kernel[(M,)](dlogits, logits, target, lse, grad_output, grad_output.stride(0), V,
                                BLOCK_V=triton.next_power_of_2(V), EXP_OF_SUM=exp_of_sum)
            return dlogits, None

    return CrossEntropy


def _ce_error_scale(logits, target):
    """The loss ``lse - x[t]`` cancels: its rounding scales with the logits it subtracts, not with the loss."""
    return logits.abs().amax(-1) + 1.0


def _ce_grad_scale(logits, target, grad_output):
    """``exp(x - lse)`` carries the rounding of ``x - lse``, so softmax's error grows with the logits' size."""
    return {"logits": ((logits.abs().amax(-1, keepdim=True) + 1.0) * grad_output.abs()[:, None]).expand_as(logits)}


CROSS_ENTROPY = dict(
    family="zoo_cross_entropy_grad",
    inputs={"logits": Tensor(("M", "V"), dtypes=("float32",), value_range=LOGIT_RANGE),
            "target": Tensor(("M",), dtypes=("int64",), index_of="V")},
    dims={"M": Dim(1, 64), "V": Dim(1, 1024)},
    oracle=lambda logits, target: F.cross_entropy(logits, target, reduction="none"),
    reduces="V",
    error_scale=_ce_error_scale,
    backward=Backward(grads=("logits",), output=("M",), reduces={"logits": "V"}, error_scale=_ce_grad_scale),
)

register(_cross_entropy_function(True), name="zoo_cross_entropy_grad", **CROSS_ENTROPY)
register(_cross_entropy_function(False), name="zoo_cross_entropy_grad_exp_overflow", **CROSS_ENTROPY,
         xfail="the backward's softmax is exp(x) * exp(-lse): inf/NaN once a logit passes about 88")
