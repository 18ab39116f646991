"""Row sums in bf16: one kernel accumulates in fp32 (correct), its twin in bf16 (a bf16-only bug).

On the GPU the bf16 accumulator rounds every partial sum to 8 significant bits,
so long rows lose precision; fp32 inputs are unaffected (the accumulator takes
the input's dtype).  Under the interpreter without the compat layer's 'bf16'
shim neither can be tested: bf16 arithmetic runs on bit patterns there.
"""

import torch
import triton
import triton.language as tl

BLOCK = 16


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr, ACC_IN_INPUT_DTYPE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    if ACC_IN_INPUT_DTYPE:
        acc = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        x = tl.load(x_ptr + row * stride_row + offs, mask=offs < n_cols, other=0.0)
        acc += x.to(acc.dtype)
    tl.store(out_ptr + row, tl.sum(acc.to(tl.float32), axis=0).to(out_ptr.dtype.element_ty))


def _launch(x, acc_in_input_dtype):
    x = x.contiguous()
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    if x.shape[0]:
        row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=BLOCK,
                                      ACC_IN_INPUT_DTYPE=acc_in_input_dtype)
    return out


def row_sum(x):
    return _launch(x, False)


def row_sum_bf16_accumulator(x):
    return _launch(x, True)


def oracle(x):
    return x.sum(dim=1)
