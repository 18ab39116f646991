"""A library API that calls Triton only for CUDA tensors (``if x.is_cuda:``), with a torch fallback otherwise.

On the interpreter every tensor is on the CPU, so without ``pretend_cuda=True`` the cells judge the fallback
(correct here) and say that no Triton kernel was launched; with it, they judge the Triton path, where this
library's bug is: its kernel drops the bias the fallback adds, a defect the GPU shows and the CPU hid.
The correct twin lives here too.  ``TRITON_CALLS`` counts the Triton path's launches, by subject.

A second pair claims its dtypes per device, as such a library must when its CPU fallback lacks a dtype
(half precision here): ``dtypes={"cpu": ("float32",), "cuda": ("float16", "float32")}``.  The bug: the Triton
path's own dtype check forgets fp16, so it refuses the fp16 its CUDA claim names.  Under ``pretend_cuda`` the
interpreter judges the CUDA claim, where that refusal is a failure; the CPU claim (no ``pretend_cuda``) leaves
fp16 outside, where the fallback's refusal is right.
"""

from collections import Counter

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Scalar, Tensor, register

BUGS = [
    ("zoo_cuda_dispatch_drops_bias", "layout:contiguous", "wrong", "mismatch"),
    ("zoo_cuda_dispatch_refuses_claimed_fp16", "dtype:float16", "crash", "exception"),
]

BLOCK = 128
TRITON_CALLS: Counter = Counter()


@triton.jit
def scale_shift_kernel(x_ptr,  # the input
                       out_ptr,  # the output, as long
                       n,  # elements
                       scale,  # the factor
                       bias,  # added after it
                       DROP_BIAS: tl.constexpr,
                       BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    if DROP_BIAS:
        y = x * scale  # BUG: the bias the torch fallback adds is dropped on the Triton path
    else:
        y = x * scale + bias
    tl.store(out_ptr + offsets, y, mask=mask)


def _scale_shift(x, scale, bias, name, drop_bias=False):
    if not x.is_cuda:  # the library's CPU path: torch, no Triton
        return x * scale + bias
    if not x.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous x")
    TRITON_CALLS[name] += 1
    out = torch.empty_like(x)
    scale_shift_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), scale, bias, DROP_BIAS=drop_bias,
                                                         BLOCK_SIZE=BLOCK)
    return out


def cuda_dispatch_scale_shift(x, scale, bias):
    return _scale_shift(x, scale, bias, "cuda_dispatch_scale_shift")


def zoo_cuda_dispatch_drops_bias(x, scale, bias):
    return _scale_shift(x, scale, bias, "zoo_cuda_dispatch_drops_bias", drop_bias=True)


CONTRACT = dict(inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 4096)},
                scalars={"scale": Scalar(-4.0, 4.0), "bias": Scalar(0.5, 4.0)},
                oracle=lambda x, scale, bias: x * scale + bias, family="cuda_dispatch", pretend_cuda=True)

register(cuda_dispatch_scale_shift, **CONTRACT)
register(zoo_cuda_dispatch_drops_bias, xfail="the Triton path drops the bias the torch fallback adds", **CONTRACT)


# -- dtypes per device: no fp16 on the CPU path ----------------------------------------------------------------
def _scale(x, scale, name, cuda_dtypes):
    if not x.is_cuda:  # the CPU fallback has no half precision (as some libraries' torch paths lack a dtype)
        if x.dtype != torch.float32:
            raise TypeError(f"{name}: only float32 is supported on the CPU path, got {x.dtype}")
        return x * scale
    if x.dtype not in cuda_dtypes:
        raise TypeError(f"{name}: unsupported dtype {x.dtype} (expected one of {cuda_dtypes})")
    TRITON_CALLS[name] += 1
    out = torch.empty_like(x)
    scale_shift_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), scale, 0.0, DROP_BIAS=True,
                                                         BLOCK_SIZE=BLOCK)
    return out


def cuda_dispatch_scale_per_device(x, scale):
    return _scale(x, scale, "cuda_dispatch_scale_per_device", (torch.float16, torch.float32))


def zoo_cuda_dispatch_refuses_claimed_fp16(x, scale):
    # BUG: the Triton path's dtype check forgets the fp16 that the CUDA claim names.
    return _scale(x, scale, "zoo_cuda_dispatch_refuses_claimed_fp16", (torch.float32,))


PER_DEVICE = dict(inputs={"x": Tensor(("N",), dtypes={"cpu": ("float32",), "cuda": ("float16", "float32")})},
                  dims={"N": Dim(1, 1024)}, scalars={"scale": Scalar(-4.0, 4.0)},
                  oracle=lambda x, scale: x * scale, family="cuda_dispatch", pretend_cuda=True)

register(cuda_dispatch_scale_per_device, **PER_DEVICE)
register(zoo_cuda_dispatch_refuses_claimed_fp16, xfail="the Triton path refuses the fp16 its CUDA claim names",
         **PER_DEVICE)
