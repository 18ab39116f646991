"""The autotune kind: every config of a subject's ``@triton.autotune`` kernels, and the tuning's side effects.

Only subjects whose launcher runs an autotuned kernel with more than one
config get these cells (:func:`..autotune.tuners_for`), so the others pay nothing.

- ``autotune:config0`` ... : the i-th declared config of each autotuned kernel
  pinned (a kernel with fewer configs runs its first survivor), and a short
  search (contiguous draws, then non-pow2 shapes, a few examples each).  A draw
  where the kernel's own pruning drops the config is discarded; a cell whose
  every draw pruned it is skipped.  The config is named in the message and in
  ``details["config"]``, with the launches and (on CUDA) compiles per config.
- ``autotune:benchmark``: every surviving config runs on the same inputs first,
  as the tuning benchmark does, then the final call is judged: an in-place or
  accumulated argument the benchmark leaves corrupted (no ``reset_to_zero`` /
  ``restore_value``) is a wrong answer.
- ``autotune:order``: the benchmark in the pruned order and reversed, the same
  winner both times: the final outputs must agree bit for bit (and be right).
- ``autotune:key``: a shape with one dim made small is tuned first, each of its
  survivors chosen in turn; then the drawn shape runs with the tuner's cache
  kept.  Where the key (``key=[...]``) does not cover that dim, the cached
  choice is reused, and must still be right.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

from hypothesis import given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import HypothesisException

from triton_conformance.conformance.autotune import Tuning, config_name, tuners_for
from triton_conformance.conformance.checks import run_example
from triton_conformance.conformance.compiles import BudgetExhausted
from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.kinds.base import CellContext, CellKind
from triton_conformance.conformance.kinds.searched import ShapeCells
from triton_conformance.conformance.results import cell_result, failed, reproducer_script, skipped
from triton_conformance.conformance.search import (
    SearchOutcome,
    assemble,
    counterexample,
    minimize_dims,
    profile_settings,
    search,
    shrink,
)
from triton_conformance.errors import StillFails
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.contract import FLOAT_DTYPES, Contract
from triton_conformance.model.outcomes import CellResult, Finding
from triton_conformance.model.spec import Spec
from triton_conformance.strategies._internal.specs import specs

__all__ = ["AutotuneCells", "MAX_CONFIGS", "replay_autotune"]

MAX_CONFIGS = 16
SIDE_EFFECTS = ("benchmark", "order", "key")
_SHAPES = ShapeCells()


def _examples(config: Any) -> int:
    """Examples per draw kind in one autotune cell: a few (a quarter of the profile's, at least 2)."""
    return max(2, config.examples // 4)


class AutotuneCells(CellKind):
    steers = True
    dimension = Dimension("autotune", "@triton.autotune kernels", tuple(
        CellClass(f"config{i}", f"the kernel's config #{i} (as declared) pinned, when its own pruning keeps it; "
                  "contiguous and non-pow2 draws") for i in range(MAX_CONFIGS)) + (
        CellClass("benchmark", "every surviving config run on the same inputs first, as the tuning benchmark "
                  "does: in-place arguments need reset_to_zero / restore_value"),
        CellClass("order", "the tuning benchmark in two orders, one winner: the result may not depend on "
                  "which config ran first"),
        CellClass("key", "a shape tuned first, then one whose key values match but another dim differs: "
                  "the cached choice must still be right"),
    ))

    def values(self, contract: Contract) -> tuple[str, ...]:
        tuners = tuners_for(contract)
        most = max((len(t.configs) for t in tuners), default=0)
        if most < 2:
            return ()
        return tuple(f"config{i}" for i in range(min(most, MAX_CONFIGS))) + SIDE_EFFECTS

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        tuners = tuners_for(contract)
        if not tuners:
            return "the launcher runs no @triton.autotune kernel"
        if value.startswith("config") and int(value[6:]) >= max(len(t.configs) for t in tuners):
            return f"no autotuned kernel declares a config #{value[6:]}"
        return None

    def run(self, context: CellContext, value: str) -> CellResult:
        tuners = tuners_for(context.subject)
        with Tuning(tuners, context.backend) as tuning:
            if value.startswith("config"):
                return _config_cell(context, tuning, int(value[6:]))
            if value == "benchmark":
                return _benchmark_cell(context, tuning)
            if value == "order":
                return _probe_cell(context, tuning, _order_probe, "order")
            return _probe_cell(context, tuning, _key_probe, "key")


# -- shared -------------------------------------------------------------------------------------------

def _strategies(context: CellContext) -> list[tuple[str, Any]]:
    p, backend = context.config.profile, context.backend
    testable = tuple(d for d in FLOAT_DTYPES if d not in backend.untestable)
    palette = backend.compiles and context.compile_budget is not None
    common = dict(dtypes=testable, max_elements=p.max_elements, max_outer=p.max_outer, palette=palette)
    contract = context.subject.contract
    return [("contiguous", specs(contract, layout="contiguous", **common)),
            ("non-pow2", specs(contract, shape="non-pow2", **common))]


def _keeps(draw: str):
    if draw == "non-pow2":
        return lambda c, o: _SHAPES.keeps_class("non-pow2", c, o)
    return lambda c, o: True


def _config_details(tuning: Tuning, backend: Any) -> dict:
    return {"launches_per_config": tuning.per_config(tuning.launches),
            "compiles_per_config": tuning.per_config(tuning.compiles) if backend.compiles else None,
            "survivors": {t.base_fn.__name__: tuning.survivors.get(id(t)) for t in tuning.tuners}}


_BODY = '''\
from triton_conformance.conformance.kinds.autotune import replay_autotune

spec = {spec!r}
replay_autotune({module!r}, {subject!r}, {cell!r}, spec, device={device!r}{extra})
'''


def _reproducer(context: CellContext, spec: Spec, finding: Finding, **extra: Any) -> str:
    more = "".join(f", {k}={v!r}" for k, v in extra.items())
    body = _BODY.format(spec=spec.to_dict(), module=context.subject.module, subject=context.subject.name,
                        cell=context.cell, device=context.backend.device, extra=more)
    return reproducer_script(context.subject, context.cell, finding, context.backend, body)


def _searched(context: CellContext, tuning: Tuning, what: str, before: dict | None = None) -> CellResult:
    """The short search of a config / benchmark cell: contiguous draws, then non-pow2 shapes."""
    subject = tuning.wrap(context.subject)
    ctx = dataclasses.replace(context, subject=subject)
    total = SearchOutcome()
    pruned = 0
    for draw, strategy in _strategies(ctx):
        start = tuning.pruned
        found = search(ctx, strategy, max_examples=_examples(context.config))
        pruned += tuning.pruned - start
        total.counts.update(found.counts)
        total.discards.update(found.discards)
        if found.error is not None and total.error is None and not found.discarded:
            total.error = found.error
        if found.failure is not None:
            shrunk = shrink(ctx, found.failure, keeps_class=_keeps(draw), minimize=True, determinism=False)
            result = assemble(ctx, total, shrunk)
            spec = Spec.from_dict(result.counterexample.spec) if result.counterexample is not None else None
            finding = Finding(result.outcome, result.finding or "", result.message)
            details = {**result.details, **_config_details(tuning, context.backend), **(before or {})}
            return dataclasses.replace(
                result, message=f"{what}: {result.message}", details=details,
                reproducer=_reproducer(context, spec, finding) if spec is not None else None)
    result = assemble(ctx, total, None)
    details = {**result.details, **_config_details(tuning, context.backend), **(before or {})}
    discarded = total.discarded
    if pruned:
        details["pruned_discarded"] = pruned
        left = discarded - pruned
        if left > 0:
            details["compile_budget_discarded"] = left
        else:
            details.pop("compile_budget_discarded", None)
        if total.examples == 0:
            return skipped(context.subject, context.cell, f"{what}: the kernel's own pruning dropped it in all "
                           f"{pruned} examples drawn", details=details)
    message = result.message
    if pruned:
        message = message.replace(
            f"{discarded} discarded (compile budget {context.compile_budget} used)",
            f"{pruned} discarded where the kernel's own pruning drops it"
            + (f", {discarded - pruned} for the compile budget ({context.compile_budget})"
               if discarded > pruned else ""))
    return dataclasses.replace(result, message=f"{what}: {message}", details=details)


# -- autotune:configN ---------------------------------------------------------------------------------

def _config_cell(context: CellContext, tuning: Tuning, index: int) -> CellResult:
    tuning.policy = "pin"
    named = []
    for tuner in tuning.tuners:
        name = config_name(tuner.configs[index]) if index < len(tuner.configs) else None
        tuning.pins[id(tuner)] = name
        named.append(tuning.label(tuner, name) if name else f"{tuner.base_fn.__name__}: its first survivor")
    what = "config " + "; ".join(named)
    return _searched(context, tuning, what, {"config": "; ".join(named), "config_index": index})


# -- autotune:benchmark -------------------------------------------------------------------------------

def _benchmark_cell(context: CellContext, tuning: Tuning) -> CellResult:
    tuning.policy, tuning.order = "bench", "forward"
    hooks = {t.base_fn.__name__: {"reset_to_zero": list(t.reset_to_zero), "restore_value": list(t.restore_value)}
             for t in tuning.tuners}
    result = _searched(context, tuning, "every surviving config run first on the same inputs, as the tuning "
                       "benchmark does, then the final call", {"hooks": hooks})
    if not result.passed and result.outcome not in ("skipped", "crash"):
        bare = [n for n, h in hooks.items() if not h["reset_to_zero"] and not h["restore_value"]]
        benched = {t.base_fn.__name__: tuning.benchmarked.get(id(t)) for t in tuning.tuners}
        hint = (f" ({', '.join(bare)} declare neither reset_to_zero nor restore_value: an argument the kernel "
                "writes in place or accumulates into is left as the benchmark's runs made it)") if bare else ""
        result = dataclasses.replace(result, message=result.message + hint,
                                     details={**result.details, "benchmarked": benched})
    return result


# -- probe cells: order and key -----------------------------------------------------------------------

class _Found(Exception):
    def __init__(self, spec: Spec, finding: Finding, extra: dict):
        super().__init__(finding.message)
        self.spec, self.finding, self.extra = spec, finding, extra


def _launch_outputs(subject: Any, spec: Spec, backend: Any):
    """Build ``spec``'s inputs (the nan sentinel) and call the launcher once: (inputs, before, outputs)."""
    from triton_conformance.conformance.launching import launch, outputs_of
    from triton_conformance.strategies._internal.tensors import build_inputs

    built = build_inputs(subject.contract, spec, sentinel="nan", device=backend.device)
    before = {n: built.views[n].clone() for n in subject.contract.inplace}
    raw = launch(subject, built.views, spec.scalars)
    outputs = tuple(o.detach().clone() if hasattr(o, "detach") else o
                    for o in outputs_of(subject, raw, built.views))
    backend.synchronize()
    return built, before, outputs


def _same_bits(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(
            torch.nan_to_num(a.float(), nan=7.25), torch.nan_to_num(b.float(), nan=7.25))) and bool(
            torch.equal(a.float().isnan(), b.float().isnan()))
    return a == b


def _order_probe(context: CellContext, tuning: Tuning, spec: Spec) -> tuple[Finding, dict] | None:
    subject = tuning.wrap(context.subject)
    tuning.policy = "bench"
    runs = {}
    for order in ("forward", "reversed"):
        tuning.order = order
        try:
            built, before, outputs = _launch_outputs(subject, spec, context.backend)
        except Exception as exc:  # noqa: BLE001 - the kernel's own error, in one order
            return Finding("crash", "exception", f"with the benchmark run {order}: {type(exc).__name__}: {exc}"), {}
        benched = {t.base_fn.__name__: tuning.benchmarked.get(id(t)) for t in tuning.tuners}
        runs[order] = (built, before, outputs, benched)
    (_, _, first, b1), (built, before, second, b2) = runs["forward"], runs["reversed"]
    differ = [i for i, (a, b) in enumerate(zip(first, second)) if not _same_bits(a, b)]
    if differ and context.subject.contract.deterministic:
        import torch

        i = differ[0]
        a, b = first[i], second[i]
        diff = (a.double() - b.double()).abs().nan_to_num(nan=float("inf")) if isinstance(a, torch.Tensor) else None
        return Finding("wrong", "config-order-dependent",
                       f"output {i} differs when the tuning benchmark runs its configs in another order (the same "
                       f"winner, {tuning.ran}): benchmarked {b1} then {b2}; max |difference| "
                       f"{float(diff.max()) if diff is not None and diff.numel() else 'n/a'}",
                       {"orders": {"forward": b1, "reversed": b2}}), {}
    wrong = context.judge.compare({**built.views, **before}, spec.dims, spec.dtypes, spec.scalars, second)
    if wrong is not None:
        return dataclasses.replace(wrong, message=f"with the benchmark run in reverse ({b2}): {wrong.message}"), {}
    return None


def _small(contract: Contract, sym: str, n: int) -> int | None:
    d = contract.dims[sym]
    small = max(d.min, 1)
    return small if small != n else None


def _key_probe(context: CellContext, tuning: Tuning, spec: Spec) -> tuple[Finding, dict] | None:
    contract = context.subject.contract
    subject = tuning.wrap(context.subject)
    for sym in sorted(spec.dims, key=lambda s: -spec.dims[s]):
        small = _small(contract, sym, spec.dims[sym])
        if small is None:
            continue
        prime = dataclasses.replace(spec, dims={**spec.dims, sym: small})
        if expectation(contract, prime).kind != "honour":
            continue
        choice = 0
        while True:
            tuning.policy, tuning.choice, tuning.clear_cache = "choose", choice, True
            try:
                _launch_outputs(subject, prime, context.backend)
            except BudgetExhausted:
                raise
            except Exception:  # noqa: BLE001 - the priming shape's own failure is another cell's finding
                break
            chosen = dict(tuning.ran)
            survivors = {k: list(v) for k, v in tuning.survivors.items()}
            tuning.policy, tuning.clear_cache = "pin", False
            tuning.pins = {}
            tuned = tuning.tuned
            try:
                verdict = run_example(subject, spec, context.backend, context.judge)
            finally:
                tuning.clear_cache = True
            reused = tuning.tuned == tuned
            if isinstance(verdict, Finding) and reused:
                key = {t.base_fn.__name__: list(t.keys) for t in tuning.tuners}
                message = (f"tuned first at {prime.dims}, where {', '.join(chosen.values())} was chosen; then "
                           f"{spec.dims} tuned with the same key values ({sym} is not covered by key={key}), "
                           f"so the cached choice ran: {verdict.message}")
                return dataclasses.replace(verdict, message=message), {
                    "prime": prime.dims, "choice": choice, "cached_config": chosen, "key": key,
                    "uncovered_dim": sym}
            if isinstance(verdict, Finding):
                return dataclasses.replace(verdict, message=f"(tuned afresh) {verdict.message}"), {}
            choice += 1
            if choice >= max(len(v) for v in survivors.values()):
                break
    return None


def _probe_seed(context: CellContext, draw: str) -> int | None:
    """The Hypothesis seed of one draw kind of a probe cell: pinned by the cell's name in a derandomized
    profile, else the run's seed (as :func:`..search.search` does), so fresh-seed runs draw afresh."""
    if context.config.profile.derandomize:
        return zlib.crc32(f"{context.subject.name}::{context.cell}::{draw}".encode())
    return context.seed


def _probe_cell(context: CellContext, tuning: Tuning, probe: Any, what: str) -> CellResult:
    subject = context.subject
    counts = {"honoured": 0}
    found: list[_Found] = []

    def check(spec: Spec) -> None:
        if expectation(subject.contract, spec).kind != "honour":
            reject()
        context.observer.example_started(subject, context.cell, spec)
        try:
            verdict = probe(context, tuning, spec)
        except BudgetExhausted:
            reject()
        context.observer.example_finished(subject, context.cell, spec, "failed" if verdict else "honoured", 0.0)
        if verdict is not None:
            found.append(_Found(spec, *verdict))
            raise found[-1]
        counts["honoured"] += 1

    error = None
    for draw, strategy in _strategies(context):
        test = settings(profile_settings(context.config), max_examples=_examples(context.config),
                        database=None)(given(strategy)(check))
        seed = _probe_seed(context, draw)
        if seed is not None:
            test = hypothesis_seed(seed)(test)
        try:
            test()
        except _Found:
            break
        except HypothesisException as exc:
            error = exc
    details = _config_details(tuning, context.backend)
    if found:
        best = found[-1]

        def fails(candidate: Spec) -> Finding | None:
            if expectation(subject.contract, candidate).kind != "honour":
                return None
            try:
                got = probe(context, tuning, candidate)
            except BudgetExhausted:
                return None
            if got is not None and got[0].kind == best.finding.kind:
                best.extra = got[1]
                return got[0]
            return None

        spec, finding = minimize_dims(subject, best.spec, best.finding, fails,
                                      budget=context.config.profile.shrink_calls)
        details = {**finding.details, **details, **best.extra}
        return failed(subject, context.cell, finding, details=details, counterexample=counterexample(subject, spec),
                      reproducer=_reproducer(context, spec, finding),
                      examples=counts["honoured"] + len(found))
    if error is not None and counts["honoured"] == 0:
        return cell_result(subject, context.cell, "crash", f"hypothesis could not search this cell: {error}",
                           finding="search-error")
    if counts["honoured"] == 0:
        return skipped(subject, context.cell, "no example inside the contract could run", details=details)
    text = ("the tuning benchmark in both orders gave the same bits and the right answer" if what == "order" else
            "every choice cached at a shape with one dim made small was still right at the drawn shape "
            "(or the key told the shapes apart)")
    return cell_result(subject, context.cell, "honoured", f"{counts['honoured']} examples: {text}",
                       details=details, examples=counts["honoured"])


# -- the reproducer -----------------------------------------------------------------------------------

def replay_autotune(module: str, name: str, cell: str, spec: Any, *, device: str = "cpu") -> Any:
    """Re-run one example of an autotune cell (its config pinned, or its benchmark / order / key check);
    print the verdict, raise AssertionError if it still fails."""
    import importlib

    from triton_conformance.conformance.backend import current_backend
    from triton_conformance.conformance.kinds.base import judge_for
    from triton_conformance.model.config import RunConfig
    from triton_conformance.model.subject import get_subject

    importlib.import_module(module)
    subject = get_subject(name)
    backend = current_backend("cuda" if device.startswith("cuda") else "interpreter")
    spec = spec if isinstance(spec, Spec) else Spec.from_dict(spec)
    context = CellContext(subject=subject, cell=cell, backend=backend, config=RunConfig(),
                          judge=judge_for(subject, backend))
    value = cell.partition(":")[2]
    with Tuning(tuners_for(subject), backend) as tuning:
        if value.startswith("config") or value == "benchmark":
            if value == "benchmark":
                tuning.policy = "bench"
            else:
                index = int(value[6:])
                tuning.pins = {id(t): config_name(t.configs[index]) if index < len(t.configs) else None
                               for t in tuning.tuners}
            verdict = run_example(tuning.wrap(subject), spec, backend, context.judge)
            verdict = verdict if isinstance(verdict, Finding) else None
        else:
            got = (_order_probe if value == "order" else _key_probe)(context, tuning, spec)
            verdict = got[0] if got else None
    print(f"{name}[{cell}] at {spec.dims}: " + ("honoured" if verdict is None else
                                                  f"{verdict.outcome} / {verdict.kind}: {verdict.message}"))
    if verdict is not None:
        raise StillFails(f"{name}: {verdict.outcome} ({verdict.kind}): {verdict.message}")
    return verdict
