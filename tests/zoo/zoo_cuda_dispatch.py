"""A library API that calls Triton only for CUDA tensors (``if x.is_cuda:``), with a torch fallback otherwise.

On the interpreter every tensor is on the CPU, so without ``pretend_cuda=True`` the cells judge the fallback
(correct here) and say that no Triton kernel was launched; with it, they judge the Triton path, where this
library's bug is: its kernel drops the bias the fallback adds, a defect the GPU shows and the CPU hid.
The correct twin lives here too.  ``TRITON_CALLS`` counts the Triton path's launches, by subject.
"""

from collections import Counter

import torch
import triton
import triton.language as tl

from triton_conformance import Dim, Scalar, Tensor, register

BUGS = [
    ("zoo_cuda_dispatch_drops_bias", "layout:contiguous", "wrong", "mismatch"),
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
