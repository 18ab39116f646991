"""Small kernels that trip over the interpreter the way real libraries do (one per compat shim)."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import rsqrt as bound_rsqrt  # bound at import, as liger does


@triton.jit
def libdevice_kernel(x_ptr, out_ptr, flags_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = libdevice.exp(x) + bound_rsqrt(x) + libdevice.tanh(x) + libdevice.pow(x, 2.0) + libdevice.erf(x)
    y += libdevice.fast_expf(x) + libdevice.fast_dividef(x, 3.0) + libdevice.div_rn(1.0, x) + libdevice.log2(x)
    y += libdevice.fma(x, x, 1.0) + libdevice.sqrt(x) + libdevice.exp2(x) + libdevice.log(x)
    tl.store(out_ptr + offs, y, mask=mask)
    flags = libdevice.isnan(x).to(tl.int32) + 2 * libdevice.isinf(x).to(tl.int32)
    tl.store(flags_ptr + offs, flags + 4 * libdevice.float2int_rn(x * 2.0), mask=mask)


def libdevice_reference(x):
    y = (torch.exp(x) + torch.rsqrt(x) + torch.tanh(x) + x ** 2 + torch.erf(x) + torch.exp(x) + x / 3 + 1 / x
         + torch.log2(x) + x * x + 1 + torch.sqrt(x) + torch.exp2(x) + torch.log(x))
    flags = torch.isnan(x).int() + 2 * torch.isinf(x).int() + 4 * torch.round(x * 2).nan_to_num(0, 0, 0).int()
    return y, flags


def libdevice_launch(x):
    out = torch.empty_like(x)
    flags = torch.empty(x.shape, dtype=torch.int32)
    libdevice_kernel[(1,)](x, out, flags, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out, flags


def keep_big_blocks(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] * 4 >= named_args["n"]]


def fewer_programs_is_faster(n, BLOCK, **kwargs):
    return triton.cdiv(n, BLOCK)


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (8, 16, 32, 64) for w in (2, 4)],
                 key=["n"],
                 prune_configs_by={"early_config_prune": keep_big_blocks, "perf_model": fewer_programs_is_faster,
                                   "top_k": 3})
@triton.jit
def autotuned_add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


def autotuned_launch(x):
    out = torch.empty_like(x)
    autotuned_add_one[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out


@triton.jit
def scale_kernel(x_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    s = scale.to(tl.float32)  # a float argument is an fp32 scalar when compiled
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


@triton.jit
def blocked_copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    for i in range(NUM_BLOCKS):
        offs = i.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # an int32 tensor when compiled
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    for j in tl.static_range(2):  # static_range keeps Python ints (constexprs when compiled)
        tl.static_assert(j < 2)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def guarded_launch(x):
    """A launcher with an input guard, as fla's and liger's have."""
    out = torch.empty_like(x)
    with torch.cuda.device(x.device):
        copy_kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
    return out


def persistent_launch(x):
    """A launcher that sizes a persistent grid from the device (as the softmax tutorial does)."""
    props = triton.runtime.driver.active.utils.get_device_properties(0)
    major, _ = torch.cuda.get_device_capability(x.device)
    programs = min(props["multiprocessor_count"], torch.cuda.get_device_properties(x.device).multi_processor_count)
    block = 16 if major >= 9 else 8
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
    return out, programs, block


def cuda_allocating_launch(x):
    """A launcher that hard-codes device='cuda' outside torch.empty/zeros."""
    out = torch.full(x.shape, float("nan"), device="cuda")
    scratch = torch.ones(1, device="cuda:0").to("cuda")
    copy_kernel[(triton.cdiv(x.numel(), 16),)](x.cuda(), out, x.numel(), BLOCK=16)
    return out + 0 * scratch


@triton.jit
def add_half_bf16(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * x + 0.5, mask=mask)  # bf16 arithmetic, one rounding per operation


@triton.jit
def strided_copy_kernel(x_ptr, out_ptr, stride_xm, stride_xn, n, BLOCK: tl.constexpr):
    """Integer index arithmetic in every program: what the interpreter's overflow checks were built for."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask)
    tl.store(out_ptr + row * n + cols, x, mask=mask)


def strided_copy(x):
    out = torch.empty(x.shape, dtype=x.dtype)
    strided_copy_kernel[(x.shape[0],)](x, out, x.stride(0), x.stride(1), x.shape[1],
                                       BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


@triton.jit
def _row_norm(x):
    return tl.sqrt(tl.sum(x * x, axis=0))


@triton.jit
def nested_calls_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Each program calls jit functions inside the kernel: a helper, tl.sum, tl.max, tl.sqrt."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row, _row_norm(x) + tl.max(x, axis=0))


def nested_calls(x):
    out = torch.empty(x.shape[0], dtype=x.dtype)
    nested_calls_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
