"""The searched kinds: layout, dtype, shape, values, mask, memory and determinism.

Each draws specs that pin its own dimension and leave the others at their
defaults, and shares the search-and-shrink engine (:mod:`..search`).
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.kinds.base import CellContext, CellKind
from triton_conformance.conformance.search.engine import assemble, search, second_search, shrink
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.contract import FLOAT_DTYPES, OTHER_DTYPES, Contract
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.spec import Spec, layout_applies
from triton_conformance.strategies._internal.specs import BEYOND_BLOCK, is_bounded, specs

__all__ = ["SearchedKind", "PROBED_DTYPES"]

# Float dtypes every float subject is probed with; unclaimed ones must be rejected.
PROBED_DTYPES = ("float16", "bfloat16", "float32")


class SearchedKind(CellKind):
    """A kind whose cells are searched with Hypothesis and shrunk to the smallest failure.

    Subclasses say how a class pins the spec (:meth:`spec_options`), and
    optionally which shrunk candidates stay in the class (:meth:`keeps_class`)
    and whether the per-dim search runs (:attr:`minimizes`).
    """

    searched = True
    steers = True
    determinism = False  # each example also compares two calls bit for bit

    def spec_options(self, value: str) -> dict[str, Any]:
        """Keyword arguments of :func:`~triton_conformance.strategies.specs` for class ``value``."""
        return {}

    def keeps_class(self, value: str, candidate: Spec, original: Spec) -> bool:
        return True

    def minimizes(self, value: str) -> bool:
        return True

    def strategy(self, contract: Contract, value: str, *, backend: Any, config: Any, palette: bool):
        p = config.profile
        testable = tuple(d for d in FLOAT_DTYPES if d not in backend.untestable)
        return specs(contract, dtypes=testable, max_elements=p.max_elements, max_outer=p.max_outer, palette=palette,
                     **self.spec_options(value))

    def run(self, context: CellContext, value: str) -> CellResult:
        strategy = self.strategy(context.subject.contract, value, backend=context.backend, config=context.config,
                                 palette=context.backend.compiles and context.compile_budget is not None)
        keeps = lambda c, o: self.keeps_class(value, c, o)  # noqa: E731
        found = search(context, strategy, determinism=self.determinism, keeps_class=keeps)
        shrunk = second = None
        second_examples = 0
        if found.failure is not None:
            shrunk = shrink(context, found.failure, keeps_class=keeps, minimize=self.minimizes(value),
                            determinism=self.determinism)
            # A cheap failure (a crash on an empty input) must not hide another bug: search once more.
            again, second = second_search(context, strategy, shrunk, keeps_class=keeps,
                                          minimize=self.minimizes(value), determinism=self.determinism)
            second_examples = again.examples
        return assemble(context, found, shrunk, second, second_examples)


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

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        ranks = [len(s.shape) for s in contract.inputs.values()]
        if value == "mixed":
            if not any(s.layouts == "any" for s in contract.inputs.values()):
                return "no input claims arbitrary layouts"
        elif not any(layout_applies(value, r) for r in ranks):
            return f"layout {value!r} needs an input of rank >= 2"
        if value == "size1" and not any(d.min <= 1 <= d.max for d in contract.dims.values()):
            return "no dim admits size 1"
        return None

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"layout": value}


class DtypeCells(SearchedKind):
    dimension = Dimension("dtype", "every input that claims it in this dtype; unclaimed ones must be refused",
                          _classes(*((d, f"{d} inputs") for d in PROBED_DTYPES + ("float64",) + OTHER_DTYPES)))

    def values(self, contract: Contract) -> tuple[str, ...]:
        floats = contract.float_dtypes()
        if floats:
            return tuple(dict.fromkeys(floats + PROBED_DTYPES))
        return tuple(contract.inputs[contract.tensor_names[0]].dtypes)

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        return backend.untestable.get(value)

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

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        if value == "beyond-block" and max(d.max for d in contract.dims.values()) < 64:
            return "no dim can exceed a block"
        if value == "beyond-range" and not any(is_bounded(d) for d in contract.dims.values()):
            return "every dim range is unbounded in practice"
        return None

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"shape": value}

    def keeps_class(self, value: str, candidate: Spec, original: Spec) -> bool:
        if value == "tiny":
            return all(n <= 3 for n in candidate.dims.values())
        if value == "non-pow2":  # every dim it moved is still 2^k +- 1 or the like
            return all(n == original.dims[s] or (n > 1 and n & (n - 1)) for s, n in candidate.dims.items())
        if value == "beyond-block":
            widest = max(original.dims, key=lambda s: original.dims[s])
            return candidate.dims[widest] >= min(BEYOND_BLOCK, original.dims[widest])
        return True

    def minimizes(self, value: str) -> bool:
        return value not in ("empty", "beyond-range")  # their one pinned dim is the point


class ValueCells(SearchedKind):
    dimension = Dimension("values", "inputs holding these values (a class the subject claims)", _classes(
        ("huge", "magnitudes around exp's overflow point; some rows all negative"),
        ("inf", "some elements +inf or -inf"),
        ("nan", "some elements NaN"),
        ("denormal", "half the elements subnormal"),
        ("ties", "small integers, so sums and maxima tie exactly"),
        ("extreme", "inputs that declare a value_range filled out to its ends; some rows all at one end"),
    ))

    def values(self, contract: Contract) -> tuple[str, ...]:
        # "extreme" is never claimed: it is a cell of every subject with a declared value_range.
        return tuple(c.value for c in self.dimension.classes if c.value != "extreme" or contract.ranged)

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        if value == "extreme":
            return None if contract.ranged else "no input declares a value_range"
        return None if value in contract.values else f"value class {value!r} not claimed"

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

    def values(self, contract: Contract) -> tuple[str, ...]:
        return super().values(contract) if contract.mask_name else ()

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

    def values(self, contract: Contract) -> tuple[str, ...]:
        return ("",) if contract.deterministic and contract.model is None else ()

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        if contract.model is not None:
            return "stochastic subject: its stochastic:reproducibility cell checks the seed"
        return None if contract.deterministic else "subject does not claim determinism"
