"""fp8 on the GPU: the casts, the fp8 zoo with its twins, and the fp8 tensor-core accumulator.

    python bench/gpu/fp8_zoo.py --device cuda          # on the H200 (torch 2.11, triton 3.6)
    python bench/gpu/fp8_zoo.py --device interpreter   # the same, on the CPU, through the compat layer

Prints:
1. the fp32 -> e4m3fn / e5m2 casts of 20,001 points in [-448, 448] against torch's (differing values:
   0 expected), and what the cast gives past the largest finite value (the GPU's cvt.rn.satfinite
   saturates: 448 and 57344, NaN stays NaN; the interpreter's compat shim does the same);
2. one row per fp8 zoo bug: its intended cell on the bug (caught: outcome/finding as intended) and on its
   correct twin (honoured), with seconds;
3. the worst error of a tl.dot of fp8 inputs, K=4096, against float64, over the componentwise scale
   |a| @ |b|, as a unit roundoff per sqrt(K) (fp32 accumulation gives about 2^-24; Hopper's fp8 tensor
   cores about 2^-13, the tolerance's FP8_FAST_ACCUMULATION_UNIT_ROUNDOFF).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

FP8_BUGS = "zoo_fp8_"


def casts(torch, triton, device: str) -> None:
    from tests.compat_kernels import fp8_casts

    def cast(x, dtype):
        y = torch.empty(x.shape, dtype=dtype, device=device)
        fp8_casts.to_fp8[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), TOWARD_ZERO=False, BLOCK=1024)
        return y

    x = torch.linspace(-448, 448, 20001, device=device)
    past = torch.tensor([464.0, 465.0, 1e6, float("inf"), -float("inf"), float("nan"), 61439.0, 61440.0, 1e9],
                        device=device)
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        y = cast(x, dtype)
        differing = int((y.view(torch.uint8) != x.to(dtype).view(torch.uint8)).sum())
        print(f"cast {str(dtype):22s} sweep differing from torch: {differing} of {x.numel()}; "
              f"past the largest {past.tolist()} -> {cast(past, dtype).float().tolist()}", flush=True)


def zoo(device: str, profile: str) -> tuple[int, int, int]:
    import importlib

    from tests.zoo import all_bugs, correct_twin
    from triton_conformance import get_subject
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config
    from triton_conformance.model.subject import registry

    for module in ("fp8_quant", "fp8_matmul"):
        importlib.import_module(f"kernels_under_test.{module}")
    backend = current_backend(device)
    config = run_config(profile=profile, device=device)
    bugs = [b for b in all_bugs() if b[0].startswith(FP8_BUGS)]
    caught = honoured = 0
    for name, cell, outcome, finding in bugs:
        buggy = get_subject(name)
        t0 = time.perf_counter()
        r = run_cell(buggy, cell, backend=backend, config=config)
        twin_subject = correct_twin(buggy, registry)
        twin = run_cell(twin_subject, cell, backend=backend, config=config)
        ok, passed = (r.outcome, r.finding) == (outcome, finding), twin.passed and twin.outcome != "skipped"
        caught, honoured = caught + ok, honoured + passed
        print(f"{name:36s} {cell:20s} {'caught' if ok else 'MISSED'} ({r.outcome}/{r.finding}); "
              f"{twin_subject.name}: {'honoured' if passed else twin.outcome} "
              f"{time.perf_counter() - t0:6.2f} s", flush=True)
        if not passed:
            print(f"    twin: {twin.message}", flush=True)
    print(f"fp8 zoo: caught {caught}/{len(bugs)}, twins honoured {honoured}/{len(bugs)}", flush=True)
    return caught, honoured, len(bugs)


def accumulation(torch, triton, tl, device: str) -> None:
    from triton_conformance.oracles.tolerance import default_bound

    @triton.jit
    def fp8_dot_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
        # One BLOCK_M x BLOCK_N tile of c = a @ b for contiguous a (BLOCK_M, K) and b (K, BLOCK_N).
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for start in range(0, K, BLOCK_K):
            offs_k = start + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
            b = tl.load(b_ptr + offs_k[:, None] * BLOCK_N + offs_n[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + offs_m[:, None] * BLOCK_N + offs_n[None, :], acc)

    M = N = 64
    gen = torch.Generator(device="cpu").manual_seed(0)
    # Several K: rounding to nearest grows like sqrt(K); an accumulator that truncates grows like K.
    for K in (128, 512, 1024, 2048, 4096, 8192):
        worst = 0.0
        for _ in range(4):
            a = torch.randn(M, K, generator=gen).abs().to(torch.float8_e4m3fn)  # one sign: no cancellation
            b = torch.randn(K, N, generator=gen).abs().to(torch.float8_e4m3fn)
            c = torch.empty(M, N, dtype=torch.float32, device=device)
            fp8_dot_kernel[(1,)](a.to(device), b.to(device), c, K, BLOCK_M=M, BLOCK_N=N, BLOCK_K=128)
            ref = a.double() @ b.double()
            worst = max(worst, float(((c.cpu().double() - ref).abs() / ref).max()))
        w = max(worst, 1e-300)
        # One sign: |ref| is the terms' magnitude, so the rule's rtol is what it allows here.
        allowed = default_bound(out_dtype="float32", reduction=K, fp8_fast_accumulation=True).rtol
        print(f"fp8 tl.dot K={K}: worst relative error {worst:.3g} = 2^{math.log2(w):.1f}; "
              f"per sqrt(K): 2^{math.log2(w / math.sqrt(K)):.1f}; per K: 2^{math.log2(w / K):.1f}; "
              f"the fast-accumulation rule allows {allowed:.3g}: {'holds' if worst <= allowed else 'FAILS'} "
              f"({allowed / w:.1f}x)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("interpreter", "cuda"))
    parser.add_argument("--profile", default="ci")
    args = parser.parse_args()
    from triton_conformance.conformance.backend import select_device

    device = select_device(args.device)  # before any kernel is defined (TRITON_INTERPRET)
    if device == "cpu" or args.device == "interpreter":
        from triton_conformance import compat

        compat.install()
    import torch
    import triton
    import triton.language as tl

    where = "cuda" if args.device == "cuda" else "cpu"
    print(f"torch {torch.__version__}, triton {triton.__version__}, device {args.device}", flush=True)
    casts(torch, triton, where)
    caught, honoured, total = zoo(device, args.profile)
    try:
        accumulation(torch, triton, tl, where)
    except Exception as exc:  # noqa: BLE001 - a figure we could not take is said, not fatal
        print(f"fp8 tl.dot: could not run ({type(exc).__name__}: {exc})", flush=True)
    return 0 if caught == honoured == total else 1


if __name__ == "__main__":
    sys.exit(main())
