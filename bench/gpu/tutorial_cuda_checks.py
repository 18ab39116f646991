"""Open questions of the tutorials' H200 run (examples/FINDINGS.md, "On the H200"), one process each.

- ``size1``: tutorial 08's ``group_gemm_tma`` on a one-row A whose row stride is 7 elements (14 bytes; legal
  to torch): the interpreter's compat layer calls the in-kernel descriptor unsafe (misaligned-descriptor), the
  H200 run honoured the cell's 30 draws.  Does the hardware compute it right?
- ``ln-grad``: tutorial 05's backward on a transposed grad_output (M = N = 2, 3): wrong on the interpreter
  (dy read with x's row stride), honoured in 30 draws on the H200.
- ``ws-causal``: tutorial 06's default ``attention(q, k, v, True, 0.5)`` (``warp_specialize=True``) on Hopper:
  ``PassManager::run failed`` in make_ttgir; the MLIR diagnostic (stderr) names the failing pass.
- ``assume-broadcast``: tutorial 03's ``matmul(a, b)`` on a b whose rows are one row expanded (stride 0),
  which breaks the kernel's ``tl.assume(stride_bk > 0)``: the interpreter checks the assumption ("Assume
  failed"); on the GPU it is undefined behaviour.  What does the H200 compute (max error against fp32)?

From ``examples/triton_tutorials`` (sources/ carried): ``python ../../bench/gpu/tutorial_cuda_checks.py size1``
(``ln-grad``, ``ws-causal``, ``assume-broadcast``; ``--device cpu``: the interpreter, for all but ``ws-causal``,
whose full config list -- outside pytest -- has configs that fail its ``tl.static_assert``, which only a
compiling autotuner skips).
"""

import argparse
import sys


def size1(device: str) -> None:
    from triton_conformance.conformance.replay import replay
    from triton_conformance.strategies import Layout, Spec

    dims = {"M0": 1, "K": 16, "N0": 16, "M1": 1, "N1": 16, "ALIGN": 16}
    example = Spec(dims=dims, dtypes={n: "float16" for n in ("a0", "b0", "a1", "b1")},
                   layouts={"a0": Layout("size1", odd_stride=7)}, seed=0)
    print("verdict:", replay("subjects_08_grouped_gemm", "tutorial_group_gemm_tma", "layout:size1", example,
                             device=device, check=False))


def ln_grad_transposed(device: str) -> None:
    from triton_conformance.conformance.replay import replay
    from triton_conformance.strategies import Layout, Spec

    for n in (2, 3):
        example = Spec(dims={"M": n, "N": n}, dtypes={"x": "float16", "weight": "float16", "bias": "float16"},
                       layouts={"grad_output": Layout("transposed", perm=(1, 0))}, scalars={"eps": 1e-6}, seed=0)
        print("verdict:", replay("subjects_05_layer_norm", "tutorial_layer_norm", "grad:layout:transposed", example,
                                 device=device, check=False))


def ws_causal(device: str) -> None:
    import torch
    from sources.tutorial_06_fused_attention import attention

    for causal in (False, True):
        q, k, v = (torch.randn(1, 1, 128, 64, device=device, dtype=torch.float16) for _ in range(3))
        try:
            attention(q, k, v, causal, 0.5)
            print(f"causal={causal}: compiled and ran", flush=True)
        except RuntimeError as exc:
            print(f"causal={causal}: {type(exc).__name__}: {exc}", flush=True)


def assume_broadcast(device: str) -> None:
    import torch
    from sources.tutorial_03_matrix_multiplication import matmul

    for k, n in ((4, 8), (256, 256)):
        a = torch.randn(64, k, device=device, dtype=torch.float16)
        b = torch.randn(1, n, device=device, dtype=torch.float16).expand(k, n)  # strides (0, 1)
        try:
            err = (matmul(a, b).float() - a.float() @ b.float()).abs().max().item()
            print(f"K={k} N={n} b strides {b.stride()}: ran, max abs err {err:.3g}", flush=True)
        except Exception as exc:  # noqa: BLE001 - the question is what happens
            print(f"K={k} N={n} b strides {b.stride()}: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, ".")
    parser = argparse.ArgumentParser()
    parser.add_argument("check", choices=("size1", "ln-grad", "ws-causal", "assume-broadcast"))
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    if args.device == "cpu":  # the interpreter, with the compat layer, before any kernel module is imported
        from triton_conformance.conformance.backend import select_device
        from triton_conformance.conformance.interpreter_layer import install_compat

        select_device("interpreter")
        install_compat(None)
    {"size1": size1, "ln-grad": ln_grad_transposed, "ws-causal": ws_causal,
     "assume-broadcast": assume_broadcast}[args.check](args.device)
