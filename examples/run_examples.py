"""Run the conformance battery in each example folder (or the ones named), one CLI run per folder.

    python examples/run_examples.py                    # every folder below
    python examples/run_examples.py lightning_attn -n 2
Each folder writes its own conformance-results/results.json and results.html.
Extra arguments go to `triton-conformance run` (default: --device interpreter --profile ci -n 2).
Exit status: the worst of the runs.
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = ("liger_kernel", "fla_core", "lightning_attn", "flag_gems", "triton_tutorials")


def missing(name):
    """The tutorials a folder lacks (the Triton tutorials' sources are upstream's code, put in place by hand),
    and how many it declares."""
    if name != "triton_tutorials":
        return [], 0
    sys.path.insert(0, os.path.join(HERE, name))
    try:
        from conftest import SUBJECTS, present
    finally:
        sys.path.pop(0)
    return [SUBJECTS[m] for m in SUBJECTS if m not in present()], len(SUBJECTS)


def main(argv):
    names = [a for a in argv if a in EXAMPLES] or list(EXAMPLES)
    extra = [a for a in argv if a not in EXAMPLES] or ["-n", "2"]
    worst = 0
    for name in names:
        lacking, declared = missing(name)
        if lacking:
            print(f"== examples/{name}: sources/ lacks {', '.join(lacking)} (run {name}/get_tutorials.py "
                  "--git <a clone of triton-lang/triton> --ref <tag>): left out", flush=True)
            if len(lacking) == declared:
                continue
        cmd = [sys.executable, "-m", "triton_conformance.cli", "run", "--device", "interpreter",
               "--profile", "ci", *extra]
        print(f"== examples/{name}: {' '.join(cmd[1:])}", flush=True)
        start = time.monotonic()
        rc = subprocess.call(cmd, cwd=os.path.join(HERE, name))
        print(f"== examples/{name}: exit {rc} in {time.monotonic() - start:.0f} s", flush=True)
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
