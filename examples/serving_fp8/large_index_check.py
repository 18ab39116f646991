"""Past 2^31 elements, does each quantizer of sources/ still quantize its last rows?  (CUDA; about 7 GiB)

    cd examples/serving_fp8 && python large_index_check.py

The suite's large-index cell skips a contract with related dims (``Divisible("K", by="G")``), so this
checks it directly: x (R, 128) bf16 quantized by each library's Triton quantizer, and the last 8 rows'
q and scales compared with the oracle of serving_subjects.py, at R = 2^24 - 8 rows (just under 2^31
elements: the control) and R = 2^24 + 8 (2^31 + 1024 elements).  SGLang's row-major kernel offsets its
pointers by ``g_id * y_stride`` (program id times group size, both int32), which wraps for g_id >= 2^24;
vLLM's and SGLang's column-major kernels widen to int64 first.  Each run is a process of its own: an
illegal address poisons the CUDA context, and would hide the quantizers after it.
"""

import subprocess
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
ROWS = {"under 2^31": (1 << 24) - 8, "past 2^31": (1 << 24) + 8}
TAIL = 8


def check(name: str, rows: int) -> int:
    """One quantizer at one row count, in this process: 0 if its last rows match the oracle."""
    subject = next(sub for sub in FORMULAS if sub.name == name)
    scale_by, quantize_by = FORMULAS[subject]
    x = torch.randn(rows, 128, dtype=torch.bfloat16, device="cuda")
    q, scales = subject.launcher(x=x, G=128)
    torch.cuda.synchronize()
    ref_q, ref_s = group_quantized(x[-TAIL:].cpu().double(), group=128, scale_by=scale_by,
                                   quantize_by=quantize_by)
    bad_q = (q[-TAIL:].cpu().double() != ref_q).sum().item()
    bad_s = (scales[-TAIL:].cpu().double() != ref_s).sum().item()
    print(f"last {TAIL} rows: {bad_q} of {TAIL * 128} q and {bad_s} of {TAIL} scales differ")
    return int(bool(bad_q or bad_s))


def main():
    if len(sys.argv) == 3:
        return check(sys.argv[1], int(sys.argv[2]))
    if not torch.cuda.is_available():
        print("needs CUDA (2^31 elements are too many for the interpreter)")
        return 2
    worst = 0
    for subject in FORMULAS:
        for label, rows in ROWS.items():
            run = subprocess.run([sys.executable, __file__, subject.name, str(rows)], capture_output=True, text=True)
            lines = (run.stdout + run.stderr).strip().splitlines()
            said = next((line for line in lines if "rows:" in line or "Error" in line), lines[-1] if lines else "")
            print(f"{subject.name}, {rows} rows ({label}, {rows * 128} elements): exit {run.returncode}: {said}")
            worst = max(worst, int(run.returncode != 0))
    return worst


if __name__ == "__main__":
    sys.exit(main())
