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
EXAMPLES = ("liger_kernel", "fla_core", "lightning_attn", "flag_gems")


def main(argv):
    names = [a for a in argv if a in EXAMPLES] or list(EXAMPLES)
    extra = [a for a in argv if a not in EXAMPLES] or ["-n", "2"]
    worst = 0
    for name in names:
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
