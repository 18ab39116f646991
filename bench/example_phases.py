"""Where an example's time goes, outside the kernel: the Python cost of each phase, per example.

Runs searched cells of a subject whose launcher and oracle are plain torch
(a kernel that costs next to nothing), under cProfile, and attributes every
function's own time to a phase by the file it lives in; a builtin (a torch
op) is attributed to its callers in proportion to what each spent in it:

- ``hypothesis``: Hypothesis's engine (generation, mutation, bookkeeping);
- ``draw``: our strategies drawing the spec;
- ``build inputs``: the inputs embedded in sentinel storage;
- ``guards and poison``: guarded allocations, poison, the memory checks, the repeat protocol;
- ``launch``: calling the launcher: the kernel (the interpreter's work, or here the torch op itself);
- ``judge``: the oracle, the bound, the comparison;
- ``search and record``: the search loop, the allowance, the observer, the result.

    python -m bench.example_phases [--examples 200] [--batch 1] [--cells layout:contiguous,memory,...]

It prints ms of CPU per example for each phase and their sum; the figure the issue
asks for is the sum less ``launch`` (and less ``judge``'s oracle, which is
the subject's own torch code).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections import defaultdict

PHASES = (  # the first phase whose needle a file holds: the narrower needles first
    ("build inputs", ("strategies/_internal/tensors.py", "strategies/_internal/values.py")),
    ("draw", ("triton_conformance/strategies/",)),
    ("guards and poison", ("conformance/battery/memory.py", "conformance/battery/allocations.py",
                           "conformance/battery/checks.py")),
    ("launch", ("conformance/battery/launching.py", "conformance/harness.py", "/triton/", "kernels_under_test/",
                "triton_conformance/compat/", "bench/example_phases.py")),
    ("judge", ("conformance/judge.py", "conformance/rules.py", "triton_conformance/oracles/")),
    ("search and record", ("triton_conformance/conformance/", "triton_conformance/model/")),
    ("hypothesis", ("/hypothesis/",)),
)


def phase_of(filename: str) -> str | None:
    for phase, needles in PHASES:
        if any(n in filename for n in needles):
            return phase
    return None


def attribute(stats: pstats.Stats) -> dict[str, float]:
    """Seconds per phase: each function's own time to its file's phase; a function of no phase (a builtin,
    torch's Python) to its callers' phases, in proportion to the time each caller spent in it."""
    own: dict[tuple, float] = {}
    callers: dict[tuple, dict] = {}
    for func, (_, _, tt, _, calls) in stats.stats.items():
        own[func] = tt
        callers[func] = calls
    memo: dict[tuple, dict[str, float]] = {}

    def shares(func: tuple, depth: int = 0) -> dict[str, float]:
        """How the time spent in ``func`` splits over phases (fractions), through its callers if it has none."""
        phase = phase_of(func[0])
        if phase is not None:
            return {phase: 1.0}
        if func in memo or depth > 30:
            return memo.get(func, {"other": 1.0})
        memo[func] = {"other": 1.0}  # a recursion guard
        edges = callers.get(func) or {}
        total = sum(e[3] for e in edges.values()) or 0.0
        out: dict[str, float] = defaultdict(float)
        if total <= 0:
            out["other"] = 1.0
        else:
            for caller, edge in edges.items():
                for p, f in shares(caller, depth + 1).items():
                    out[p] += f * edge[3] / total
        memo[func] = dict(out)
        return memo[func]

    seconds: dict[str, float] = defaultdict(float)
    for func, tt in own.items():
        for p, f in shares(func).items():
            seconds[p] += tt * f
    return dict(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="examples per cell [200]")
    parser.add_argument("--batch", type=int, default=1, help="examples a Hypothesis test case draws [1]")
    parser.add_argument("--cells", default="layout:contiguous,layout:transposed,memory,determinism,shape:non-pow2")
    args = parser.parse_args()
    os.environ.setdefault("TRITON_INTERPRET", "1")

    from triton_conformance import Dim, Tensor, register
    from triton_conformance.conformance.backend import Backend
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    def double(x):
        return x * 2

    subject = register(double, name="phases_double", inputs={"x": Tensor(("M", "N"), layouts="any")},
                       dims={"M": Dim(1, 64), "N": Dim(1, 256)}, oracle=lambda x: x * 2)
    config = run_config(profile="ci", max_examples=args.examples, batch=args.batch)
    run_cell(subject, "layout:contiguous", backend=Backend(), config=run_config(profile="ci"))  # warm
    started, plain = time.process_time(), 0
    for cell in args.cells.split(","):  # the same cells unprofiled first: the real cost of an example
        plain += run_cell(subject, cell, backend=Backend(), config=config).examples
    plain_ms = 1000 * (time.process_time() - started) / max(1, plain)
    profile, examples = cProfile.Profile(), 0
    started = time.process_time()
    profile.enable()
    for cell in args.cells.split(","):
        examples += run_cell(subject, cell, backend=Backend(), config=config).examples
    profile.disable()
    cpu = time.process_time() - started
    seconds = attribute(pstats.Stats(profile))
    profiled = sum(seconds.values())
    print(f"{plain} examples unprofiled: {plain_ms:.2f} ms an example; {examples} under cProfile in {cpu:.2f} s of CPU "
          f"({1000 * cpu / examples:.2f} ms an example: its own cost inflates every figure)")
    print(f"  {'phase':20s} {'profiled':>10s} {'share':>7s} {'unprofiled':>11s} (the share of {plain_ms:.2f} ms)")
    for phase, _ in PHASES + (("other", ()),):
        s = seconds.get(phase, 0.0)
        print(f"  {phase:20s} {1000 * s / examples:7.3f} ms  {100 * s / profiled:5.1f} %  {plain_ms * s / profiled:7.3f} ms")
    outside = profiled - seconds.get("launch", 0.0)
    print(f"  {'all but launch':20s} {1000 * outside / examples:7.3f} ms  {100 * outside / profiled:5.1f} %  "
          f"{plain_ms * outside / profiled:7.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
