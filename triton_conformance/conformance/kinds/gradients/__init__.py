"""The gradient cells (``grad``): a subject that declares a backward has its gradients judged.

Only a contract with ``backward=`` gets them (every other subject's matrix,
and the main job's cost, are unchanged).  Each cell searches with the one
search (:mod:`...search`) and the backward battery
(:mod:`...battery.backward`): the forward inputs drawn as the searched cells
draw them, a grad_output for every output that carries a gradient (by default
every float output; ``Backward(outputs=...)`` says which), each drawn with a
layout class of its own, every declared gradient compared with float64 autograd
of the oracle's sum_i <output_i, grad_output_i> through the same
:class:`~...judge.Judge` as outputs:

- ``grad:layout:<class>``: grad_output contiguous, transposed, sliced, padded,
  offset, or stride-0 broadcast (``.sum().backward()``, ``expand()``);
- ``grad:dtype:<d>``: the inputs in each claimed float dtype;
- ``grad:shape:non-pow2`` / ``grad:shape:beyond-block``: dims at 2^k +- 1 and
  primes, or past one block: where a backward's tail blocks go wrong.
  ``beyond-block`` searches the widest dim past a block first, then (where an
  outer dim's range passes 128) a long batch of short rows: an outer dim in the
  top half of its range or anywhere past 128 (``specs(shape="wide-outer")``),
  where partial-sum buffers sized for a fixed number of programs, or by a
  floor where a ceiling belongs, go wrong;
- ``grad:values:<class>``: the value classes the subject claims, and
  ``values:extreme`` for inputs that declare a ``value_range``;
- ``grad:memory``: inputs in any claimed layout, grad_output in any class, and
  every memory check twice, in both sentinels and poisons;
- ``grad:determinism``: two backward passes agree bit for bit, where claimed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from triton_conformance.conformance.battery.backward import grad_output_key, output_symbols
from triton_conformance.conformance.battery.runners import BackwardExamples
from triton_conformance.conformance.kinds.base import CellContext, CellKind, untestable
from triton_conformance.conformance.search.cell import search_cell
from triton_conformance.conformance.search.engine import Draw
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.outcomes import CellResult, SkipReason
from triton_conformance.model.spec import Layout, Spec
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.layouts import layouts
from triton_conformance.strategies._internal.specs import in_shape_class, outer_dims, specs

__all__ = ["GradientCells", "grad_layout_rows", "gradient_specs", "cell_options"]

# The shape classes the grad cells take from the shape table (beyond-block searches wide-outer too).
_SHAPES = ("non-pow2", "beyond-block")


def grad_layout_rows(layouts: vocabulary.Vocabulary | None = None) -> tuple[vocabulary.LayoutClass, ...]:
    """The layout table's rows a grad_output is drawn in (``grad_output=True``), in table order."""
    return (layouts or vocabulary.LAYOUTS).select(scope="tensor", grad_output=True)


def _value_rows(values: vocabulary.Vocabulary | None = None) -> tuple[vocabulary.ValueClass, ...]:
    """The value table's rows that are grad cells: claimed or ranged, not a quantizer's fp8 cases."""
    return (values or vocabulary.VALUES).select(quantizer=False, claim=("claimed", "ranged"))


def _rank2(subject: Subject) -> bool:
    return len(output_symbols(subject)) >= 2


def _grad_layout(grad_layout: str | None, rank: int) -> st.SearchStrategy[Layout]:
    """A grad_output layout of class ``grad_layout`` (any class: ``None``) for a rank-``rank`` output;
    contiguous where the class needs a rank the output lacks (an output other than the first)."""
    # A rank-0 grad_output keeps the rank-1 classes: each draws its one layout there.
    if grad_layout is None:
        classes = [r.name for r in grad_layout_rows() if r.applies(max(rank, 1))]
        return st.sampled_from(classes).flatmap(lambda k: layouts(k, rank))
    row = vocabulary.LAYOUTS[grad_layout]
    if not row.applies(max(rank, 1)):
        return st.just(Layout())
    if row.draw == "stride0" and rank:
        # Every dim stride 0 first (the grad of .sum(): ones expanded), then any subset.
        return st.one_of(st.just(Layout(row.name, broadcast=tuple(range(rank)))), layouts(row.name, rank))
    return layouts(grad_layout, rank)


def gradient_specs(subject: Subject, *, grad_layout: str | None, memory: bool, dtypes: tuple[str, ...],
                   max_elements: int, max_outer: int, **pins: Any) -> st.SearchStrategy[Spec]:
    """Specs of ``subject``'s forward inputs (contiguous, or any claimed layout with ``memory``; ``pins``:
    ``dtype``, ``shape``, ``values`` as :func:`~...strategies.specs` takes them) plus a layout for each
    grad_output (output 0's, and each other output the backward declares: ``grad_output_key``): of class
    ``grad_layout``, or any class (``None``)."""
    contract = subject.contract
    base = specs(contract, layout="memory" if memory else None, dtypes=dtypes, max_elements=max_elements,
                 max_outer=max_outer, **pins)
    positions = sorted({0, *(contract.backward.outputs or ())})
    grads = st.fixed_dictionaries({grad_output_key(p): _grad_layout(grad_layout, len(output_symbols(subject, p)))
                                   for p in positions})
    return st.tuples(base, grads).map(lambda pair: replace(pair[0], layouts={**pair[0].layouts, **pair[1]}))


def cell_options(value: str) -> dict[str, Any]:
    """What a ``grad`` class pins: grad_output's layout, the spec's dtype / shape / values, the repeats."""
    kind, _, arg = value.partition(":")
    pins = {"dtype": arg} if kind == "dtype" else {"shape": arg} if kind == "shape" else (
        {"values": arg} if kind == "values" else {})
    return {"grad_layout": arg if kind == "layout" else None if kind in ("memory", "dtype") else "contiguous",
            "memory": kind == "memory", "second": kind == "memory", "determinism": kind == "determinism",
            "pins": pins}


def _dimension(layouts: vocabulary.Vocabulary, dtypes: vocabulary.Vocabulary, shapes: vocabulary.Vocabulary,
               values: vocabulary.Vocabulary) -> Dimension:
    """The grad cells' classes, composed from the tables' rows and sentences."""
    return Dimension("grad", "the declared backward's gradients, against float64 autograd of the oracle", (
        *layouts.classes(grad_layout_rows(layouts), prefix="layout:", text=lambda r: f"grad_output: {r.text}"),
        *dtypes.classes(dtypes.select(draw="float"), prefix="dtype:", text=lambda r: f"{r.text} (and so grad_output)"),
        # beyond-block: the widest dim past a block, then a long batch of short rows
        *shapes.classes(tuple(shapes[k] for k in _SHAPES), prefix="shape:", text=lambda r: r.text if r.name !=
                        "beyond-block" else f"{r.text}; then {shapes['wide-outer'].text}"),
        *values.classes(_value_rows(values), prefix="values:"),
        CellClass("memory", "inputs in any claimed layout, grad_output in any; saved tensors and grad_output "
                            "unchanged, gradients fully written and inside their guard bands, no reads outside"),
        CellClass("determinism", "two backward passes on identical inputs agree bit for bit"),
    ))


class GradientCells(CellKind):
    """The backward's cells, a dimension of their own; only for subjects that declare a backward."""

    steers = True
    kernels = "backward"

    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(_dimension, vocabulary.LAYOUTS, vocabulary.DTYPES, vocabulary.SHAPES,
                                  vocabulary.VALUES)

    def values(self, subject: Subject) -> tuple[str, ...]:
        contract = subject.contract
        if contract.backward is None:
            return ()
        layouts_ = [f"layout:{r.name}" for r in grad_layout_rows() if _rank2(subject) or r.min_rank < 2]
        dtypes = [f"dtype:{d}" for d in contract.float_dtypes() if d in vocabulary.DTYPES.names(draw="float")]
        shapes = [f"shape:{k}" for k in _SHAPES if self.skip_reason(subject, f"shape:{k}", None) is None]
        values = [f"values:{r.name}" for r in _value_rows()
                  if r.name in contract.values or (r.claim == "ranged" and contract.ranged)]
        determinism = ["determinism"] if contract.backward.deterministic else []
        return tuple(layouts_ + dtypes + shapes + values + ["memory"] + determinism)

    def budget_factor(self, subject: Subject) -> int:
        return 2 if subject.contract.backward is not None else 1  # a backward's kernels are a family of their own

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        if contract.backward is None:
            return SkipReason("the subject declares no backward", code="gradients:no-backward")
        kind, _, arg = value.partition(":")
        if value == "determinism" and not contract.backward.deterministic:
            return SkipReason("the backward is declared nondeterministic (Backward(deterministic=False): atomics "
                              "in dW)", code="gradients:nondeterministic")
        if kind == "layout" and vocabulary.LAYOUTS[arg].min_rank >= 2 and not _rank2(subject):
            return SkipReason(f"grad_output layout {arg!r} needs an output of rank >= 2", code="gradients:rank")
        if value == "shape:beyond-block" and max(d.max for d in contract.dims.values()) < 64:
            return SkipReason("no dim can exceed a block", code="shape:within-a-block")
        if kind == "values":
            if vocabulary.VALUES[arg].claim == "ranged":
                return None if contract.ranged else SkipReason("no input declares a value_range",
                                                               code="values:no-range")
            return None if arg in contract.values else SkipReason(f"value class {arg!r} not claimed",
                                                                   code="values:not-claimed")
        if kind == "dtype":
            if arg not in contract.float_dtypes():
                return SkipReason(f"no input claims {arg}", code="dtype:not-claimed")
            return untestable(backend, arg)
        return None

    def examples(self, context: CellContext, value: str) -> BackwardExamples:
        options = cell_options(value)
        return BackwardExamples(context, second=options["second"], determinism=options["determinism"])

    def run(self, context: CellContext, value: str) -> CellResult:
        options = cell_options(value)
        policy, backend = context.policy, context.backend
        testable = tuple(d for d in vocabulary.DTYPES.names(draw="float") if d not in backend.untestable)

        def strategy(**pins: Any) -> st.SearchStrategy[Spec]:
            return gradient_specs(context.subject, grad_layout=options["grad_layout"], memory=options["memory"],
                                  dtypes=testable, max_elements=policy.max_elements, max_outer=policy.max_outer,
                                  palette=backend.compiles and context.allowance.compile_budget is not None,
                                  **{**options["pins"], **pins})

        shape = options["pins"].get("shape")
        keeps = (lambda c, o: in_shape_class(shape, c, o)) if shape else None
        draws = [Draw(strategy(), keeps)]
        if shape == "beyond-block" and outer_dims(context.subject.contract):
            # Then a long batch of short rows: half the examples each.
            half = max(2, policy.examples // 2)
            draws = [Draw(strategy(), keeps, name="widest", max_examples=half),
                     Draw(strategy(shape="wide-outer"), lambda c, o: in_shape_class("wide-outer", c, o),
                          name="wide-outer", max_examples=half)]
        return search_cell(context, self.examples(context, value), draws)
