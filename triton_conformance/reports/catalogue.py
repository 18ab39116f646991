"""Which catalogue of cells a results document is read with: its own, else a built-in default.

A run writes its :class:`~triton_conformance.model.cells.Catalogue` into the
results JSON (``"cells"``); a document written before that carries none, so
the reports fall back to :data:`DEFAULT`, today's dimensions and classes in
matrix order with the glossary's one-line summaries (docs/glossary.md).
"""

from __future__ import annotations

from typing import Any

from triton_conformance.model.cells import Catalogue, CellClass, Dimension

__all__ = ["DEFAULT", "catalogue_of"]


def _dimension(name: str, summary: str, *classes: tuple[str, str]) -> Dimension:
    return Dimension(name, summary, tuple(CellClass(v, s) for v, s in classes))


DEFAULT = Catalogue((
    _dimension(
        "layout", "input layout",
        ("contiguous", "row-major, as torch's is_contiguous() means it"),
        ("transposed", "dims permuted, so the strides are not in decreasing order"),
        ("sliced", "a step slice, leaving gaps between elements"),
        ("padded", "rows longer in memory than in the shape (a row stride past the row length)"),
        ("offset", "a storage offset into a larger buffer, including one misaligned by a single element"),
        ("broadcast", "a stride-0 dim (expand), inputs only"),
        ("size1", "size-1 dims with unusual strides, which a kernel must ignore"),
        ("mixed", "several of the layouts above at once, drawn per input"),
    ),
    _dimension(
        "dtype", "dtype",
        ("float16", "float16 inputs (rejected cleanly unless claimed)"),
        ("bfloat16", "bfloat16 inputs (rejected cleanly unless claimed)"),
        ("float32", "float32 inputs (rejected cleanly unless claimed)"),
    ),
    _dimension(
        "shape", "shape",
        ("tiny", "dims of 1"),
        ("non-pow2", "sizes that are not powers of two (2^k \u00b1 1, primes), where tail masks matter"),
        ("beyond-block", "sizes past the largest block a launcher is likely to pick"),
        ("empty", "a dim of 0; expected to be rejected unless the range admits 0"),
        ("beyond-range", "a dim just outside its declared range; expected to be rejected"),
        ("large-index", "more than 2^31 elements, where int32 offsets wrap"),
    ),
    _dimension(
        "values", "input values",
        ("huge", "values large enough that exp of them overflows"),
        ("inf", "\u00b1inf among the inputs; their positions must match the oracle's"),
        ("nan", "NaN among the inputs; their positions must match the oracle's"),
        ("denormal", "subnormal numbers (flushing them to zero is allowed)"),
        ("ties", "many equal values (ties for a max or a sort)"),
    ),
    _dimension(
        "mask", "attention mask",
        ("causal", "each query keeps only the keys at or before it"),
        ("random", "a random keep-mask with at least one key kept in every row"),
        ("padding", "each batch keeps a prefix of its keys (variable sequence lengths)"),
        ("all", "every key kept"),
        ("fully-masked", "some rows keep no key at all, checked against the declared policy"),
        ("broadcast", "a mask with stride-0 rows (one row shared by all queries)"),
    ),
    _dimension("memory", "", ("", "every in-contract layout, drawn per input, with the memory checks "
                                  "(out-of-bounds writes, unwritten output, reads outside the inputs, "
                                  "mutated inputs)")),
    _dimension("determinism", "", ("", "repeated calls on the same inputs must give bitwise equal outputs")),
    _dimension(
        "stochastic", "stochastic output",
        ("rate", "the event rate (dropped fraction) matches the model at several probabilities"),
        ("values", "every output element is a value the model allows"),
        ("edges", "the extreme probabilities behave exactly (p = 0 is f itself; p = 1 drops everything)"),
        ("reproducibility", "the same seed and inputs give identical bits"),
        ("seeds", "different seeds give masks that agree only as independent ones would"),
        ("independence", "no repeats across blocks or rows, no rate depending on position, row, column "
                         "or value"),
    ),
    _dimension("performance", "", ("", "CUDA only: one checked example at a declared size, timed against "
                                       "the device's measured peak and against torch")),
))


def catalogue_of(document: dict[str, Any]) -> Catalogue:
    """The document's own catalogue, with :data:`DEFAULT` after it for cells it does not name."""
    try:
        own = Catalogue.from_dict(document.get("cells"))
    except (KeyError, TypeError, ValueError):  # a malformed catalogue: order and explain as today
        return DEFAULT
    return Catalogue.of(own.dimensions + DEFAULT.dimensions) if own.dimensions else DEFAULT
