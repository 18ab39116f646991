"""The ``descriptor`` cells: inputs read through a tensor descriptor (TMA), laid out to break one of its rules.

A subject whose contract declares an input ``Tensor(..., descriptor=True)`` gets one cell per row of
:data:`~triton_conformance.model.vocabulary.DESCRIPTOR_LAYOUTS`: a storage offset of one element, rows of
K+1 elements, the last two dims swapped.  Each is a legal torch view, so a launcher must copy it (honoured)
or refuse it in words (rejected; outside a contiguous claim).  A descriptor it builds on the view anyway is
an ``unsafe: misaligned-descriptor`` finding: the battery checks every descriptor against the hardware's
rules on the interpreter (:mod:`triton_conformance.compat.descriptors`); on the GPU the same cells run for real.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from triton_conformance.conformance.kinds.base import CellContext
from triton_conformance.conformance.kinds.searched import SearchedKind
from triton_conformance.conformance.search.engine import Draw
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.cells import Dimension
from triton_conformance.model.outcomes import SkipReason
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.descriptor_layouts import breaks_descriptor_rules, descriptor_inputs

__all__ = ["DescriptorCells"]


class DescriptorCells(SearchedKind):
    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(vocabulary.Vocabulary.dimension, vocabulary.DESCRIPTOR_LAYOUTS)

    def values(self, subject: Subject) -> tuple[str, ...]:
        # Cells only of the subjects that declare a descriptor input, not skipped rows of every matrix.
        return super().values(subject) if descriptor_inputs(subject.contract) else ()

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        if not descriptor_inputs(subject.contract, value):
            return SkipReason(f"no input read through a descriptor has the rank {value!r} needs (2 or more)",
                              code="descriptor:rank")
        return None

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"descriptor": value}

    def draws(self, context: CellContext, value: str) -> list[Draw]:
        # A shrunk candidate stays in the class only while its layout still breaks the class's rule (rows of
        # K+1 elements are aligned again at some K), so the counterexample shows the rule the cell is about.
        contract = context.subject.contract
        return [replace(d, keeps_class=lambda c, o: breaks_descriptor_rules(contract, c))
                for d in super().draws(context, value)]
