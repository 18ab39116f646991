"""CPU seconds a counted unit costs in one program's loop of adds, loads or dots, by block size and dtype.

Usage (from the repository root)::

    python bench/interpreter_blocks.py [one|default]

``one`` (the default) runs numpy's OpenBLAS on one thread, as an interpreter cell does
(``conformance/search/blas_threads.py``); ``default`` leaves it as the process started it.
Each line: CPU time an iteration (the best of 3 launches of 200 iterations), the units the
meter charged an iteration, and their ratio.  docs/benchmarks.md has the figures.
"""

import contextlib
import os
import sys
import time

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from triton_conformance import compat  # noqa: E402
from triton_conformance.conformance.search.blas_threads import one_blas_thread  # noqa: E402
from triton_conformance.conformance.search.interpreter_cost import metering_cost  # noqa: E402

ITERS = 200


@triton.jit
def dot_loop(a_ptr, b_ptr, c_ptr, ITERS, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    for _ in range(ITERS):
        acc += tl.dot(a, b, out_dtype=tl.float32, allow_tf32=False)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def load_loop(x_ptr, o_ptr, ITERS, BM: tl.constexpr, BN: tl.constexpr):
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(ITERS):
        acc += tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    tl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def add_loop(x_ptr, o_ptr, ITERS, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(x_ptr + r)
    acc = x
    for _ in range(ITERS):
        acc = acc + x
    tl.store(o_ptr + r, acc)


def measure(what: str, launch) -> None:  # noqa: ANN001
    best, units = None, 0
    for _ in range(3):
        with metering_cost(pool=1 << 60, share=1 << 56, examples=1) as meter:
            meter.start_example()
            started = time.process_time()
            launch()
            seconds = time.process_time() - started
            units = meter.spent
        best = seconds if best is None else min(best, seconds)
    print(f"{what:28s} {best / ITERS * 1e6:8.1f} us/iter {units / ITERS:8.1f} units/iter "
          f"{best / units * 1e6:6.2f} us/unit", flush=True)


def main(argv: list[str]) -> int:
    compat.install()
    threads = one_blas_thread() if (argv[:1] or ["one"])[0] == "one" else contextlib.nullcontext()
    with threads:
        for n in (1024, 8192, 32768):
            x, o = torch.rand(n), torch.empty(n)
            measure(f"add {n}", lambda: add_loop[(1,)](x, o, ITERS, B=n))  # noqa: B023 - called at once
        for bm, bn in ((16, 16), (64, 64), (64, 128), (128, 128)):
            x, o = torch.rand(bm, bn), torch.empty(bm, bn)
            measure(f"load {bm}x{bn}", lambda: load_loop[(1,)](x, o, ITERS, BM=bm, BN=bn))  # noqa: B023
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for bm, bn, bk in ((16, 16, 16), (64, 64, 64), (64, 128, 64), (64, 128, 128), (128, 128, 128),
                               (128, 256, 64)):
                a, b, c = torch.rand(bm, bk).to(dtype), torch.rand(bk, bn).to(dtype), torch.empty(bm, bn)
                measure(f"dot {str(dtype)[6:]} {bm}x{bn}x{bk}",
                        lambda: dot_loop[(1,)](a, b, c, ITERS, BM=bm, BN=bn, BK=bk))  # noqa: B023
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
