"""The autotune kind: every config of a subject's ``@triton.autotune`` kernels, and the tuning's side effects.

Only subjects whose launcher runs an autotuned kernel with more than one
config get these cells (:func:`..autotune.tuners_for`), so the others pay nothing.

- ``autotune:config0`` ... : the i-th declared config of each autotuned kernel
  pinned (a kernel with fewer configs runs its first survivor), and a short
  search (contiguous draws, then non-pow2 shapes, a few examples each).  A draw
  where the kernel's own pruning drops the config is discarded; a cell whose
  every draw pruned it is skipped.  The config is named in the message and in
  ``details["config"]``, with the launches and (on CUDA) compiles per config.
  A draw where the config does not fit the device (``OutOfResources``) but
  another survivor does is discarded too, as Triton's autotuner skips it (a
  cell of such draws only is skipped, ``discard:out-of-resources``, naming the
  resource); where no survivor fits, the cell is a ``compile-error``.
  For a subject that declares a backward, each example runs the backward
  battery too, under the same pins: the backward's tuned kernels are found
  with the forward's (an autograd Function's methods), and each of their
  configs is a variant of its own as well.
- ``autotune:benchmark``: every surviving config runs on the same inputs first,
  as the tuning benchmark does, then the final call is judged: an in-place or
  accumulated argument the benchmark leaves corrupted (no ``reset_to_zero`` /
  ``restore_value``) is a wrong answer.
- ``autotune:order``: the benchmark in the pruned order and reversed, the same
  winner both times: the final outputs must agree bit for bit (and be right).
- ``autotune:key``: for each dim, the shape is tuned first with that dim at
  other sizes (its neighbours, the multiple of 16 below, half, the minimum,
  double: :func:`~.probes.prime_sizes`), each config that survives the
  pruning there but not at the drawn shape chosen in turn; then the drawn
  shape runs with the tuner's cache kept.  Where the key (``key=[...]``) does
  not tell the sizes apart, the cached choice is reused, and must still be
  right.  The benchmark cell runs a backward too; the order and key probes
  run the forward.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from triton_conformance.conformance.kinds.autotune.probes import ProbeExamples, TunedExamples, key_probe, order_probe
from triton_conformance.conformance.kinds.autotune.discovery import tuners_for
from triton_conformance.conformance.kinds.autotune.tuning import Tuning, config_name, quick_benchmarks
from triton_conformance.conformance.kinds.base import CellContext, CellKind
from triton_conformance.conformance.results import skipped
from triton_conformance.conformance.search.cell import search_cell
from triton_conformance.conformance.search.engine import Draw
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.contract import FLOAT_DTYPES
from triton_conformance.model.outcomes import CellResult, Finding, SkipReason
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.specs import in_shape_class, specs

__all__ = ["AutotuneCells", "MAX_CONFIGS"]

MAX_CONFIGS = 16
SIDE_EFFECTS = ("benchmark", "order", "key")


class AutotuneCells(CellKind):
    steers = True
    dimension = Dimension("autotune", "@triton.autotune kernels", tuple(
        CellClass(f"config{i}", f"the kernel's config #{i} (as declared) pinned, when its own pruning keeps it; "
                  "contiguous and non-pow2 draws") for i in range(MAX_CONFIGS)) + (
        CellClass("benchmark", "every surviving config run on the same inputs first, as the tuning benchmark "
                  "does: in-place arguments need reset_to_zero / restore_value"),
        CellClass("order", "the tuning benchmark in two orders, one winner: the result may not depend on "
                  "which config ran first"),
        CellClass("key", "a shape tuned first with one dim at other sizes (neighbours, a multiple of 16, half, "
                  "the minimum), then the drawn one: a config cached under the same key values, where the "
                  "pruning would drop it, must still be right"),
    ))

    def values(self, subject: Subject) -> tuple[str, ...]:
        most = max((len(t.configs) for t in tuners_for(subject)), default=0)
        if most < 2:
            return ()
        return tuple(f"config{i}" for i in range(min(most, MAX_CONFIGS))) + SIDE_EFFECTS

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        tuners = tuners_for(subject)
        if not tuners:
            return SkipReason("the launcher runs no @triton.autotune kernel", code="autotune:no-tuner")
        if value.startswith("config") and int(value[6:]) >= max(len(t.configs) for t in tuners):
            return SkipReason(f"no autotuned kernel declares a config #{value[6:]}", code="autotune:no-such-config")
        return None

    # -- what every cell of a subject with tuners needs --------------------------------------------------
    def budget_factor(self, subject: Subject) -> int:
        # A real tuner compiles every config of a new specialization to time it.
        return max([1, *(len(getattr(t, "configs", ()) or ()) for t in tuners_for(subject))])

    def subject_scope(self, context: CellContext) -> contextlib.AbstractContextManager:
        # On CUDA the subject's tuners rank their configs in a few timed runs, in every cell.
        if not context.backend.compiles:
            return contextlib.nullcontext()
        return quick_benchmarks(tuners_for(context.subject))

    # -- the cells ---------------------------------------------------------------------------------------
    def _draws(self, context: CellContext) -> list[Draw]:
        """Contiguous draws, then non-pow2 shapes, a few examples each (a quarter of the profile's, at least 2)."""
        policy, backend = context.policy, context.backend
        testable = tuple(d for d in FLOAT_DTYPES if d not in backend.untestable)
        common = dict(dtypes=testable, max_elements=policy.max_elements, max_outer=policy.max_outer,
                      palette=backend.compiles and context.allowance.compile_budget is not None)
        contract, few = context.subject.contract, max(2, policy.examples // 4)
        return [Draw(specs(contract, layout="contiguous", **common), name="contiguous", max_examples=few),
                Draw(specs(contract, shape="non-pow2", **common), lambda c, o: in_shape_class("non-pow2", c, o),
                     name="non-pow2", max_examples=few)]

    def _prepared(self, context: CellContext, tuning: Tuning, value: str) -> tuple[Any, str, dict]:
        """Set ``tuning`` for class ``value``: its example runner, what it runs (for the message) and details."""
        if value.startswith("config"):
            index = int(value[6:])
            tuning.policy, named = "pin", []
            for tuner in tuning.tuners:
                name = config_name(tuner.configs[index]) if index < len(tuner.configs) else None
                tuning.pins[id(tuner)] = name
                named.append(tuning.label(tuner, name) if name else f"{tuner.base_fn.__name__}: its first survivor")
            what = "config " + "; ".join(named) + (
                " (forward and backward)" if context.subject.contract.backward is not None else "")
            return TunedExamples(context, tuning), what, {"config": "; ".join(named), "config_index": index}
        if value == "benchmark":
            tuning.policy, tuning.order = "bench", "forward"
            hooks = {t.base_fn.__name__: {"reset_to_zero": list(t.reset_to_zero),
                                           "restore_value": list(t.restore_value)} for t in tuning.tuners}
            return (TunedExamples(context, tuning), "every surviving config run first on the same inputs, as the "
                    "tuning benchmark does, then the final call", {"hooks": hooks})
        probe = order_probe if value == "order" else key_probe
        return ProbeExamples(context, tuning, probe), "", {}

    def replay(self, context: CellContext, value: str, example: Any) -> Finding | str:
        with Tuning(tuners_for(context.subject), context.backend) as tuning:
            runner, _, _ = self._prepared(context, tuning, value)
            return runner(example)

    def run(self, context: CellContext, value: str) -> CellResult:
        with Tuning(tuners_for(context.subject), context.backend) as tuning:
            runner, what, details = self._prepared(context, tuning, value)
            probing = isinstance(runner, ProbeExamples)
            result = search_cell(context, runner, self._draws(context), plot=not probing)
            details = {**result.details, **_config_details(tuning, context.backend), **details}
            if value == "benchmark" and not result.passed and result.outcome not in ("skipped", "crash"):
                return _benchmark_hint(result, tuning, details)
            message = f"{what}: {result.message}" if what else result.message
            if tuning.unfit:  # the resource each config that did not fit ran out of
                message += " (" + "; ".join(f"{c}: out of {r}" for c, r in tuning.unfit.items()) + ")"
                details["out_of_resources"] = dict(tuning.unfit)
            if probing and result.outcome == "honoured":
                message += ": " + ("the tuning benchmark in both orders gave the same bits and the right answer"
                                   if value == "order" else "every config cached at another size of a dim, where "
                                   "the kernel's pruning drops it at the drawn shape, was still right there (or the "
                                   "key told the shapes apart)")
            if value.startswith("config") and result.passed and result.outcome != "skipped":
                unrun = _never_launched(tuning, int(value[6:]))
                if unrun and len(unrun) == sum(int(value[6:]) < len(t.configs) for t in tuning.tuners):
                    return skipped(context.subject, context.cell, f"{what}: never launched: no draw reached "
                                   f"{', '.join(unrun)} (the launcher ran another kernel)", details=details,
                                   code="autotune:never-launched")
                if unrun:
                    message += f" ({', '.join(unrun)} never launched: no draw reached it)"
            return dataclasses.replace(result, message=message, details=details)


def _never_launched(tuning: Tuning, index: int) -> list[str]:
    """The kernels whose config #``index`` was pinned but never launched (the draws reached other kernels)."""
    return [t.base_fn.__name__ for t in tuning.tuners
            if index < len(t.configs) and not tuning.launches[tuning.label(t, config_name(t.configs[index]))]]


def _config_details(tuning: Tuning, backend: Any) -> dict:
    return {"launches_per_config": tuning.per_config(tuning.launches),
            "compiles_per_config": tuning.per_config(tuning.compiles) if backend.compiles else None,
            "survivors": {t.base_fn.__name__: tuning.survivors.get(id(t)) for t in tuning.tuners}}


def _benchmark_hint(result: CellResult, tuning: Tuning, details: dict) -> CellResult:
    """A failing benchmark cell says which kernels declare neither reset_to_zero nor restore_value."""
    bare = [n for n, h in details["hooks"].items() if not h["reset_to_zero"] and not h["restore_value"]]
    benched = {t.base_fn.__name__: tuning.benchmarked.get(id(t)) for t in tuning.tuners}
    hint = (f" ({', '.join(bare)} declare neither reset_to_zero nor restore_value: an argument the kernel "
            "writes in place or accumulates into is left as the benchmark's runs made it)") if bare else ""
    what = "every surviving config run first on the same inputs, as the tuning benchmark does, then the final call"
    return dataclasses.replace(result, message=f"{what}: {result.message}{hint}",
                               details={**details, "benchmarked": benched})
