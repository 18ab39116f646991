"""The searched kinds: layout, dtype, shape, values, mask, memory and determinism.

Each draws specs that pin its own dimension and leave the others at their
defaults, and shares the search-and-shrink engine (:mod:`..search`).
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.battery.runners import ForwardExamples
from triton_conformance.conformance.kinds.base import CellContext, CellKind, untestable
from triton_conformance.conformance.search.cell import search_cell
from triton_conformance.conformance.search.engine import Draw
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.contract import FLOAT_DTYPES, OTHER_DTYPES
from triton_conformance.model.inputs import FP8_DTYPES
from triton_conformance.model.outcomes import CellResult, SkipReason
from triton_conformance.model.spec import Spec, layout_applies
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.fp8_values import FP8_FILLS
from triton_conformance.strategies._internal.specs import in_shape_class, is_bounded, specs

__all__ = ["SearchedKind", "PROBED_DTYPES"]

# Float dtypes every float subject is probed with; unclaimed ones must be rejected.
PROBED_DTYPES = ("float16", "bfloat16", "float32")


class SearchedKind(CellKind):
    """A kind whose cells are searched with Hypothesis and shrunk to the smallest failure, each example a
    forward battery.

    Subclasses say how a class pins the spec (:meth:`spec_options`), and
    optionally which shrunk candidates stay in the class (:meth:`keeps_class`)
    and whether the per-dim search runs (:meth:`minimizes`).
    """

    steers = True
    determinism = False  # each example also compares two calls bit for bit

    def spec_options(self, value: str) -> dict[str, Any]:
        """Keyword arguments of :func:`~triton_conformance.strategies.specs` for class ``value``."""
        return {}

    def keeps_class(self, value: str, candidate: Spec, original: Spec) -> bool:
        return True

    def minimizes(self, value: str) -> bool:
        return True

    def draws(self, context: CellContext, value: str) -> list[Draw]:
        policy, backend = context.policy, context.backend
        testable = tuple(d for d in FLOAT_DTYPES if d not in backend.untestable)
        strategy = specs(context.subject.contract, dtypes=testable, max_elements=policy.max_elements,
                         max_outer=policy.max_outer,
                         palette=backend.compiles and context.allowance.compile_budget is not None,
                         **self.spec_options(value))
        return [Draw(strategy, lambda c, o: self.keeps_class(value, c, o))]

    def examples(self, context: CellContext, value: str) -> ForwardExamples:
        return ForwardExamples(context, determinism=self.determinism)

    def run(self, context: CellContext, value: str) -> CellResult:
        return search_cell(context, self.examples(context, value), self.draws(context, value),
                           minimize=self.minimizes(value))


def _classes(*pairs: tuple[str, str]) -> tuple[CellClass, ...]:
    return tuple(CellClass(v, s) for v, s in pairs)


class LayoutCells(SearchedKind):
    dimension = Dimension("layout", "inputs laid out in memory this way", _classes(
        ("contiguous", "row-major inputs that start their storage"),
        ("transposed", "some inputs with their dims permuted (a .t() or .permute() view)"),
        ("sliced", "some inputs stepped through with gaps between elements (x[:, ::2])"),
        ("padded", "rows padded with extra elements after each innermost row"),
        ("offset", "a storage offset of 1 to 64 elements (misaligned starts included)"),
        ("broadcast", "stride-0 dims, as from expand()"),
        ("size1", "size-1 dims carrying odd strides (legal: any stride works there)"),
        ("mixed", "a different layout class for each input that claims any layout"),
    ))

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        ranks = [len(s.shape) for s in contract.inputs.values()]
        if value == "mixed":
            if not any(s.layouts == "any" for s in contract.inputs.values()):
                return SkipReason("no input claims arbitrary layouts", code="layout:no-any-layout")
        elif not any(layout_applies(value, r) for r in ranks):
            return SkipReason(f"layout {value!r} needs an input of rank >= 2", code="layout:rank")
        if value == "size1" and not any(d.min <= 1 <= d.max for d in contract.dims.values()):
            return SkipReason("no dim admits size 1", code="layout:no-size-1")
        return None

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"layout": value}


class DtypeCells(SearchedKind):
    dimension = Dimension("dtype", "every input that claims it in this dtype; unclaimed ones must be refused",
                          _classes(*((d, f"{d} inputs") for d in PROBED_DTYPES + ("float64",) + FP8_DTYPES
                                     + OTHER_DTYPES)))

    def values(self, subject: Subject) -> tuple[str, ...]:
        contract = subject.contract
        fp8 = tuple(d for n in contract.tensor_names for d in contract.inputs[n].dtypes if d in FP8_DTYPES)
        floats = fp8 + contract.float_dtypes()
        if floats:
            return tuple(dict.fromkeys(floats + PROBED_DTYPES))
        return tuple(contract.inputs[contract.tensor_names[0]].dtypes)

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        return untestable(backend, value)

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"dtype": value}


class ShapeCells(SearchedKind):
    dimension = Dimension("shape", "dims drawn this way", _classes(
        ("tiny", "every dim at most 3: where a grid or a tail block is degenerate"),
        ("non-pow2", "sizes 2^k +- 1 and primes, so every tail block is partial"),
        ("beyond-block", "the widest dim past 4096, beyond what one tile of a row kernel holds, or an outer dim "
                         "past 4096 with the rest small (a long batch of short rows)"),
        ("empty", "a dim of size 0: the launcher must return an empty result or refuse"),
        ("beyond-range", "a dim outside the declared range: the launcher must refuse it"),
    ))

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        if value == "beyond-block" and max(d.max for d in contract.dims.values()) < 64:
            return SkipReason("no dim can exceed a block", code="shape:within-a-block")
        if value == "beyond-range" and not any(is_bounded(d) for d in contract.dims.values()):
            return SkipReason("every dim range is unbounded in practice", code="shape:unbounded")
        return None

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"shape": value}

    def keeps_class(self, value: str, candidate: Spec, original: Spec) -> bool:
        return in_shape_class(value, candidate, original)

    def minimizes(self, value: str) -> bool:
        return value not in ("empty", "beyond-range")  # their one pinned dim is the point


class ValueCells(SearchedKind):
    dimension = Dimension("values", "inputs holding these values (a class the subject claims)", _classes(
        ("huge", "magnitudes around exp's overflow point; some rows all negative"),
        ("inf", "some elements +inf or -inf"),
        ("nan", "some elements NaN"),
        ("denormal", "half the elements subnormal"),
        ("ties", "small integers, so sums and maxima tie exactly"),
        ("zero-blocks", "some rows all zero, so every group and block in them has an amax of 0"),
        ("fp8-overflow", "magnitudes from half to four times fp8's largest finite values (448, 57344)"),
        ("fp8-subnormal", "magnitudes below fp8's smallest normals (2^-6, 2^-14), where the grid is fixed-point"),
        ("fp8-ties", "midpoints of the e4m3fn grid, every 16th element +-448 so each group's scale is exact"),
        ("extreme", "inputs that declare a value_range filled out to its ends; some rows all at one end"),
    ))

    def values(self, subject: Subject) -> tuple[str, ...]:
        # "extreme" is never claimed: it is a cell of every subject with a declared value_range.  The fp8
        # classes are cells only of the subjects that claim them (quantizers), not skipped rows of every matrix.
        contract = subject.contract
        return tuple(c.value for c in self.dimension.classes
                     if (c.value != "extreme" or contract.ranged) and (c.value not in FP8_FILLS or c.value in
                                                                        contract.values))

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        if value == "extreme":
            return None if contract.ranged else SkipReason("no input declares a value_range", code="values:no-range")
        return None if value in contract.values else SkipReason(f"value class {value!r} not claimed",
                                                                 code="values:not-claimed")

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"values": value}


class MaskCells(SearchedKind):
    dimension = Dimension("mask", "the mask input holding this pattern", _classes(
        ("causal", "each row keeps the keys up to its own position"),
        ("random", "each key kept with probability 1/2, at least one per row"),
        ("padding", "each batch keeps a prefix of the keys"),
        ("all", "every key kept"),
        ("fully-masked", "some rows keep no key: the declared policy decides the answer"),
        ("broadcast", "one padding row given as a stride-0 view over all rows"),
    ))

    def values(self, subject: Subject) -> tuple[str, ...]:
        return super().values(subject) if subject.contract.mask_name else ()

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"mask": value}


class MemoryCell(SearchedKind):
    dimension = Dimension("memory", "", _classes(
        ("", "any claimed layout per input, with every memory check: guard bands, poison, sentinels, mutation"),))

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"layout": "memory"}


class DeterminismCell(SearchedKind):
    dimension = Dimension("determinism", "", _classes(("", "two calls on identical inputs agree bit for bit"),))
    determinism = True

    def values(self, subject: Subject) -> tuple[str, ...]:
        contract = subject.contract
        return ("",) if contract.deterministic and contract.model is None else ()

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        if contract.model is not None:
            return SkipReason("stochastic subject: its stochastic:reproducibility cell checks the seed",
                              code="determinism:stochastic")
        return None if contract.deterministic else SkipReason("subject does not claim determinism",
                                                                   code="determinism:not-claimed")
