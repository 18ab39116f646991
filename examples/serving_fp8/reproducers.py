"""The shrunk reproducer of serving_fp8's bug 1, as the suite reported it (FINDINGS.md).

Run from this folder:  python reproducers.py   (after get_serving_kernels.py has filled sources/)
The replay re-runs the example under the cell's guards and raises AssertionError with the finding while
the bug is there; this script prints it.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

from triton_conformance.conformance.interpreter_layer import install_compat  # noqa: E402
from triton_conformance.conformance.replay import replay  # noqa: E402
from triton_conformance.strategies import Spec  # noqa: E402

install_compat()  # every shim, as the run had them (the fp8 casts above all), before the subjects import

CASES = [
    # bug 1: vLLM's Triton fallback reads a 3-D x (B, T, K) with x.shape[1] = T as its row length:
    # T = 2 < 128 gives groups_per_row = 0 and an integer division by zero in the kernel.
    ("vllm_per_token_group_quant_fp8_3d[layout:contiguous]: wrong (mismatch)", "vllm_per_token_group_quant_fp8_3d",
     "layout:contiguous", Spec(dims={'B': 1, 'T': 2, 'G': 128, 'K': 128}, dtypes={'x': 'bfloat16'}, layouts={},
                               seed=0)),
]

if __name__ == "__main__":
    for title, name, cell, example in CASES:
        print(f"== {title}")
        try:
            replay("serving_subjects", name, cell, example, device="cpu", check=True)
            print("   the failure is gone")
        except AssertionError as e:
            print(f"   still fails: {str(e).splitlines()[0][:300]}")
