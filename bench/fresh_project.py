"""torch's own F.rms_norm and F.layer_norm, forward and backward, declared as a new user would, in a fresh project.

    python bench/fresh_project.py --seeds 20 [--profile nightly] [-n 1] [--keep DIR]

Issue 28's first finding came from a user's own project: the default compat
layer broke an import of the magnitude pass, the second stage silently kept
the plain bound, and torch's own normalisation backwards failed.  This writes a
project folder outside the repository (two subjects with the README's generic
declaration: fp16, bf16 and fp32, ``layouts="any"``, ``reduces="N"``,
``backward=True``, no ``accumulate=`` and no ``Tolerance``; a conftest naming
the module), runs ``triton-conformance run --device interpreter`` there at
fresh seeds of the ``nightly`` profile, each from a clean environment with
only this checkout on ``PYTHONPATH``, and counts failing cells, each printed
with the seed that replays it and its precision verdict.  A failure is
*explained* when the verdict says the op achieved the precision of
intermediates in its input dtype (torch's fp16 and bf16 kernels round some
intermediates there, where the generic declaration claims fp32: the finding
then says to declare ``accumulate=``).  Exits 1 if any failure is not
explained.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSING = ("honoured", "rejected", "accepted", "skipped")

SUBJECTS = '''
import torch.nn.functional as F

from triton_conformance import Dim, Tensor, subject

DTYPES = ("float16", "bfloat16", "float32")
X = Tensor(("M", "N"), dtypes=DTYPES, layouts="any")
ROW = Tensor(("N",), dtypes=DTYPES, layouts="any", same_dtype_as="x")
DIMS = {"M": Dim(1, 64), "N": Dim(1, 4096)}


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, 1e-5)


def rms_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, 1e-6)


@subject(inputs={"x": X, "weight": ROW, "bias": ROW}, dims=DIMS, oracle=layer_norm, reduces="N",
         backward=True, family="norms")
def torch_layer_norm(x, weight, bias):
    return layer_norm(x, weight, bias)


@subject(inputs={"x": X, "weight": ROW}, dims=DIMS, oracle=rms_norm, reduces="N", backward=True,
         family="norms")
def torch_rms_norm(x, weight):
    return rms_norm(x, weight)
'''

CONFTEST = '''
def pytest_conformance_modules(config):
    return ["norm_subjects"]
'''


def explained(result: dict) -> bool:
    """The cell failed its claimed accumulation's bound but is within the bound for input-dtype intermediates."""
    precision = (result.get("details") or {}).get("precision")
    return isinstance(precision, dict) and precision.get("achieved") == "input-dtype"


def write_project(folder: str) -> None:
    for name, text in (("norm_subjects.py", SUBJECTS), ("conftest.py", CONFTEST)):
        with open(os.path.join(folder, name), "w") as f:
            f.write(textwrap.dedent(text))


def run_seed(folder: str, seed: int, profile: str, workers: int) -> tuple[dict, float]:
    results = os.path.join(folder, f"results-{seed}.json")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": folder, "PYTHONPATH": ROOT}
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "triton_conformance.cli", "run", "--device", "interpreter",
                          "--profile", profile, "--seed", str(seed), "--fresh", "-n", str(workers),
                          "--history", "none", "--results", results],
                         cwd=folder, env=env, capture_output=True, text=True)
    if not os.path.exists(results):
        sys.exit(f"seed {seed}: no results (exit {run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-2000:]}")
    with open(results) as f:
        return json.load(f), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--profile", default="nightly")
    parser.add_argument("-n", type=int, default=1, help="xdist workers per run [1]")
    parser.add_argument("--keep", help="write the project here (kept) instead of a temporary folder")
    args = parser.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="fresh-project-")
    os.makedirs(folder, exist_ok=True)
    write_project(folder)
    rng = random.SystemRandom()
    failing, cells, compat = [], 0, set()
    for _ in range(args.seeds):
        seed = rng.randrange(2**32)
        doc, seconds = run_seed(folder, seed, args.profile, args.n)
        compat.add(bool(doc["environment"].get("compat")))
        bad = [r for r in doc["results"] if r["outcome"] not in PASSING]
        cells += len(doc["results"])
        failing += [(seed, r) for r in bad]
        print(f"seed {seed:>10}: {len(doc['results'])} cells, {len(bad)} failing "
              f"({sum(map(explained, bad))} explained), {seconds:.0f} s", flush=True)
        for r in bad:
            print(f"  {'explained' if explained(r) else 'NOT EXPLAINED'}: {r['subject']}[{r['cell']}] {r['outcome']} "
                  f"({r.get('finding')}): {r['message'][:240]}")
    unexplained = sum(1 for _, r in failing if not explained(r))
    print(f"{args.seeds} seeds ({args.profile}), {cells} cells, {len(failing)} failing, {unexplained} not explained "
          f"by a precision verdict; compat layer installed: {sorted(compat)}; project {folder}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    raise SystemExit(main())
