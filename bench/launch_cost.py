"""What an interpreted launch costs beyond its kernel's work: CPU ms a launch of three small kernels.

Usage (from the root of the checkout to measure, on the interpreter; A B A B between checkouts)::

    python bench/launch_cost.py [--launches 300] [--rounds 3]

Under every compat shim, as a cell runs them: an empty kernel of six arguments on one program (all
that a launch costs besides its body), ``softmax`` on 4 x 16 (four programs) and ``add`` on 1000
elements, each launched ``--launches`` times in a row inside ``compat.held_language_patch()`` where
the checkout has it (a cell's launches run inside one), a round being one pass over the three.
Prints the median CPU ms a launch of each, over the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, os.getcwd())
    import torch
    import triton
    import triton.language as tl

    from triton_conformance import compat
    from triton_conformance.conformance.interpreter_layer import install_compat

    install_compat()
    from kernels_under_test.softmax import softmax
    from kernels_under_test.vector_add import add

    @triton.jit
    def empty_kernel(a_ptr, b_ptr, c_ptr, n, s1, s2, BLOCK: tl.constexpr):
        tl.program_id(0)

    a, b, c, x, y = torch.randn(4096), torch.randn(4096), torch.empty(4096), torch.randn(4, 16), torch.randn(1000)
    kernels = {"empty": lambda: empty_kernel[(1,)](a, b, c, 4096, 1, 1, BLOCK=64),
               "softmax 4x16": lambda: softmax(x), "add 1000": lambda: add(y, y)}
    held = getattr(compat, "held_language_patch", contextlib.nullcontext)
    for launch in kernels.values():  # rewrites, first specializations
        launch()
    ms: dict[str, list[float]] = {name: [] for name in kernels}
    for _ in range(args.rounds):
        for name, launch in kernels.items():
            with held():
                start = time.process_time()
                for _ in range(args.launches):
                    launch()
                ms[name].append((time.process_time() - start) / args.launches * 1e3)
    print("; ".join(f"{name}: {statistics.median(v):.3f} ms" for name, v in ms.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
