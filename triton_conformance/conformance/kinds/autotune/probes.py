"""The example runners of the autotune cells: a pinned or benchmarked launch, and the order and key probes.

Each runner is the one search's :class:`~...search.engine.ExampleRunner`;
the :class:`~.tuning.Tuning` hooks say which config runs.

- :class:`TunedExamples`: the forward battery on the tuned launcher, its cache
  cleared first (a config pinned, or every survivor benchmarked first);
- the **order** probe: the tuning benchmark in the pruned order and reversed,
  the same winner both times: the final outputs must agree bit for bit (and be right);
- the **key** probe: a shape with one dim made small is tuned first, each of
  its survivors chosen in turn; then the drawn shape runs with the tuner's cache
  kept.  Where the key (``key=[...]``) does not cover that dim, the cached choice
  is reused, and must still be right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from triton_conformance.conformance.battery.forward import run_example
from triton_conformance.conformance.battery.launching import launch, outputs_of
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.kinds.autotune.tuning import Tuning
from triton_conformance.conformance.results import counterexample
from triton_conformance.conformance.search.discards import ExampleDiscarded
from triton_conformance.model.outcomes import Counterexample, Finding
from triton_conformance.model.spec import Spec
from triton_conformance.strategies._internal.tensors import build_inputs

__all__ = ["TunedExamples", "ProbeExamples", "order_probe", "key_probe"]


@dataclass
class TunedExamples:
    """Each example the forward battery on the tuned launcher (whatever the tuning's policy runs)."""

    context: Any
    tuning: Tuning
    inside_only: ClassVar[bool] = False

    def __call__(self, spec: Spec) -> Finding | str:
        c = self.context
        return run_example(self.tuning.wrap(c.subject), spec, c.backend, c.judge, allowance=c.allowance)

    def counterexample(self, spec: Spec) -> Counterexample:
        return counterexample(self.context.subject, spec)


@dataclass
class ProbeExamples:
    """Each example one probe of the tuning (:func:`order_probe`, :func:`key_probe`), inside the contract."""

    context: Any
    tuning: Tuning
    probe: Callable[[Any, Tuning, Spec], Finding | None]
    inside_only: ClassVar[bool] = True

    def __call__(self, spec: Spec) -> Finding | str:
        found = self.probe(self.context, self.tuning, spec)
        return "honoured" if found is None else found

    def counterexample(self, spec: Spec) -> Counterexample:
        return counterexample(self.context.subject, spec)


def _launch_outputs(subject: Any, spec: Spec, backend: Any) -> tuple[Any, dict, tuple]:
    """Build ``spec``'s inputs (the nan sentinel) and call the launcher once: (inputs, before, outputs)."""
    built = build_inputs(subject.contract, spec, sentinel="nan", device=backend.device)
    before = {n: built.views[n].clone() for n in subject.contract.inplace}
    raw = launch(subject, built.views, spec.scalars)
    outputs = tuple(o.detach().clone() if hasattr(o, "detach") else o
                    for o in outputs_of(subject, raw, built.views))
    backend.synchronize()
    return built, before, outputs


def _same_bits(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(
            torch.nan_to_num(a.float(), nan=7.25), torch.nan_to_num(b.float(), nan=7.25))) and bool(
            torch.equal(a.float().isnan(), b.float().isnan()))
    return a == b


def order_probe(context: Any, tuning: Tuning, spec: Spec) -> Finding | None:
    """The benchmark in both orders: the same bits both times, and right."""
    subject = tuning.wrap(context.subject)
    tuning.policy = "bench"
    runs = {}
    for order in ("forward", "reversed"):
        tuning.order = order
        try:
            built, before, outputs = _launch_outputs(subject, spec, context.backend)
        except ExampleDiscarded:
            raise
        except Exception as exc:  # noqa: BLE001 - the kernel's own error, in one order
            return Finding("crash", "exception", f"with the benchmark run {order}: {type(exc).__name__}: {exc}")
        benched = {t.base_fn.__name__: tuning.benchmarked.get(id(t)) for t in tuning.tuners}
        runs[order] = (built, before, outputs, benched)
    (_, _, first, b1), (built, before, second, b2) = runs["forward"], runs["reversed"]
    differ = [i for i, (a, b) in enumerate(zip(first, second)) if not _same_bits(a, b)]
    if differ and context.subject.contract.deterministic:
        i = differ[0]
        a, b = first[i], second[i]
        diff = (a.double() - b.double()).abs().nan_to_num(nan=float("inf")) if isinstance(a, torch.Tensor) else None
        return Finding("wrong", "config-order-dependent",
                       f"output {i} differs when the tuning benchmark runs its configs in another order (the same "
                       f"winner, {tuning.ran}): benchmarked {b1} then {b2}; max |difference| "
                       f"{float(diff.max()) if diff is not None and diff.numel() else 'n/a'}",
                       {"orders": {"forward": b1, "reversed": b2}})
    wrong = context.judge.compare({**built.views, **before}, spec.dims, spec.dtypes, spec.scalars, second)
    if wrong is not None:
        return replace(wrong, message=f"with the benchmark run in reverse ({b2}): {wrong.message}")
    return None


def _small(contract: Any, sym: str, n: int) -> int | None:
    d = contract.dims[sym]
    small = max(d.min, 1)
    return small if small != n else None


def key_probe(context: Any, tuning: Tuning, spec: Spec) -> Finding | None:
    """Each survivor chosen at a shape with one dim made small, then ``spec`` run with the cache kept."""
    contract = context.subject.contract
    subject = tuning.wrap(context.subject)
    for sym in sorted(spec.dims, key=lambda s: -spec.dims[s]):
        small = _small(contract, sym, spec.dims[sym])
        if small is None:
            continue
        prime = replace(spec, dims={**spec.dims, sym: small})
        if expectation(contract, prime).kind != "honour":
            continue
        choice = 0
        while True:
            tuning.policy, tuning.choice, tuning.clear_cache = "choose", choice, True
            tuning.survivors.clear()
            try:
                _launch_outputs(subject, prime, context.backend)
            except ExampleDiscarded:
                raise
            except Exception:  # noqa: BLE001 - the priming shape's own failure is another cell's finding
                break
            if not tuning.survivors:
                break  # the launcher ran no tuner at this shape (a size it handles otherwise): nothing cached
            chosen = dict(tuning.ran)
            survivors = {k: list(v) for k, v in tuning.survivors.items()}
            tuning.policy, tuning.clear_cache = "pin", False
            tuning.pins = {}
            tuned = tuning.tuned
            try:
                verdict = run_example(subject, spec, context.backend, context.judge, allowance=context.allowance)
            finally:
                tuning.clear_cache = True
            reused = tuning.tuned == tuned
            if isinstance(verdict, Finding) and reused:
                key = {t.base_fn.__name__: list(t.keys) for t in tuning.tuners}
                message = (f"tuned first at {prime.dims}, where {', '.join(chosen.values())} was chosen; then "
                           f"{spec.dims} tuned with the same key values ({sym} is not covered by key={key}), "
                           f"so the cached choice ran: {verdict.message}")
                return replace(verdict, message=message, details={
                    **verdict.details, "prime": prime.dims, "choice": choice, "cached_config": chosen, "key": key,
                    "uncovered_dim": sym})
            if isinstance(verdict, Finding):
                return replace(verdict, message=f"(tuned afresh) {verdict.message}")
            choice += 1
            if choice >= max(len(v) for v in survivors.values()):
                break
    return None
