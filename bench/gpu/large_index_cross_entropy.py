"""The ``shape:large-index`` cell on CUDA for cross entropies whose int64 targets are tied to V (issue 22).

Usage (from the repository root, on a machine with a GPU)::

    python bench/gpu/large_index_cross_entropy.py [--out DIR] [--devices cuda,cpu]

On the H200 this cell of two buggy cross entropies ended as a bare traceback
(``crash``, finding ``harness-error``).  The int64 targets made every slot and
gap of the cell's arena four times the fp16 logits' (112 GiB), and what ran
after a misbehaving launch (the gaps' mask and index list, float64 copies)
found no memory left.  Each subject of ``large_index_ce_subjects.py`` runs in
its own child (``bench/gpu/large_index.py``'s), printing outcome, finding,
seconds and peak CUDA memory.

Expected: ``ce_rows`` honoured; ``ce_rows_int32`` a verdict (the wrapped loads
read the gap: wrong numbers, or unsafe); ``ce_grad_inplace_int32`` unsafe /
oob-write (its wrapped stores land in the gap before the logits); none a
harness error; peak memory about 28 GiB (the arena), not 112.  Exit status 1
otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from large_index import run_child  # noqa: E402

SUBJECTS = (("ce_rows", True), ("ce_rows_int32", False), ("ce_grad_inplace_int32", False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "large-index-ce-results")
    parser.add_argument("--devices", default="cuda", help="comma-separated: cuda (real tensors), cpu (emulated)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per child")
    args = parser.parse_args(argv)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))  # the children
    os.makedirs(args.out, exist_ok=True)
    rows, ok = [], True
    for device in [d.strip() for d in args.devices.split(",") if d.strip()]:
        for name, correct in SUBJECTS:
            row = run_child("large_index_ce_subjects", name, device, args.timeout)
            rows.append(row)
            print(f"{name:<24} {device:<5} {row['outcome']:<9} {row.get('finding') or '':<15} {row['seconds']:>8.2f} s"
                  f"  peak {row.get('peak_cuda_gib')} GiB  | {row['message'][:300]}", flush=True)
            passed = row["outcome"] in ("honoured", "rejected")
            ok &= passed == correct and row["outcome"] not in ("harness-error", "crash", "timeout")
    with open(os.path.join(args.out, "large_index_ce.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print("OK: every cell ended in a verdict, the correct kernel passes" if ok else "UNEXPECTED outcome, see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
