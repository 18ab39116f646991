"""The flake rate the history measures for the stochastic cells, against their declared false-positive rate.

    python bench/history_flake_rate.py [--runs 50] [--minutes 10] [--history PATH]

Records up to ``--runs`` runs (or as many as fit in ``--minutes``) of only the stochastic cells of the
stochastic kernels under test, each at a fresh seed, on the interpreter, in one history store at one commit.
Then prints, from ``history flaky --all -n 0``, each cell's flips (failing runs, when most runs pass), its
observed rate, its declared false-positive rate (the model's alpha split by Bonferroni, per cell), the
one-sided binomial p-value of the count under that rate and the level it is tested at (0.01 over the cells
tested), with the one-sided 95 % upper bound on the observed rate (3/N when no run failed): the claim holds
when no cell is flagged.  A correct kernel with alpha 1e-6 per subject run should fail no run.
``--runs 0`` records nothing and reports on the ``--history`` given (a store an earlier run filled).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SUBJECTS = {"relu_dropout": "kernels_under_test.dropout",
            "stochastic_round_bf16": "kernels_under_test.stochastic_rounding"}


def stochastic_cell_names() -> list[str]:
    os.environ["TRITON_INTERPRET"] = "1"
    from triton_conformance import compat

    compat.install(None)
    import importlib

    from triton_conformance.conformance.kinds.stochastic.plan import stochastic_cells
    from triton_conformance.model.subject import registry

    for module in SUBJECTS.values():
        importlib.import_module(module)
    return [f"{s.name}[{c}]" for s in registry if s.name in SUBJECTS for c in stochastic_cells(s.contract)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--history", default=None, help="the store [default: a temporary SQLite file]")
    args = parser.parse_args()
    history = args.history or os.path.join(tempfile.mkdtemp(), "history.sqlite")
    cells = stochastic_cell_names()
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("TRITON_INTERPRET", None)
    took, start = [], time.time()
    for i in range(args.runs):
        if took and time.time() - start + statistics.median(took) > args.minutes * 60:
            break
        seed = random.randrange(2**32)
        t = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            argv = [sys.executable, "-m", "triton_conformance.cli", "run", "--device", "interpreter", "--profile",
                    "dev", "--seed", str(seed), "--fresh", "--history", history, "--results", f"{tmp}/r.json",
                    *[f"--cell={c}" for c in cells]]
            code = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True).returncode
        took.append(time.time() - t)
        print(f"run {i + 1}: seed {seed}, exit {code}, {took[-1]:.1f} s", flush=True)
    if took:
        print(f"{len(took)} runs of {len(cells)} stochastic cells, median {statistics.median(took):.1f} s a run")
    out = subprocess.run([sys.executable, "-m", "triton_conformance.cli", "history", "flaky", "--all", "-n", "0",
                          "--history", history, "--json"], cwd=ROOT, env=env, capture_output=True, text=True)
    rows = json.loads(out.stdout)
    for r in rows:
        bound = 3 / r["runs"] if r["flips"] == 0 else None
        declared = r["false_positive_rate"]
        print(f"{r['cell']}: {r['flips']} of {r['runs']} runs flipped, observed rate {r['rate']:.3g}"
              + (f" (95 % upper bound {bound:.3g})" if bound is not None else "")
              + (f", declared false-positive rate {declared:.3g}" if declared is not None else ", no declared rate")
              + f", p-value {r['p_value']:.3g} against level {r['level']:.3g}"
              + (", FLAGGED" if r["flagged"] else ""))
    print(f"flagged: {sum(r['flagged'] for r in rows)} of {len(rows)} cells")


if __name__ == "__main__":
    main()
