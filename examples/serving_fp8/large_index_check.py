"""Past 2^31 elements, does each quantizer of sources/ still quantize its last rows?  (CUDA; about 7 GiB)

    cd examples/serving_fp8 && python large_index_check.py

The suite's large-index cell skips a contract with related dims (``Divisible("K", by="G")``), so this
checks it directly: x (2^24 + 8, 128) bf16, 2^31 + 1024 elements, quantized by each library's Triton
quantizer; the last 8 rows' q and scales are compared with the oracle of serving_subjects.py.  SGLang's
row-major kernel offsets its pointers by ``g_id * y_stride`` (program id times group size, both int32),
which wraps for g_id >= 2^24; vLLM's and SGLang's column-major kernels widen to int64 first.
"""

import sys

import torch

import serving_subjects as s
from triton_conformance.oracles.quantization import group_quantized

FORMULAS = {  # subject -> (scale_by, quantize_by), as serving_subjects.py declares them
    s.vllm_per_token_group_quant_fp8: ("reciprocal", "divide"),
    s.vllm_per_token_group_quant_fp8_colmajor: ("reciprocal", "divide"),
    s.sglang_per_token_group_quant_fp8: ("divide", "reciprocal"),
    s.sglang_per_token_group_quant_fp8_colmajor: ("divide", "divide"),
}


def main():
    if not torch.cuda.is_available():
        print("needs CUDA (2^31 elements are too many for the interpreter)")
        return 2
    rows, tail = (1 << 24) + 8, 8
    x = torch.randn(rows, 128, dtype=torch.bfloat16, device="cuda")
    ref_q, ref_s = {}, {}
    worst = 0
    for subject, (scale_by, quantize_by) in FORMULAS.items():
        q, scales = subject.launcher(x=x, G=128)
        torch.cuda.synchronize()
        if (scale_by, quantize_by) not in ref_q:
            ref_q[scale_by, quantize_by], ref_s[scale_by, quantize_by] = group_quantized(
                x[-tail:].cpu().double(), group=128, scale_by=scale_by, quantize_by=quantize_by)
        bad_q = (q[-tail:].cpu().double() != ref_q[scale_by, quantize_by]).sum().item()
        bad_s = (scales[-tail:].cpu().double() != ref_s[scale_by, quantize_by]).sum().item()
        print(f"{subject.name}: last {tail} rows: {bad_q} of {tail * 128} q and {bad_s} of {tail} scales differ")
        worst = max(worst, int(bool(bad_q or bad_s)))
        del q, scales
    return worst


if __name__ == "__main__":
    sys.exit(main())
