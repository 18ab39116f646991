"""The held language patch changes no bit: every subject's launcher, with and without it, in turn.

Usage (from the repository root, on the interpreter)::

    python bench/held_patch_bits.py [--modules kernels_under_test.softmax,...] [--examples 4] [--rounds 2]

Draws ``--examples`` specs a subject (derandomized, ``layout:contiguous``'s strategy defaults), builds
their inputs as the battery does (``replay.example_tensors``) and calls the launcher for each, in
rounds after an untimed warm-up pass: every example without :func:`compat.held_language_patch`, then every
example inside one.  Each output is compared byte for byte with the warm-up's (an exception by its type and text);
it prints the subjects, launches and differences, and the CPU seconds of each mode by round (A B A B
in one process).  Exit status 1 when any output differs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import statistics
import sys
import time


def _draw(contract, count: int) -> list:
    from hypothesis import HealthCheck, given, settings

    from triton_conformance.strategies import specs

    drawn: list = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(specs(contract, max_elements=4096))
    def collect(spec) -> None:
        drawn.append(spec)

    collect()
    return drawn[:count]


def _bits(value):
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach()
        return (str(t.dtype), tuple(t.shape), bytes(t.contiguous().view(torch.uint8).reshape(-1).numpy()))
    if isinstance(value, (tuple, list)):
        return tuple(_bits(v) for v in value)
    return repr(value)


def _run(subject, spec):
    from triton_conformance.conformance.battery.launching import launch, outputs_of
    from triton_conformance.conformance.replay import example_tensors

    tensors = example_tensors(subject, "layout:contiguous", spec)
    try:
        raw = launch(subject, tensors.inputs, tensors.scalars, seed=spec.seed, dims=spec.dims)
        return _bits(outputs_of(subject, raw, tensors.inputs))
    except Exception as exc:  # noqa: BLE001 - an example the launcher refuses is compared by what it raised
        return f"{type(exc).__name__}: {exc}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modules", default="", help="subject modules, comma-separated [all of kernels_under_test]")
    parser.add_argument("--examples", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, os.getcwd())
    from triton_conformance import compat
    from triton_conformance.conformance.interpreter_layer import install_compat
    from triton_conformance.model.subject import registry

    install_compat()
    names = args.modules.split(",") if args.modules else [
        f"kernels_under_test.{m.name}" for m in pkgutil.iter_modules(importlib.import_module("kernels_under_test").__path__)]
    for name in names:
        importlib.import_module(name)
    cases = [(s, spec) for s in registry for spec in _draw(s.contract, args.examples)]
    first = {i: _run(s, spec) for i, (s, spec) in enumerate(cases)}  # a warm-up pass, unheld and untimed
    seconds: dict[str, list[float]] = {"unheld": [], "held": []}
    differ = 0
    for _ in range(args.rounds):
        for mode in ("unheld", "held"):
            start = time.process_time()
            with compat.held_language_patch() if mode == "held" else contextlib.nullcontext():
                outs = [_run(s, spec) for s, spec in cases]
            seconds[mode].append(time.process_time() - start)
            for i, out in enumerate(outs):
                if first[i] != out:
                    differ += 1
                    print(f"differs: {cases[i][0].name} {cases[i][1]} ({mode})")
    subjects = len({s.name for s, _ in cases})
    print(f"{subjects} subjects, {len(cases)} examples x {1 + 2 * args.rounds} passes; {differ} outputs differ")
    for mode, times in seconds.items():
        print(f"{mode}: CPU s by round {', '.join(f'{t:.2f}' for t in times)}; median {statistics.median(times):.2f}")
    print(f"held / unheld: {statistics.median(seconds['held']) / statistics.median(seconds['unheld']):.3f}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
