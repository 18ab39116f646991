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
EXAMPLES = ("liger_kernel", "fla_core", "lightning_attn", "flag_gems", "triton_tutorials", "serving_fp8")
FETCH_HINTS = {  # how a folder whose code is upstream's (kept out of the repository) gets it
    "triton_tutorials": "triton_tutorials/get_tutorials.py --git <a clone of triton-lang/triton> "
                        "--ref c147f0988de75b002a05945a3c82f2597d1ae23d",
    "serving_fp8": "serving_fp8/get_serving_kernels.py --vllm <clone or unpacked wheel> "
                   "--sglang <clone or unpacked wheel>",
}


def missing(name):
    """The upstream sources a folder lacks (the Triton tutorials' and the serving stacks' code is upstream's,
    put in place by its get_*.py script: its conftest's ``missing()``), and whether the rest still runs."""
    if name not in FETCH_HINTS:
        return [], True
    sys.path.insert(0, os.path.join(HERE, name))
    try:
        import conftest

        lacking, partial, declared = conftest.missing(), conftest.PARTIAL, len(conftest.SOURCES)
    finally:
        sys.path.pop(0)
        sys.modules.pop("conftest", None)
    return lacking, not lacking or (partial and len(lacking) < declared)


def main(argv):
    names = [a for a in argv if a in EXAMPLES] or list(EXAMPLES)
    extra = [a for a in argv if a not in EXAMPLES] or ["-n", "2"]
    worst = 0
    for name in names:
        lacking, runs = missing(name)
        if lacking:
            print(f"== examples/{name}: sources/ lacks {', '.join(lacking)} (run {FETCH_HINTS[name]}): left out",
                  flush=True)
            if not runs:
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
