"""The vocabulary tables: every layout, dtype, shape, value and mask class, one row each.

Each table is a :class:`Vocabulary` of frozen rows, one per class: its name, the draw that makes it
(a name the strategies look up: :mod:`triton_conformance.strategies`) and the one sentence the report
shows for it.  The cell kinds name their cells after the rows and explain them with the rows' sentences,
the strategies draw what the rows say, the contract validates against them, and the docs list them
(``tests/cover/test_vocabulary.py`` checks that ``docs/glossary.md`` names every row).  A new class is
one row: a row whose draw the strategies already know needs nothing else.

The kinds and the strategies read a table through this module (``vocabulary.LAYOUTS``), never a copy,
so a table replaced here (:meth:`Vocabulary.with_row`) is the one they all see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")

from triton_conformance.errors import InvalidArgument
from triton_conformance.model.cells import CellClass, Dimension

__all__ = ["Vocabulary", "derived", "LayoutClass", "DtypeClass", "ShapeClass", "ValueClass", "MaskClass", "LAYOUTS",
           "DESCRIPTOR_LAYOUTS", "DTYPES", "SHAPES", "VALUES", "MASKS"]


@dataclass(frozen=True, slots=True)
class LayoutClass:
    """A layout class: how one tensor (``scope="tensor"``), or each input of a spec (``"spec"``), sits in memory.

    - ``draw``: the layout draw (``strategies._internal.layouts``): ``"contiguous"``, ``"permuted"``,
      ``"swap-last"``, ``"stepped"``, ``"padded"``, ``"offset"``, ``"stride0"``, ``"odd-stride"``; for a spec
      scope, ``"per-input"`` (a tensor class for each input) or ``"per-claimed-input"`` (only those that claim
      any layout);
    - ``choices``: what the draw picks from (the pads, offsets or odd strides), mildest first;
    - ``min_rank``: the rank a tensor needs for the class to mean anything;
    - ``inputs_only``: only an input may be in it (a stride-0 output would be written many times over);
    - ``grad_output``: whether the ``grad`` cells draw a grad_output in it;
    - ``rule``: for a descriptor class, the descriptor rule it breaks (``model.descriptors.DESCRIPTOR_RULES``);
    - ``cell``: whether it is a cell of its dimension (``memory`` is a draw of the memory cell only).
    """

    name: str
    draw: str
    text: str
    choices: tuple[int, ...] = ()
    min_rank: int = 0
    inputs_only: bool = False
    grad_output: bool = True
    scope: str = "tensor"
    rule: str | None = None
    cell: bool = True

    def applies(self, ndim: int, *, is_input: bool = True) -> bool:
        """Whether the class means anything for a tensor of rank ``ndim`` (an output: ``is_input=False``)."""
        return ndim >= self.min_rank and (is_input or not self.inputs_only)


@dataclass(frozen=True, slots=True)
class DtypeClass:
    """A dtype, by torch's name.

    - ``draw``: its family, which says how its contents are drawn and what it may be: ``"float"`` (a dtype
      a kernel may accumulate in), ``"fp8"`` (a subject dtype, never accumulated in), ``"scale"`` (a scale's
      only: e8m0), ``"int"`` or ``"bool"``;
    - ``bytes``: bytes per element (the descriptor rules and the specialization classes count in bytes);
    - ``probed``: every float subject is probed with it, claimed or not (unclaimed, it must be refused);
    - ``cell``: whether it is a ``dtype`` cell.
    """

    name: str
    draw: str
    text: str
    bytes: int = 4
    probed: bool = False
    cell: bool = True


@dataclass(frozen=True, slots=True)
class ShapeClass:
    """A shape class: how the dims are drawn.

    - ``draw``: ``"specs"`` (``strategies.specs(shape=name)`` draws it) or ``"large-index"`` (the
      large-index kind's plan);
    - ``minimizes``: whether the per-dim shrink runs after a finding (not where the one pinned dim is the
      point);
    - ``cell``: whether the searched ``shape`` kind makes it a cell (``any`` is every other cell's shape,
      ``wide-outer`` a second draw of ``grad:shape:beyond-block``).
    """

    name: str
    draw: str
    text: str
    minimizes: bool = True
    cell: bool = True


@dataclass(frozen=True, slots=True)
class ValueClass:
    """A value class: what the inputs hold.

    - ``draw``: the fill (``strategies._internal.values.VALUE_DRAWS``): ``"normal"`` (N(0, 1), moved into a
      declared range), ``"exp-overflow"``, ``"infinities"``, ``"nans"``, ``"subnormal"``, ``"small-integers"``,
      ``"range-ends"``, or a quantizer's ``"zero-rows"``, ``"fp8-overflow"``, ``"fp8-subnormal"``,
      ``"fp8-midpoints"``;
    - ``claim``: ``"always"`` (ordinary: every other cell's values), ``"claimed"`` (a subject claims it
      with ``values=``; its finite values are clamped into a declared range) or ``"ranged"`` (unclaimed: a
      cell of every subject with a declared ``value_range``);
    - ``quantizer``: a quantizer's case: a cell only of a subject that claims it (never a skipped row of
      every matrix), and no ``grad`` cell.
    """

    name: str
    draw: str
    text: str
    claim: str = "claimed"
    quantizer: bool = False


@dataclass(frozen=True, slots=True)
class MaskClass:
    """A mask class: which keys each row keeps.

    - ``draw``: the mask fill (``strategies._internal.masks``): ``"causal"``, ``"random"``, ``"prefix"``,
      ``"all"`` or ``"dead-rows"``;
    - ``one_row``: the mask input is one row given as a stride-0 view over all rows (a broadcast layout).
    """

    name: str
    draw: str
    text: str
    one_row: bool = False


Row = TypeVar("Row", LayoutClass, DtypeClass, ShapeClass, ValueClass, MaskClass)


@dataclass(frozen=True, slots=True)
class Vocabulary(Generic[Row]):
    """One table: the rows of a dimension's classes in matrix order, and the dimension's own sentence."""

    name: str
    summary: str
    rows: tuple[Row, ...]

    def __post_init__(self) -> None:
        names = [r.name for r in self.rows]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice or not all(n and r.text for n, r in zip(names, self.rows)):
            raise InvalidArgument(f"Vocabulary {self.name!r}: rows={names!r}, expected unique, non-empty names "
                                  f"each with a sentence (twice: {twice})")

    def __getitem__(self, name: str) -> Row:
        for r in self.rows:
            if r.name == name:
                return r
        raise InvalidArgument(f"{self.name}: class={name!r}, expected one of {self.names()}")

    def __contains__(self, name: object) -> bool:
        return any(r.name == name for r in self.rows)

    def select(self, **where: Any) -> tuple[Row, ...]:
        """The rows whose fields equal ``where``'s values (a tuple value: any of them), in table order."""
        return tuple(r for r in self.rows if all(
            getattr(r, k) in v if isinstance(v, tuple) else getattr(r, k) == v for k, v in where.items()))

    def names(self, **where: Any) -> tuple[str, ...]:
        """The names of :meth:`select`'s rows."""
        return tuple(r.name for r in self.select(**where))

    def classes(self, rows: tuple[Row, ...] | None = None, *, prefix: str = "",
                text: Callable[[Row], str] | None = None) -> tuple[CellClass, ...]:
        """The cell classes of ``rows`` (default: every row that is a cell), named ``prefix + name``, each
        explained by its row's sentence (or ``text(row)``)."""
        rows = tuple(r for r in self.rows if getattr(r, "cell", True)) if rows is None else rows
        return tuple(CellClass(prefix + r.name, text(r) if text else r.text) for r in rows)

    def dimension(self, rows: tuple[Row, ...] | None = None) -> Dimension:
        """The matrix's dimension of this table: its name, its sentence and :meth:`classes`."""
        return Dimension(self.name, self.summary, self.classes(rows))

    def with_row(self, row: Row, *, before: str | None = None) -> "Vocabulary[Row]":
        """This table with ``row`` added (at the end, or before the row named ``before``)."""
        if self.rows and type(row) is not type(self.rows[0]):
            raise InvalidArgument(f"Vocabulary {self.name!r}: row={row!r}, expected a {type(self.rows[0]).__name__}")
        at = len(self.rows) if before is None else self.names().index(before)
        return Vocabulary(self.name, self.summary, self.rows[:at] + (row,) + self.rows[at:])


_DERIVED: dict[tuple, tuple[tuple, Any]] = {}


def derived(build: Callable[..., T], *tables: Vocabulary) -> T:
    """``build(*tables)``, built once for these very tables (a table replaced is built again): what a kind
    derives from the tables (its dimension), which is asked for at every cell.  ``build`` is a function
    defined once (a module's, or a method), never a fresh lambda."""
    key = (build, *map(id, tables))
    hit = _DERIVED.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], tables)):
        hit = _DERIVED[key] = (tables, build(*tables))
    return hit[1]


LAYOUTS: Vocabulary[LayoutClass] = Vocabulary("layout", "inputs laid out in memory this way", (
    LayoutClass("contiguous", "contiguous", "row-major from the start of its storage"),
    LayoutClass("transposed", "permuted", "dims permuted (a .t() or .permute() view)", min_rank=2),
    LayoutClass("sliced", "stepped", "stepped through with gaps between elements (x[:, ::2])"),
    LayoutClass("padded", "padded", "rows padded with extra elements after each innermost row",
                choices=(1, 3, 16, 17, 61), min_rank=2),
    LayoutClass("offset", "offset", "a storage offset of 1 to 64 elements (misaligned starts included)",
                choices=(1, 2, 3, 16, 17, 64)),
    LayoutClass("broadcast", "stride0", "stride-0 dims, as from expand() (or the gradient of .sum())",
                min_rank=1, inputs_only=True),
    LayoutClass("size1", "odd-stride", "size-1 dims carrying odd strides (legal: any stride works there)",
                choices=(7, 12345, 1 << 20), grad_output=False),
    LayoutClass("mixed", "per-input", "a different layout class for each input that claims any layout",
                scope="spec", grad_output=False),
    LayoutClass("memory", "per-claimed-input", "any claimed layout per input",
                scope="spec", grad_output=False, cell=False),
))

# The layouts that break one rule of a tensor descriptor each while staying legal torch views, in matrix
# order: the classes of the ``descriptor`` cells (``model.descriptors`` has the rules).
DESCRIPTOR_LAYOUTS: Vocabulary[LayoutClass] = Vocabulary(
    "descriptor", "inputs read through a tensor descriptor, laid out to break one of its rules", (
        LayoutClass("misaligned-base", "offset", "a storage offset of one element: the base is not 16-byte aligned",
                    choices=(1,), rule="base"),
        LayoutClass("unaligned-rows", "padded", "rows one element longer than the last dim (a row stride of K+1 "
                    "elements)", choices=(1,), min_rank=2, rule="strides"),
        LayoutClass("transposed", "swap-last", "the last two dims swapped (a .t() view): the last dim is strided",
                    min_rank=2, rule="last-dim"),
    ))

DTYPES: Vocabulary[DtypeClass] = Vocabulary(
    "dtype", "every input that claims it in this dtype; unclaimed ones must be refused", (
        DtypeClass("float16", "float", "float16 inputs", bytes=2, probed=True),
        DtypeClass("bfloat16", "float", "bfloat16 inputs", bytes=2, probed=True),
        DtypeClass("float32", "float", "float32 inputs", bytes=4, probed=True),
        DtypeClass("float64", "float", "float64 inputs", bytes=8),
        # 8-bit floats (e4m3fn: NaN, no infinity, largest 448; e5m2: IEEE-like, largest 57344): subject dtypes,
        # probed only where claimed; e8m0 (a power of two, no sign, no zero) for scales.
        DtypeClass("float8_e4m3fn", "fp8", "float8_e4m3fn inputs", bytes=1),
        DtypeClass("float8_e5m2", "fp8", "float8_e5m2 inputs", bytes=1),
        DtypeClass("float8_e8m0fnu", "scale", "float8_e8m0fnu scales", bytes=1, cell=False),
        DtypeClass("int8", "int", "int8 inputs", bytes=1),
        DtypeClass("int16", "int", "int16 inputs", bytes=2),
        DtypeClass("int32", "int", "int32 inputs", bytes=4),
        DtypeClass("int64", "int", "int64 inputs", bytes=8),
        DtypeClass("uint8", "int", "uint8 inputs", bytes=1),
        DtypeClass("bool", "bool", "bool inputs", bytes=1),
    ))

SHAPES: Vocabulary[ShapeClass] = Vocabulary("shape", "dims drawn this way", (
    ShapeClass("any", "specs", "every dim anywhere in its range, within the element budget", cell=False),
    ShapeClass("tiny", "specs", "every dim at most 3: where a grid or a tail block is degenerate"),
    ShapeClass("non-pow2", "specs", "sizes 2^k +- 1 and primes, so every tail block is partial"),
    ShapeClass("beyond-block", "specs", "the widest dim past 4096, beyond what one tile of a row kernel holds, or "
               "an outer dim past 4096 with the rest small (a long batch of short rows)"),
    ShapeClass("wide-outer", "specs", "an outer dim past 128 (any SM count), up to the top of its range: a long "
               "batch of short rows, where partial-sum buffers sized by the grid go wrong", cell=False),
    ShapeClass("empty", "specs", "a dim of size 0: the launcher must return an empty result or refuse",
               minimizes=False),
    ShapeClass("beyond-range", "specs", "a dim outside the declared range: the launcher must refuse it",
               minimizes=False),
    ShapeClass("large-index", "large-index", "one input past 2^31 elements, where an int32 offset such as "
               "pid * BLOCK wraps around"),
))

VALUES: Vocabulary[ValueClass] = Vocabulary("values", "inputs holding these values (a class the subject claims)", (
    ValueClass("ordinary", "normal", "distinct finite values of moderate size", claim="always"),
    ValueClass("huge", "exp-overflow", "magnitudes around exp's overflow point; some rows all negative"),
    ValueClass("inf", "infinities", "some elements +inf or -inf"),
    ValueClass("nan", "nans", "some elements NaN"),
    ValueClass("denormal", "subnormal", "half the elements subnormal"),
    ValueClass("ties", "small-integers", "small integers, so sums and maxima tie exactly"),
    ValueClass("zero-blocks", "zero-rows", "some rows all zero, so every group and block in them has an amax of 0",
               quantizer=True),
    ValueClass("fp8-overflow", "fp8-overflow", "magnitudes from half to four times fp8's largest finite values "
               "(448, 57344)", quantizer=True),
    ValueClass("fp8-subnormal", "fp8-subnormal", "magnitudes below fp8's smallest normals (2^-6, 2^-14), where the "
               "grid is fixed-point", quantizer=True),
    ValueClass("fp8-ties", "fp8-midpoints", "midpoints of the e4m3fn grid, every 16th element +-448 so each "
               "group's scale is exact", quantizer=True),
    ValueClass("extreme", "range-ends", "inputs that declare a value_range filled out to its ends; some rows all at "
               "one end", claim="ranged"),
))

MASKS: Vocabulary[MaskClass] = Vocabulary("mask", "the mask input holding this pattern", (
    MaskClass("causal", "causal", "each row keeps the keys up to its own position"),
    MaskClass("random", "random", "each key kept with probability 1/2, at least one per row"),
    MaskClass("padding", "prefix", "each batch keeps a prefix of the keys"),
    MaskClass("all", "all", "every key kept"),
    MaskClass("fully-masked", "dead-rows", "some rows keep no key: the declared policy decides the answer"),
    MaskClass("broadcast", "prefix", "one padding row given as a stride-0 view over all rows", one_row=True),
))
