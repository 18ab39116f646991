"""The tolerance's calibration over torch's whole float OpInfo database, each op declared generically.

    python bench/opdb_calibration.py --list                       # which ops are declared, and why others are not
    python bench/opdb_calibration.py --seeds 1                    # every declared op, one fresh nightly seed
    python bench/opdb_calibration.py --minutes 50 --shard 1/2     # as many seeds as fit, half the ops
    python bench/opdb_calibration.py --minutes 30 --skip 120      # the ops a stopped run did not reach
    python bench/opdb_calibration.py --coverage                   # the aten ops without a magnitude rule, per op
    python bench/opdb_calibration.py --seed 123 --ops sinc --cells values:

``tests/calibration/`` declares a few torch ops by hand.  A tolerance is right
only when it holds for the op nobody declared by hand, so here every operation
of ``torch.testing._internal.common_methods_invocations.op_db`` whose sample
inputs are float tensors of rank 1 to 3 becomes a subject with one generic
declaration, the same for every op:

- its tensors (the sample's input and tensor arguments) are inputs, with the
  OpInfo's float dtypes (one dtype for all), ``layouts="any"`` (an op that
  takes strides and a storage offset, ``as_strided``, addresses a storage: it
  gets its inputs' elements as tensors that own theirs), and the OpInfo's
  domain as the first input's value range; its other arguments are fixed;
- its dims are the sample's distinct sizes (size 1 stays 1), each a ``Dim``
  whose range depends on the largest rank it appears in, among the inputs and
  the outputs, and starts at the smallest size the op runs at (1, or more
  where its fixed arguments need it: ``kthvalue``'s k); a dim the op cannot
  take at its largest is tied to the dim it can take it with (conv1d's kernel
  and input length) or bounded (slice_scatter's src, by the slice's end);
- the launcher is the op in the input dtype, the oracle the same op in float64;
  only the op's float outputs are compared, and of them what the OpInfo says is
  defined (its sample's ``output_process_fn_grad``: svd's vectors up to sign);
- the inputs the op writes into, by its aten schemas' ``Tensor(a!)`` annotations
  (a training batch norm's running statistics), declared ``inplace``: their
  contents after the call are outputs, and any other write is still a
  ``mutated-input``;
- a backward (every output backpropagated, each grad_output shaped as its output) where the
  OpInfo supports autograd in every declared dtype and the output's shape is
  made of the dims.

Nothing is tuned per op: no ``accumulate=``, no ``Tolerance``, no ``reduces=``.
An op whose declaration cannot be generic is left out with its reason (random
output, a shape fixed by its other arguments, values it needs that random draws
lack), and ``--list`` prints them.  Each failing cell is printed with its
precision verdict where the judge gives one and the line that replays it; the
summary counts operations, cells, failures, and the failures no precision
verdict explains.  Exits 1 if any cell failed.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PASSING = ("honoured", "rejected", "accepted", "skipped")

from opdb_declarations import declarations  # noqa: E402 - the declaration of one op, beside this script


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the declared ops and the others' reasons")
    parser.add_argument("--coverage", action="store_true",
                        help="print, per declared op, the aten ops forward and backward with no magnitude rule")
    parser.add_argument("--seeds", type=int, default=1, help="how many fresh seeds (default 1)")
    parser.add_argument("--seed", type=int, action="append", default=[], help="run this seed (repeatable)")
    parser.add_argument("--minutes", type=float, default=None, help="stop starting cells after this long")
    parser.add_argument("--profile", default="nightly")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--ops", default="", help="comma-separated op names (name or name.variant)")
    parser.add_argument("--cells", default="", help="comma-separated prefixes of cell names (e.g. grad:,values:)")
    parser.add_argument("--shard", default="1/1", help="K/N: every N-th declared op from the K-th")
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out the first N declared ops (resume a run that --minutes stopped)")
    args = parser.parse_args()
    try:
        k, n = (int(v) for v in args.shard.split("/"))
        assert 1 <= k <= n
    except (ValueError, AssertionError):
        parser.error(f"--shard={args.shard!r}: expected K/N with 1 <= K <= N")

    import torch

    decls = list(declarations(args.device, [w for w in args.ops.split(",") if w]))
    if args.skip < 0:
        parser.error(f"--skip={args.skip}: expected a count of ops, 0 or more")
    declared = [d for d in decls if d.skip is None][args.skip:][k - 1::n]
    skipped = collections.Counter(d.skip.split(" (")[0] for d in decls if d.skip is not None)
    print(f"{len(decls)} float ops of op_db considered, {len([d for d in decls if d.skip is None])} declared "
          f"(this shard: {len(declared)}); left out: " + ", ".join(f"{r} {c}" for r, c in skipped.most_common()))
    if args.list:
        for d in decls:
            print(f"  {d.label:45s} {'declared' if d.skip is None else d.skip}"
                  + (f"  dims {d.dim_max} dtypes {d.dtypes}" if d.skip is None else ""))
        return 0
    if not declared:
        parser.error(f"--ops={args.ops!r} declares no op")
    if args.coverage:
        return print_coverage(declared, torch)

    from triton_conformance.conformance.backend import Backend, current_backend
    from triton_conformance.conformance.kinds.base import cells_for
    from triton_conformance.conformance.runner import run_cell
    from triton_conformance.model.config import run_config

    subjects = [(d, d.register(torch)) for d in declared]
    prefixes = tuple(c for c in args.cells.split(",") if c)
    backend = current_backend("cuda") if args.device == "cuda" else Backend(name="interpreter")
    seeds = list(args.seed) or [random.SystemRandom().randrange(2**32) for _ in range(args.seeds)]
    start = time.perf_counter()
    cells, failures, verdicts, stopped, last = 0, [], collections.Counter(), False, subjects[0][0].label
    ops_run = set()
    for seed in seeds:
        config = run_config(profile=args.profile, seed=seed, device="cuda" if args.device == "cuda" else "interpreter")
        t0, failed_here = time.perf_counter(), 0
        for decl, subj in subjects:
            for cell in cells_for(subj):
                if prefixes and not cell.startswith(prefixes):
                    continue
                if args.minutes is not None and time.perf_counter() - start > args.minutes * 60:
                    stopped = True
                    break
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = run_cell(subj, cell, backend=backend, config=config)
                cells += 1
                ops_run.add(decl.label)
                last = decl.label
                if result.outcome in PASSING:
                    continue
                precision = (result.details or {}).get("precision")
                verdicts[_category(result, precision)] += 1
                failed_here += 1
                failures.append((seed, decl.label, cell, result, precision))
                print(f"  {decl.label}[{cell}] {result.outcome} ({result.finding}): {result.message[:300]}",
                      flush=True)
                print(f"    {_category(result, precision)}", flush=True)
                print(f"    replay: python bench/opdb_calibration.py --seed {seed} --ops {decl.label} "
                      f"--cells {cell}", flush=True)
            if stopped:
                break
        print(f"seed {seed:10d}: {failed_here} failing cells, {time.perf_counter() - t0:.0f} s", flush=True)
        if stopped:
            at = next(i for i, (d, _) in enumerate(subjects) if d.label == last)
            resume = f"--skip {args.skip + at}" if n == 1 else f"--skip {args.skip + k - 1 + at * n} (unsharded)"
            print(f"  (stopped at --minutes {args.minutes} in op {last}; the ops from it on: {resume})")
            break
    unexplained = sum(1 for *_, p in failures if not _explained(p))
    print(f"\n{len(ops_run)} operations, {cells} cells, {len(failures)} failing, {unexplained} not explained by a "
          f"precision verdict ({(time.perf_counter() - start) / 60:.1f} min)")
    for line, count in verdicts.most_common():
        print(f"  {count:5d}  {line}")
    return 1 if failures else 0


def print_coverage(declared, torch) -> int:
    """Per op: covered, or the aten ops with no magnitude rule (forward / backward); then the totals and
    the missing ops by how many ops reach them.  Exits 1 if any op is not covered."""
    missing, failed, covered = collections.Counter(), [], 0
    for decl in declared:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got = decl.coverage(torch)
            except Exception as exc:  # noqa: BLE001 - the survey's own inputs: said, not hidden
                failed.append(decl.label)
                print(f"  {decl.label:40s} survey failed: {type(exc).__name__}: {str(exc)[:120]}")
                continue
        if got.complete:
            covered += 1
            print(f"  {decl.label:40s} covered")
            continue
        parts = [f"forward {', '.join(got.forward)}" if got.forward else "",
                 f"backward {', '.join(got.backward)}" if got.backward else "",
                 f"failed: {got.failure}" if got.failure else ""]
        print(f"  {decl.label:40s} " + "; ".join(p for p in parts if p))
        missing.update(set(got.forward) | set(got.backward))
        if got.failure:
            failed.append(decl.label)
    print(f"\n{len(declared)} ops: {covered} covered forward and backward, "
          f"{len(declared) - covered - len(failed)} reach an aten op with no rule, {len(failed)} failed under tracking")
    for name, count in missing.most_common():
        print(f"  {count:4d} ops reach {name}")
    return 0 if covered == len(declared) else 1


def _explained(precision) -> bool:
    """A precision verdict explains a failing cell where the op is within the bound for intermediates in
    its input dtype (torch computes there, where the generic declaration claims fp32)."""
    return isinstance(precision, dict) and precision.get("achieved") == "input-dtype"


def _category(result, precision) -> str:
    """What a failing cell is: its precision verdict, or why it has none (the magnitudes the pass could not
    compute, by the op it lacks a rule for; otherwise its outcome and finding)."""
    if isinstance(precision, dict):
        line = ", ".join(f"{k}={v}" for k, v in sorted(precision.items()) if k in ("achieved", "claimed"))
        return ("explained: " if _explained(precision) else "NOT explained: ") + line
    unavailable = (result.details or {}).get("magnitudes_unavailable")
    if unavailable:
        return f"NOT explained: magnitudes unavailable ({unavailable})"
    return f"NOT explained: {result.outcome} ({result.finding})"


if __name__ == "__main__":
    sys.exit(main())
