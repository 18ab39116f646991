"""The example runners of the autotune cells: a pinned or benchmarked launch, and the order and key probes.

Each runner is the one search's :class:`~...search.engine.ExampleRunner`;
the :class:`~.tuning.Tuning` hooks say which config runs.

- :class:`TunedExamples`: the forward battery on the tuned launcher, its cache
  cleared first (a config pinned, or every survivor benchmarked first), then,
  for a subject that declares a backward, the backward battery under the same
  tuning: a backward's tuned kernels run each config as the forward's do;
- the **order** probe: the tuning benchmark in the pruned order and reversed,
  the same winner both times: the final outputs must agree bit for bit (and be right);
- the **key** probe: for each dim, the shape is tuned first with that dim at
  other sizes (:func:`prime_sizes`: its neighbours, the multiple of 16 below,
  half, the minimum, double), and each config that survives the kernel's
  pruning there but not at the drawn shape is chosen in turn; then the drawn
  shape runs with the tuner's cache kept.  Where the key (``key=[...]``) does
  not tell the two sizes apart, the cached choice is reused where the kernel's
  own pruning would have dropped it, and must still be right.  (A config the
  pruning keeps at the drawn shape runs there in the config cells.)  Sizes
  other than the minimum matter: a config the pruning keeps only at some sizes
  (a split-K that must divide K) is cached only there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from triton_conformance.conformance.battery.backward import run_gradient_example
from triton_conformance.conformance.battery.checks import Run, differing_outputs
from triton_conformance.conformance.battery.forward import call_example, run_example
from triton_conformance.conformance.battery.runners import BackwardExamples
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.kinds.autotune.tuning import Tuning
from triton_conformance.conformance.results import counterexample
from triton_conformance.conformance.search.allowance import Allowance
from triton_conformance.conformance.discards import ExampleDiscarded
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.model.outcomes import Counterexample, Finding
from triton_conformance.model.spec import Spec

__all__ = ["TunedExamples", "ProbeExamples", "order_probe", "key_probe", "prime_sizes"]


@dataclass
class TunedExamples:
    """Each example the forward battery on the tuned launcher (whatever the tuning's policy runs), then, for
    a subject that declares a backward and a spec inside its contract, the backward battery too."""

    context: CellContext
    tuning: Tuning
    inside_only: ClassVar[bool] = False

    def __call__(self, spec: Spec) -> Finding | str:
        c = self.context
        subject = self.tuning.wrap(c.subject)
        verdict = run_example(subject, spec, c.backend, c.judge, allowance=c.allowance)
        if (c.subject.contract.backward is None or isinstance(verdict, Finding)
                or expectation(c.subject.contract, spec).kind != "honour"):
            return verdict
        return run_gradient_example(subject, spec, c.backend, c.judge, allowance=c.allowance)

    def counterexample(self, spec: Spec) -> Counterexample:
        if self.context.subject.contract.backward is None:
            return counterexample(self.context.subject, spec)
        return BackwardExamples(self.context).counterexample(spec)  # grad_output named too


@dataclass
class ProbeExamples:
    """Each example one probe of the tuning (:func:`order_probe`, :func:`key_probe`), inside the contract."""

    context: CellContext
    tuning: Tuning
    probe: Callable[[Any, Tuning, Spec], Finding | None]
    inside_only: ClassVar[bool] = True

    def __call__(self, spec: Spec) -> Finding | str:
        found = self.probe(self.context, self.tuning, spec)
        return "honoured" if found is None else found

    def counterexample(self, spec: Spec) -> Counterexample:
        return counterexample(self.context.subject, spec)


def _tuned_run(subject: Any, spec: Spec, backend: Any) -> Run:
    """One launch through the battery (guarded, poisoned, the nan sentinel); its error raised. The probes'
    launches are not metered: a probe is one example of however many tuned launches it needs."""
    run = call_example(subject, spec, backend, Allowance())
    if run.error is not None:
        raise run.error
    return run


def order_probe(context: CellContext, tuning: Tuning, spec: Spec) -> Finding | None:
    """The benchmark in both orders: the same bits both times, and right."""
    subject = tuning.wrap(context.subject)
    tuning.policy = "bench"
    runs = {}
    for order in ("forward", "reversed"):
        tuning.order = order
        try:
            run = _tuned_run(subject, spec, context.backend)
        except ExampleDiscarded:
            raise
        except Exception as exc:  # noqa: BLE001 - the kernel's own error, in one order
            return Finding("crash", "exception", f"with the benchmark run {order}: {type(exc).__name__}: {exc}")
        benched = {t.base_fn.__name__: tuning.benchmarked.get(id(t)) for t in tuning.tuners}
        runs[order] = (run, benched)
    (first, b1), (second, b2) = runs["forward"], runs["reversed"]
    differ = differing_outputs(first, second)
    if differ and context.subject.contract.deterministic:
        i = differ[0]
        a, b = first.outputs[i], second.outputs[i]
        diff = (a.double() - b.double()).abs().nan_to_num(nan=float("inf")) if isinstance(a, torch.Tensor) else None
        return Finding("wrong", "config-order-dependent",
                       f"output {i} differs when the tuning benchmark runs its configs in another order (the same "
                       f"winner, {tuning.ran}): benchmarked {b1} then {b2}; max |difference| "
                       f"{float(diff.max()) if diff is not None and diff.numel() else 'n/a'}",
                       {"orders": {"forward": b1, "reversed": b2}})
    wrong = context.judge.compare({**second.built.views, **second.before}, spec.dims, spec.dtypes, spec.scalars,
                                  second.outputs)
    if wrong is not None:
        return replace(wrong, message=f"with the benchmark run in reverse ({b2}): {wrong.message}")
    return None


def prime_sizes(contract: Any, sym: str, n: int) -> list[int]:
    """Sizes of ``sym`` to tune at before its drawn size ``n``, in the order tried: its neighbours (a key that
    buckets sizes, as ``log2`` or ``align32`` do, shares theirs), the multiple of 16 below (another
    specialization class, where configs that must divide the size survive), half, the minimum, and double."""
    d = contract.dims[sym]
    sizes = []
    for size in (n - 1, n + 1, (n - 1) // 16 * 16, n // 2, max(d.min, 1), 2 * n):
        if size != n and size >= max(d.min, 1) and size <= d.max and size not in sizes:
            sizes.append(size)
    return sizes


def key_probe(context: CellContext, tuning: Tuning, spec: Spec) -> Finding | None:
    """For each dim, each config that survives the pruning at another size of it (:func:`prime_sizes`) but
    not at ``spec``, chosen there, then ``spec`` run with the cache kept: a choice cached under a key that
    does not tell the sizes apart must still be right where the pruning would have dropped it."""
    contract = context.subject.contract
    subject = tuning.wrap(context.subject)
    kept_here = _survivors_at(context, tuning, subject, spec)
    for sym in sorted(spec.dims, key=lambda s: -spec.dims[s]):
        # Configs not to prime: those kept at spec (the config cells run them there), then those tried.
        tried = {tuner_id: set(names) for tuner_id, names in kept_here.items()}
        told_apart = 0  # sizes where the drawn shape was tuned afresh: the key covers this dim there
        for size in prime_sizes(contract, sym, spec.dims[sym]):
            if told_apart >= 2:
                break  # the key tells the drawn size from both its neighbours: it covers this dim
            prime = replace(spec, dims={**spec.dims, sym: size})
            if expectation(contract, prime).kind != "honour":
                continue
            found, apart = _reuse_at(context, tuning, subject, spec, prime, sym, tried, kept_here)
            if found is not None:
                return found
            told_apart += apart
    return None


def _survivors_at(context: CellContext, tuning: Tuning, subject: Any, spec: Spec) -> dict[int, list[str]]:
    """The configs each tuner's pruning keeps at ``spec`` (one launch; none known if it fails there)."""
    tuning.policy, tuning.clear_cache, tuning.avoid = "choose", True, {}
    tuning.survivors.clear()
    try:
        _tuned_run(subject, spec, context.backend)
    except ExampleDiscarded:
        raise
    except Exception:  # noqa: BLE001 - the drawn shape's own failure is another cell's finding
        return {}
    return {tuner_id: list(names) for tuner_id, names in tuning.survivors.items()}


def _reuse_at(context: CellContext, tuning: Tuning, subject: Any, spec: Spec, prime: Spec, sym: str,
              tried: dict[int, set[str]], kept_here: dict[int, list[str]]) -> tuple[Finding | None, bool]:
    """At one priming shape, each survivor not in ``tried`` chosen in turn, then ``spec`` run with the cache
    kept: (a finding, whether the key told ``prime`` from ``spec``)."""
    while True:
        tuning.policy, tuning.clear_cache, tuning.avoid, tuning.fresh = "choose", True, tried, False
        tuning.survivors.clear()
        tuning.chosen.clear()
        try:
            _tuned_run(subject, prime, context.backend)
        except ExampleDiscarded:
            raise
        except Exception:  # noqa: BLE001 - the priming shape's own failure is another cell's finding
            return None, False
        if not tuning.survivors or not tuning.fresh:
            return None, False  # no tuner ran at this shape, or every survivor here was tried already
        cached = {t.base_fn.__name__: tuning.ran[id(t)] for t in tuning.tuners if id(t) in tuning.ran}
        chosen = dict(tuning.chosen)
        tuning.policy, tuning.clear_cache, tuning.pins = "pin", False, {}
        tuned = tuning.tuned
        try:
            verdict = run_example(subject, spec, context.backend, context.judge, allowance=context.allowance)
        finally:
            tuning.clear_cache = True
        if tuning.tuned != tuned:  # the key told the shapes apart: spec was tuned afresh
            if isinstance(verdict, Finding):
                return replace(verdict, message=f"(tuned afresh) {verdict.message}"), True
            return None, True
        for tuner_id, name in chosen.items():
            tried.setdefault(tuner_id, set()).add(name)
        if isinstance(verdict, Finding):
            key = {t.base_fn.__name__: list(t.keys) for t in tuning.tuners}
            kept = {t.base_fn.__name__: kept_here[id(t)] for t in tuning.tuners if id(t) in kept_here}
            message = (f"tuned first at {prime.dims}, where {', '.join(cached.values())} was chosen; then "
                       f"{spec.dims} ran with the same key values ({sym} is not covered by key={key}), "
                       f"so the cached choice ran where the kernel's pruning keeps only {kept}: {verdict.message}")
            return replace(verdict, message=message, details={
                **verdict.details, "prime": prime.dims, "cached_config": cached, "key": key,
                "uncovered_dim": sym, "kept_at_drawn_shape": kept}), False
