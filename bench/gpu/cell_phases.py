"""Where a cell's time goes outside its examples: set-up, the time between examples, tear-down.

    python bench/gpu/cell_phases.py --device cuda --profile nightly --seed 47 SUBJECT...

Runs each subject's cells in this process, in order (``run_cell`` with an
observer, as a cell worker runs them), and splits each cell's wall time into:

- *set-up*: from the call to its first example's start (scopes, the judge,
  the allowance, the search's first draw);
- *examples*: the examples' own time, as the engine measures it (build, launch,
  oracle, judge; compiles included);
- *between*: the rest while examples run (Hypothesis's generation, shrinking
  bookkeeping, steering into compiled classes);
- *tear-down*: from the last example's end to the cell's result.

It prints the sums by cell kind and the cells with the most time outside their
examples.  One process, no other workers: a lower bound of what each costs in
the nightly's twelve.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import sys
import time

from triton_conformance.conformance.backend import current_backend, select_device


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("subjects", nargs="+")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--profile", default="nightly")
    parser.add_argument("--seed", type=int, default=47)
    args = parser.parse_args(argv)
    device = select_device(args.device)
    if device == "interpreter":
        from triton_conformance.conformance.interpreter_layer import install_compat

        install_compat(None)
    from triton_conformance.conformance.kinds import cells_for
    from triton_conformance.conformance.observe import Observer
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config
    from triton_conformance.model.subject import get_subject, registry

    sys.path.insert(0, ".")
    for module in importlib.import_module("conftest").KERNEL_MODULES:  # the repo's subjects, as pytest loads them
        importlib.import_module(module)

    class Phases(Observer):
        def __init__(self) -> None:
            self.first: float | None = None
            self.last: float | None = None
            self.inside = 0.0
            self.count = 0

        def example_started(self, subject, cell, spec) -> None:  # noqa: ANN001
            if self.first is None:
                self.first = time.perf_counter()

        def example_finished(self, subject, cell, spec, verdict, seconds) -> None:  # noqa: ANN001
            self.inside += seconds
            self.count += 1
            self.last = time.perf_counter()

    backend = current_backend(device)
    config = run_config(device=device, profile=args.profile, seed=args.seed)
    known = {s.name for s in registry}
    by_kind: dict[str, list[float]] = collections.defaultdict(lambda: [0.0] * 6)
    rows = []
    for name in args.subjects:
        if name not in known:
            raise SystemExit(f"subject {name!r}: not declared; known: {sorted(known)}")
        subject = get_subject(name)
        for cell in cells_for(subject):
            phases = Phases()
            start = time.perf_counter()
            result = run_cell(subject, cell, backend=backend, config=config, observer=phases)
            end = time.perf_counter()
            if result.outcome == "skipped" and phases.first is None:
                continue
            first = phases.first or end
            last = phases.last or end
            setup, teardown = first - start, end - last
            between = max(0.0, (last - first) - phases.inside)
            kind = cell.split(":")[0]
            sums = by_kind[kind]
            for i, value in enumerate((1, end - start, setup, phases.inside, between, teardown)):
                sums[i] += value
            rows.append((setup + between + teardown, f"{name}[{cell}]", end - start, setup, phases.inside, between,
                         teardown, phases.count, result.compiles or 0))
    print(f"{'kind':<14}{'cells':>6}{'wall':>9}{'set-up':>9}{'examples':>10}{'between':>9}{'tear-down':>10}  (s)")
    total = [0.0] * 6
    for kind, sums in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        total = [a + b for a, b in zip(total, sums)]
        print(f"{kind:<14}{int(sums[0]):>6}" + "".join(f"{v:>9.2f}" if i != 3 else f"{v:>10.2f}"
                                                       for i, v in enumerate(sums[1:], 1)))
    print(f"{'all':<14}{int(total[0]):>6}" + "".join(f"{v:>9.2f}" if i != 3 else f"{v:>10.2f}"
                                                    for i, v in enumerate(total[1:], 1)))
    print("\ncells with the most time outside their examples (outside, wall, set-up, examples, between, "
          "tear-down, examples run, compiles):")
    for row in sorted(rows, reverse=True)[:15]:
        print(f"  {row[1]:<48} {row[0]:6.2f} {row[2]:6.2f} {row[3]:6.2f} {row[4]:6.2f} {row[5]:6.2f} {row[6]:6.2f}"
              f" {row[7]:4d} {row[8]:3d}")


if __name__ == "__main__":
    main(sys.argv[1:])
