"""The tf32 tolerance of flash attention, before and after its error scale P @ |V|, on CUDA.

Usage (from the repository root, on a machine with a GPU)::

    python bench/gpu/flash_tf32.py [--examples 300]

Runs the battery's example check on fp32 flash attention where the output can
cancel to almost nothing (one query, D = 1, N from 1000 to 2048 keys: the case
the H200 bug-finding run flagged) and on ordinary shapes, with the contract as
shipped and with its error scale removed (the bound then scales with |output|).
Prints how many examples each contract fails: a correct kernel must fail none,
and the zoo's flash bugs must still fail.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="cancelling examples (a third as many ordinary)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "interpreter"))
    args = parser.parse_args()
    if args.device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
    import kernels_under_test.flash_attention as fa
    import tests.zoo.zoo_flash_attention as zoo
    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.battery.forward import run_example
    from triton_conformance.conformance.kinds import judge_for
    from triton_conformance.model.outcomes import Finding
    from triton_conformance.model.spec import Spec

    backend = current_backend(args.device)
    rng = random.Random(0)
    shapes = {"cancelling (M=1, D=1)": lambda: {"B": 1, "M": 1, "N": rng.randint(1000, 2048), "D": 1},
              "ordinary": lambda: {"B": rng.randint(1, 2), "M": rng.choice([1, 17, 64, 129]),
                                   "N": rng.choice([16, 97, 256, 1447]), "D": rng.choice([16, 32, 64])}}
    subjects = [fa.flash_attention, zoo.zoo_flash_missing_rescale]
    for name, draw in shapes.items():
        specs = [Spec(dims=draw(), dtypes={"q": "float32", "k": "float32", "v": "float32"}, layouts={},
                      scalars={"sm_scale": rng.uniform(0.05, 1.0)}, seed=rng.randrange(2**31))
                 for _ in range(args.examples if name.startswith("cancel") else args.examples // 3)]
        for s in subjects:
            plain = replace(s, contract=replace(s.contract, error_scale=None))
            for label, subj in (("shipped (P @ |V|)", s), ("without error scale", plain)):
                judge = judge_for(subj, backend)  # as the battery judges it (tf32 tolerance on CUDA)
                failed = [sp for sp in specs if isinstance(run_example(subj, sp, backend, judge), Finding)]
                print(f"{s.name:<28} {name:<22} {label:<20} failed {len(failed):>4} of {len(specs)}"
                      + (f"  e.g. {failed[0].dims}" if failed else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
