"""Specialization classes of examples, so a compiling back end searches without compiling at every draw.

Triton compiles one kernel per specialization of its arguments: each int
argument is ``== 1``, ``% 16 == 0`` or neither; each pointer is 16-byte
aligned or not; each stride is 1, a multiple of 16 or neither; and launchers
derive constexpr block sizes from dims, usually the next power of two.  A
new specialization costs 75-250 ms on an H200 against about 35 us for a
cached launch, so two examples of the same **class** (:func:`signature`)
cost one compile, not two.

The signature is computed from the spec alone, before anything is built.
It over-splits rather than under-splits (every dim counts as an int
argument and a block size, every stride as specialized), so two examples
with one signature share their kernels; a prediction that misses is caught
by the compile hook, which refuses what the budget cannot pay for.

:class:`ClassBook` keeps, per subject, the classes that have run and one
example of each.  Once a cell may buy no new class, :func:`steer` moves a
drawn example into a class already compiled: the same layouts, dtypes,
values and seed, with each dim moved to the nearest size of the compiled
class (same power-of-two block, same ``== 1`` / ``% 16`` class), so the
search goes on varying sizes and contents within the kernels it has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from triton_conformance.conformance.expectation import expectation
from triton_conformance.conformance.search.compiles import CellCompiles, InProcess
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.model.contract import Contract
from triton_conformance.model.inputs import DTYPE_BYTES
from triton_conformance.model.spec import Spec, strides_for
from triton_conformance.strategies import specialization_class

__all__ = ["signature", "ClassBook", "BOOK", "steer", "size_class", "nearest_in_class", "in_compiled_class",
           "counted", "book_name", "book_of"]


def _block(n: int) -> int:
    """The power-of-two block a launcher would derive from ``n`` (``triton.next_power_of_2``)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def size_class(n: int) -> tuple[int, str]:
    """A dim's class: its power-of-two block and its int class."""
    return _block(n), specialization_class(n)


def signature(contract: Contract, spec: Spec) -> tuple:
    """What Triton would specialize on for ``spec``: dims, dtypes, alignments, stride and scalar classes."""
    dims = tuple((sym, size_class(spec.dims[sym])) for sym in sorted(spec.dims))
    tensors = []
    for name, decl in contract.inputs.items():
        shape = tuple(spec.dims[s] for s in decl.shape)
        strides, offset, _ = strides_for(shape, spec.layout(name))
        dtype = spec.dtypes.get(name, "")
        aligned = (offset * DTYPE_BYTES.get(dtype, 4)) % 16 == 0
        tensors.append((name, dtype, aligned, tuple(specialization_class(s) if s else "0" for s in strides)))
    for name in sorted(set(spec.layouts) - set(contract.inputs)):  # a grad_output: its shape is the output's
        layout = spec.layouts[name]
        tensors.append((name, layout.kind, layout.perm, layout.steps, layout.broadcast, layout.pad % 16 == 0,
                        layout.offset % 8 == 0))
    scalars = []
    for name, value in sorted(spec.scalars.items()):
        kind = getattr(contract.scalars.get(name), "kind", "float")
        if kind == "bool":
            scalars.append((name, bool(value)))
        elif kind == "int":
            scalars.append((name, specialization_class(int(value))))
    return dims, tuple(tensors), tuple(scalars)


def nearest_in_class(n: int, target: tuple[int, str], lo: int, hi: int, *, upwards: bool = False) -> int | None:
    """The size in ``[lo, hi]`` of class ``target`` (:func:`size_class`) nearest to ``n``, or None.

    Ties (and, with ``upwards``, every choice between a smaller and a larger size) go to the
    smaller one, or with ``upwards`` to the larger one.
    """
    block, kind = target
    first, last = max(lo, block // 2 + 1), min(hi, block)
    if block == 1:
        first = max(lo, 0)
    if first > last:
        return None
    if kind == "one":
        return 1 if first <= 1 <= last else None
    m = min(max(n, first), last)
    fits = lambda v: v != 0 and specialization_class(v) == kind  # noqa: E731 - Triton's one int class test
    below = next((v for v in range(m, max(first, m - 16) - 1, -1) if fits(v)), None)
    above = next((v for v in range(m, min(last, m + 16) + 1) if fits(v)), None)
    if below is None or above is None:
        return above if below is None else below
    if upwards:
        return above
    return below if n - below <= above - n else above


@dataclass
class _Classes:
    """One subject's classes that have run, each with the example that first ran it, and by which cells."""

    examples: dict[tuple, Spec] = field(default_factory=dict)
    cells: dict[str, set] = field(default_factory=dict)  # cell -> the signatures it ran


@dataclass
class ClassBook(InProcess):
    """Specialization classes per subject that have run in this process (so are compiled), or, for a
    subject split between workers, in any of its processes (:mod:`.shared_ledger`)."""

    subjects: dict[str, _Classes] = field(default_factory=dict)

    def known(self, subject: str, sig: tuple) -> bool:
        self._sync()
        return sig in self.subjects.get(subject, _Classes()).examples

    def record(self, subject: str, sig: tuple, spec: Spec, cell: str = "") -> None:
        self._sync()
        book = self.subjects.get(subject)
        if book is not None and sig in book.examples and sig in book.cells.get(cell, ()):
            return  # nothing new: no write
        with self._writing():
            book = self.subjects.setdefault(subject, _Classes())
            book.examples.setdefault(sig, spec)
            book.cells.setdefault(cell, set()).add(sig)

    def classes(self, subject: str) -> dict[tuple, Spec]:
        self._sync()
        return self.subjects.get(subject, _Classes()).examples

    def ran_by(self, subject: str, cell: str) -> set:
        """The signatures ``cell`` itself ran: their examples are in the cell's class, layouts included."""
        self._sync()
        return self.subjects.get(subject, _Classes()).cells.get(cell, set())

    def forget(self, subject: str | None = None) -> None:
        with self._writing():
            if subject is None:
                self.subjects.clear()
            else:
                self.subjects.pop(subject, None)


BOOK = ClassBook()


def book_of(share: CellCompiles) -> ClassBook:
    """The class book ``share``'s subject keeps its classes in: its own when it is split between workers."""
    return BOOK if share.book is None else share.book


def _moved(contract: Contract, spec: Spec, target_sig: tuple, *, upwards: bool) -> Spec | None:
    """``spec`` with each dim moved into the class it has in ``target_sig``, or None if a dim cannot be."""
    dims = dict(spec.dims)
    for sym, cls in target_sig[0]:
        if sym not in dims:
            return None
        if size_class(dims[sym]) == cls:
            continue
        d = contract.dims[sym]
        moved = nearest_in_class(dims[sym], cls, d.min, d.max, upwards=upwards)
        if moved is None:
            return None
        dims[sym] = moved
    return replace(spec, dims=dims)


def steer(contract: Contract, spec: Spec, classes: dict[tuple, Spec],
          admissible: Callable[[Spec], bool], own: set | frozenset = frozenset()) -> Spec | None:
    """An example of an already compiled class as near to ``spec`` as can be, or None.

    - ``classes``: compiled signatures and an example of each (:meth:`ClassBook.classes`);
    - ``admissible(candidate)``: whether a candidate stays in the cell's class and on the same
      side of the contract (and within the memory cap).

    Tries each compiled class, nearest block sizes first: ``spec``'s dims moved into the class
    (its layouts, dtypes, values and seed kept), to the nearest sizes and then to the nearest
    larger ones (a cell such as ``shape:beyond-block`` admits no smaller size); failing that, the
    class's own dims with ``spec``'s layouts.  For the classes in ``own`` (those the cell itself
    ran, so in its class whatever their layouts), then the class's layouts, dtypes and scalars
    too, with ``spec``'s dims moved or the class's own.  A candidate counts only if its signature is the class's.
    """
    def distance(sig: tuple) -> tuple:
        blocks = dict(sig[0])
        return (sum(abs(_block(n).bit_length() - blocks.get(s, (1, ""))[0].bit_length())
                    for s, n in spec.dims.items()), repr(sig))

    def candidates(sig: tuple):
        yield _moved(contract, spec, sig, upwards=False)
        yield _moved(contract, spec, sig, upwards=True)
        yield replace(spec, dims=dict(classes[sig].dims))
        if sig in own:  # the class's layouts, dtypes and scalars: the cell ran them, so they are in its class
            template = classes[sig]
            relaid = replace(spec, layouts=dict(template.layouts), dtypes=dict(template.dtypes),
                             scalars=dict(template.scalars))
            yield _moved(contract, relaid, sig, upwards=False)
            yield replace(relaid, dims=dict(template.dims))

    for sig in sorted(classes, key=distance):
        for candidate in candidates(sig):
            if candidate is not None and signature(contract, candidate) == sig and admissible(candidate):
                return candidate
    return None


DEGENERATE = 63  # a spec whose every dim is under 64 is small: a cell's one class should reach a real tile


def _degenerate_first(context: CellContext, spec: Spec, keeps_class: Callable[[Spec, Spec], bool] | None) -> bool:
    """Whether ``spec`` would spend the cell's first class on a degenerate size the cell need not keep to.

    Hypothesis draws the smallest spec first; a cell whose one class held only ``N = 1`` would move
    every later draw there.  So the first class waits for a larger draw, unless the cell admits none
    (``shape:tiny``) or the contract does not.
    """
    if context.allowance.compiles.classes or max(spec.dims.values(), default=0) > DEGENERATE:
        return False
    dims = context.subject.contract.dims
    larger = replace(spec, dims={s: min(dims[s].max, max(n, 64)) for s, n in spec.dims.items()})
    return larger != spec and (keeps_class is None or keeps_class(larger, spec))


def book_name(context: CellContext) -> str:
    """Where the class book keeps a cell's classes: per subject, and apart for backward cells (whose
    classes hold backward kernels that a forward cell's class of the same signature lacks)."""
    kernels = getattr(context.allowance.compiles, "kernels", "forward")
    return context.subject.name if kernels == "forward" else f"{context.subject.name}::{kernels}"


def in_compiled_class(context: CellContext, spec: Spec, keeps_class: Callable[[Spec, Spec], bool] | None,
                      admits: Callable[[Spec], bool]) -> Spec | None:
    """``spec`` if its class is compiled or the cell may start a new one; else the nearest example of a
    compiled class that stays in the cell's class, on the same side of the contract and that the search
    ``admits`` (the memory cap, an excluded finding); else, for a cell that has no class yet, ``spec``
    as its first class past the budget; else None."""
    contract, name, share = context.subject.contract, book_name(context), context.allowance.compiles
    book = book_of(share)
    if book.known(name, signature(contract, spec)):
        return spec
    side = expectation(contract, spec).kind
    if side != "honour":
        return spec  # a launcher should refuse it, most likely before compiling: if not, the hook discards it
    degenerate = _degenerate_first(context, spec, keeps_class)
    if share.may_start_class() and not degenerate:
        return spec

    def admissible(candidate: Spec) -> bool:
        return (expectation(contract, candidate).kind == side and admits(candidate)
                and (keeps_class is None or keeps_class(candidate, spec)))

    steered = steer(contract, spec, book.classes(name), admissible, own=book.ran_by(name, context.cell))
    if steered is None and share.classes == 0 and not degenerate:
        share.grant_first_class()  # a starved cell would check nothing: its one class is worth a compile
        return spec
    return steered


def counted(context: CellContext, spec: Spec, run: Callable[[Spec], Any]) -> Any:
    """``run(spec)`` as one example of the cell's share on CUDA: its first new kernel starts a class,
    and its class is recorded once it ran.  Elsewhere just ``run(spec)``."""
    share = context.allowance.compiles
    if share is not None:
        share.start_example()
    verdict = run(spec)
    if share is not None:
        book_of(share).record(book_name(context), signature(context.subject.contract, spec), spec, context.cell)
    return verdict
