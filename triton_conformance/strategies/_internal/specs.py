"""The spec strategy: one example's dims, dtypes, layouts, values and mask for one contract cell.

The :class:`~triton_conformance.model.spec.Spec` value object lives in the
model; this module draws it, so a failure shrinks to a short, readable spec.
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.contract import Contract, Dim
from triton_conformance.model.spec import Spec
from triton_conformance.strategies._internal.cached import integers, sampled_from
from triton_conformance.strategies._internal.descriptor_layouts import (
    breaks_descriptor_rules,
    descriptor_inputs,
    descriptor_layouts,
)
from triton_conformance.strategies._internal.input_draws import input_dtypes, input_layouts
from triton_conformance.strategies._internal.related import (
    break_relation,
    broken_relations_strategy,
    derive,
    derived_dims,
    source_bounds,
    unforced,
)
from triton_conformance.strategies._internal.sizes import non_power_of_two_sizes, palette_sizes, sizes
from triton_conformance.errors import InvalidArgument
from triton_conformance.strategies._internal.validation import check_one_of

__all__ = ["specs", "in_shape_class", "is_bounded", "outer_dims", "UNBOUNDED", "DEFAULT_MAX_ELEMENTS", "BEYOND_BLOCK", "WIDE_OUTER_FROM", "WIDE_OUTER_SPREAD"]

DEFAULT_MAX_ELEMENTS = 1 << 14
# Dims other than the widest one are the grid in most kernels, and each program
# costs milliseconds under the interpreter: keep them short unless asked.
DEFAULT_MAX_OUTER = 64
# Past the largest block a row kernel plausibly uses in one tile.
BEYOND_BLOCK = 4097
# One draw in WIDE_ODDS + 1 makes another dim than the widest the wide one (a long
# batch of short rows), up to WIDE_OUTER_FACTOR * max_outer: each program costs
# milliseconds under the interpreter, and outer dims usually set the grid.
WIDE_ODDS = 15
WIDE_OUTER_FACTOR = 4
# An outer dim past the programs a launch plausibly sizes a buffer for (one slot per SM: 108 on an A100,
# 132 on an H100, 148 on a B200, 304 on an MI300X; 128 or 256 rows of partial sums): the "wide-outer"
# class draws from WIDE_OUTER_FROM to WIDE_OUTER_SPREAD, or in the top half of the dim's range.
WIDE_OUTER_FROM = 129
WIDE_OUTER_SPREAD = 512


def _dim_order(contract: Contract) -> list[str]:
    # The reduced dim first, so it gets the widest range before the budget bites.
    order = list(contract.dims)
    if contract.reduces:
        order.remove(contract.reduces)
        order.insert(0, contract.reduces)
    return order


def _largest_dim(contract: Contract) -> str:
    if contract.reduces:
        return contract.reduces
    return max(contract.dims, key=lambda s: (contract.dims[s].max, -list(contract.dims).index(s)))


def _integer_root(n: int, r: int) -> int:
    """The largest c with c ** r <= n."""
    c = int(round(n ** (1.0 / r))) if r > 1 else n
    while c > 0 and c ** r > n:
        c -= 1
    while (c + 1) ** r <= n:
        c += 1
    return c


def wide_candidates(contract: Contract, max_outer: int) -> list[str]:
    """The dims other than the widest that a draw may make the wide one: those whose range passes ``max_outer``."""
    widest = _largest_dim(contract)
    return [s for s, d in contract.dims.items() if s != widest and d.max > max_outer
            and s not in derived_dims(contract.relations)]


@st.composite
def _dims(draw, contract: Contract, shape_class: str, budget: int, max_outer: int,
          forced: dict[str, int], palette: bool = False) -> dict[str, int]:
    """Draw every dim symbol, keeping each input's element count within ``budget``.

    The widest dim (the reduced one if named) takes what the budget leaves; every
    other dim is capped at ``max_outer``.  One draw in ``WIDE_ODDS + 1`` then draws
    again with another dim as the wide one, up to ``WIDE_OUTER_FACTOR * max_outer``,
    every other dim (the usual widest included) capped at ``max_outer``.  The choice
    comes after the ordinary draw, so a failure shrinks as before.
    """
    out = _draw_dims(draw, contract, shape_class, budget, max_outer, forced, palette, _largest_dim(contract), None)
    others = [s for s in wide_candidates(contract, max_outer) if s not in forced]
    if others and shape_class != "tiny" and not forced and draw(_WIDE_CHOICE) == WIDE_ODDS:
        wide = draw(sampled_from(tuple(others)))
        out = _draw_dims(draw, contract, shape_class, budget, max_outer, forced, palette, wide,
                         WIDE_OUTER_FACTOR * max_outer)
    return out


_WIDE_CHOICE = st.integers(0, WIDE_ODDS)
_SEEDS = st.integers(0, 2**31 - 1)


def _draw_dims(draw, contract: Contract, shape_class: str, budget: int, max_outer: int, forced: dict[str, int],
               palette: bool, widest: str, wide_cap: int | None) -> dict[str, int]:
    out: dict[str, int] = dict(forced)
    order = _dim_order(contract)
    if wide_cap is not None:  # the wide one first, so it gets its range before the budget bites
        order.remove(widest)
        order.insert(0, widest)
    derived = derived_dims(contract.relations)
    # A class that pins a derived dim past a block pins a floor: its sources are drawn to reach it.
    floors = {s: out.pop(s) for s in list(out) if s in derived} if shape_class == "beyond-block" else {}

    def bounded(sym: str) -> Dim:
        d = contract.dims[sym]
        if sym != widest:
            return Dim(d.min, max(d.min, min(d.max, max_outer)))
        if wide_cap is not None:
            return Dim(d.min, max(d.min, min(d.max, wide_cap)))
        return d

    def room(sym: str) -> int:
        # The budget for this dim: what remains in the tightest input that holds it,
        # after the minimum of each dim still to be drawn is set aside.
        cap = bounded(sym).max
        for spec in contract.inputs.values():
            if sym not in spec.shape:
                continue
            used = 1
            for other in spec.shape:
                if other in out:
                    used *= max(out[other], 1)
                elif other != sym:
                    used *= max(contract.dims[other].min, 1)
            cap = min(cap, _integer_root(budget // used, spec.shape.count(sym)))  # (N, N) takes N squared
        return cap

    for sym in order:
        if sym in out or sym in derived:  # a derived dim is built from its sources, below
            continue
        d = bounded(sym)
        lo, cap = source_bounds(contract, sym, out, d.min, max(d.min, room(sym)), room, floors)
        if shape_class == "tiny":
            out[sym] = draw(integers(lo, max(lo, min(cap, 3))))
        elif palette:  # few distinct sizes per specialization class, so compiled kernels are reused
            # The palette of the dim's own range, cut at the budget: the cut itself
            # varies with the other dims, so it would be a new size every time.
            pool = tuple(v for v in palette_sizes(d.min, d.max) if lo <= v <= cap) or (lo,)
            if shape_class == "non-pow2":
                pool = tuple(v for v in pool if v > 1 and v & (v - 1)) or pool
            out[sym] = draw(sampled_from(pool))
        elif shape_class == "non-pow2":
            out[sym] = draw(non_power_of_two_sizes(min_value=lo, max_value=cap))
        else:
            out[sym] = draw(sizes(min_value=lo, max_value=cap))
    return derive(draw, contract, out, shape_class, room, floors)


def outer_dims(contract: Contract) -> list[str]:
    """The dims other than the widest whose range passes :data:`WIDE_OUTER_FROM`: where ``"wide-outer"`` applies."""
    widest = _largest_dim(contract)
    return [s for s, d in contract.dims.items() if s != widest and d.max >= WIDE_OUTER_FROM
            and s not in derived_dims(contract.relations)]


def _wide_outer(contract: Contract, sym: str, budget: int, palette: bool = False):
    """Strategy pinning outer dim ``sym`` past :data:`WIDE_OUTER_FROM`: half the draws in the top half of its
    range (capped at twice the element budget, as past a block), half just past any SM count (the octaves
    129-256 and 257-512).  A threshold anywhere below the top half is crossed there; the sizes between cost
    more than either (an interpreted program a row) and cross no threshold the top half does not.  With
    ``palette``, each part's first size, the next multiple of 16 and one past it."""
    d = contract.dims[sym]
    lo = max(d.min, WIDE_OUTER_FROM)
    hi = max(lo, min(d.max, 2 * budget))
    top_lo = max(lo, hi // 2 + 1)
    near = max(lo, min(hi, WIDE_OUTER_SPREAD))
    if palette:
        starts = {n for a in (lo, top_lo) for n in (a, -(-a // 16) * 16, -(-a // 16) * 16 + 1)}
        return st.sampled_from(sorted(n for n in starts if n <= hi)).map(lambda n: {sym: n})
    top = st.integers(top_lo, hi)
    octaves = [(max(lo, (1 << (e - 1)) + 1), min(near, 1 << e)) for e in range(lo.bit_length(), near.bit_length() + 1)]
    octaves = [(a, b) for a, b in octaves if a <= b]
    spread = st.sampled_from(octaves).flatmap(lambda ab: st.integers(*ab))
    return st.one_of(top, spread).map(lambda n: {sym: n})


def _forced_dims(contract: Contract, shape_class: str, layout_class: str | None, budget: int,
                 palette: bool = False):
    """Strategy for the dims a cell pins before the rest are drawn."""
    dims = contract.dims
    if shape_class == "wide-outer":
        return st.sampled_from(outer_dims(contract)).flatmap(lambda sym: _wide_outer(contract, sym, budget, palette))
    if shape_class == "beyond-block":
        # The widest dim, or an outer one (a long batch: the other dims then stay small).
        wide = unforced(contract, [_largest_dim(contract)] + [s for s, d in dims.items()
                                                              if s != _largest_dim(contract) and d.max >= BEYOND_BLOCK])
        return st.sampled_from(wide).flatmap(lambda sym: _beyond_block(contract, sym, budget, palette))
    return _other_forced_dims(contract, shape_class, layout_class)


def _beyond_block(contract: Contract, sym: str, budget: int, palette: bool):
    """Strategy pinning ``sym`` past a block."""
    hi = contract.dims[sym].max
    lo = max(contract.dims[sym].min, min(BEYOND_BLOCK, hi // 2 + 1))
    top = max(lo, min(hi, 2 * budget))
    if palette:  # the boundary itself, the next multiple of 16 and one past it
        up16 = -(-lo // 16) * 16
        return st.sampled_from(sorted({n for n in (lo, up16, up16 + 1) if n <= top} | {lo})).map(
            lambda n: {sym: n})
    return st.integers(lo, top).map(lambda n: {sym: n})


# A dim range this wide is unbounded in practice: a draw past it would be millions of rows.
UNBOUNDED = 1 << 24


def in_shape_class(shape: str, candidate: Spec, original: Spec) -> bool:
    """Whether ``candidate`` (shrunk from, or moved near, ``original``) still belongs to shape class ``shape``."""
    if shape == "tiny":
        return all(n <= 3 for n in candidate.dims.values())
    if shape == "non-pow2":  # every dim it moved is still 2^k +- 1 or the like
        return all(n == original.dims[s] or (n > 1 and n & (n - 1)) for s, n in candidate.dims.items())
    if shape == "beyond-block":
        widest = max(original.dims, key=lambda s: original.dims[s])
        return candidate.dims[widest] >= min(BEYOND_BLOCK, original.dims[widest])
    if shape == "wide-outer":  # every dim that was past a grid's programs still is
        return all(candidate.dims[s] >= WIDE_OUTER_FROM for s, n in original.dims.items() if n >= WIDE_OUTER_FROM)
    return True


def is_bounded(d: Dim) -> bool:
    """Whether ``d`` has an end a draw can step past: a max below :data:`UNBOUNDED`, or a min above 1."""
    return d.max < UNBOUNDED or d.min > 1


def _other_forced_dims(contract: Contract, shape_class: str, layout_class: str | None):
    dims = contract.dims
    if shape_class == "empty":
        admits_zero = unforced(contract, [s for s, d in dims.items() if d.min == 0])
        return st.sampled_from(admits_zero or unforced(contract, list(dims))).map(lambda s: {s: 0})
    if shape_class == "beyond-range":
        def outside(s: str):
            d = dims[s]
            above = st.integers(d.max + 1, d.max + max(1, min(d.max, 1024)))
            if d.max >= UNBOUNDED:  # past a range that is unbounded in practice: only below it
                return st.integers(max(0, d.min - 4), d.min - 1)
            return above if d.min <= 1 else st.one_of(above, st.integers(max(0, d.min - 4), d.min - 1))
        bounded = [s for s, d in dims.items() if is_bounded(d)]
        return st.sampled_from(bounded or list(dims)).flatmap(lambda s: outside(s).map(lambda n: {s: n}))
    if layout_class == "size1":
        ones = unforced(contract, [s for s, d in dims.items() if d.min <= 1 <= d.max])
        return st.sampled_from(ones).map(lambda s: {s: 1}) if ones else st.just({})
    return st.just({})


def specs(
    contract: Contract,
    *,
    layout: str | None = None,
    dtype: str | None = None,
    shape: str = "any",
    values: str = "ordinary",
    mask: str | None = None,
    dtypes: tuple[str, ...] | None = None,
    max_elements: int | None = None,
    max_outer: int = DEFAULT_MAX_OUTER,
    palette: bool = False,
    descriptor: str | None = None,
) -> st.SearchStrategy[Spec]:
    """Returns a strategy for :class:`Spec` examples of ``contract``.

    Each class argument pins one dimension of the example; every other one
    keeps its default (contiguous inputs, a drawn claimed dtype, any shape,
    ordinary values, a random mask):

    - ``layout``: a layout class for some inputs (``"transposed"``, ...), ``"mixed"``
      (a class per input), ``"memory"`` (a class per input that claims any layout), or None;
    - ``dtype``: the dtype every input that claims it gets (one it does not claim, for a probe);
    - ``shape``: ``"any"``, ``"tiny"``, ``"non-pow2"``, ``"beyond-block"``, ``"wide-outer"`` (an outer
      dim past 128: a long batch of short rows, past a grid's programs), ``"empty"`` or ``"beyond-range"``;
    - ``values``: the value class of the inputs' contents (``"ordinary"``, ``"nan"``, ...;
      ``"extreme"`` fills inputs that declare a ``value_range`` out to its ends);
    - ``mask``: the mask class (default ``"random"`` when the contract has a mask);
    - ``dtypes``: float dtypes that may be drawn where no dtype is pinned
      (default: all the contract claims);
    - ``max_elements``: cap on each input's element count (the contract's own
      ``max_elements`` caps it too; default 16384), except for dims a class pins;
    - ``max_outer``: cap on every dim but the widest (the reduced one if named),
      since those usually set the grid; one draw in 16 makes another dim the wide
      one instead, up to 4 * ``max_outer`` (``shape="beyond-block"`` may pin an
      outer dim past 4096, the other dims then taking what the budget leaves);
    - ``palette``: draw sizes from :func:`palette_sizes`, a few per Triton
      specialization class, so that on a compiling back end (CUDA) repeated
      examples reuse kernels instead of compiling one per example;
    - ``descriptor``: a class of ``vocabulary.DESCRIPTOR_LAYOUTS`` (instead of ``layout``): some of the inputs
      read through a tensor descriptor laid out to break that class's rule, and only specs where it does.

    Shrinks towards small dims, the first dtype, mild layouts and seed 0.
    """
    # The classes are the vocabulary tables' rows (model/vocabulary.py), read here, never copied.
    if layout is not None:
        check_one_of("specs", "layout", layout, vocabulary.LAYOUTS.names())
    check_one_of("specs", "shape", shape, vocabulary.SHAPES.names(draw="specs"))
    if descriptor is not None:
        check_one_of("specs", "descriptor", descriptor, vocabulary.DESCRIPTOR_LAYOUTS.names())
        if layout is not None or not descriptor_inputs(contract, descriptor):
            raise InvalidArgument(f"specs: descriptor={descriptor!r}, expected layout=None and an input declared "
                                  f"descriptor=True that the class applies to; layout={layout!r}")
    if shape == "wide-outer" and not outer_dims(contract):
        raise InvalidArgument(f"specs: shape='wide-outer', expected a contract with a dim other than the widest "
                              f"whose range reaches {WIDE_OUTER_FROM}; dims={dict(contract.dims)!r}")
    check_one_of("specs", "values", values, vocabulary.VALUES.names())
    if mask is not None:
        check_one_of("specs", "mask", mask, vocabulary.MASKS.names())
    caps = [c for c in (max_elements, contract.max_elements) if c]
    budget = min(caps) if caps else DEFAULT_MAX_ELEMENTS
    claimed = contract.float_dtypes() or tuple(contract.inputs[contract.tensor_names[0]].dtypes)
    pool = tuple(d for d in claimed if dtypes is None or d in dtypes) or claimed
    mask_class = mask if mask is not None else ("random" if contract.mask_name else None)

    drawn_dtype = st.just(dtype) if dtype is not None else st.sampled_from(pool)
    scalars = st.fixed_dictionaries({
        name: (st.integers(int(s.low), int(s.high)) if s.kind == "int" else st.booleans() if s.kind == "bool"
               else st.floats(s.low, s.high, allow_nan=False, allow_infinity=False))
        for name, s in contract.scalars.items()
    })

    forced_dims = _forced_dims(contract, shape, layout, budget, palette)
    # Out of range, a spec may also break a relation between dims (C = G * Cg one off).
    broken = broken_relations_strategy(contract) if shape == "beyond-range" else st.none()

    # The composites' strategy objects are built once (per forced dims), not at every draw: Hypothesis
    # validates each new object it draws from; the same objects draw the same choices.
    spec_layouts = (descriptor_layouts(contract, descriptor) if descriptor is not None
                    else input_layouts(contract, layout, mask_class))

    @lru_cache(maxsize=256)
    def drawn_dims(forced: tuple[tuple[str, int], ...]) -> st.SearchStrategy[dict[str, int]]:
        return _dims(contract, shape, budget, max_outer, dict(forced), palette)

    @st.composite
    def draw_spec(draw) -> Spec:
        relation = draw(broken)
        forced = {} if relation is not None else draw(forced_dims)
        dims = draw(drawn_dims(tuple(forced.items())))
        if relation is not None:
            dims = break_relation(contract, relation, dims)
        return Spec(
            dims=dims,
            dtypes=input_dtypes(contract, draw(drawn_dtype)),
            layouts=draw(spec_layouts),
            scalars=draw(scalars),
            values=values,
            mask=mask_class,
            seed=draw(_SEEDS),
        )

    if descriptor is not None:
        return draw_spec().filter(lambda spec: breaks_descriptor_rules(contract, spec))
    return draw_spec()
