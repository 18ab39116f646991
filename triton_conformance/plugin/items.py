"""pytest items: one per (subject, contract cell)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from triton_conformance.model.cells import cell_id
from triton_conformance.model.outcomes import CellResult, outcome
from triton_conformance.model.performance import junit_properties
from triton_conformance.model.subject import Subject

__all__ = ["ConformanceItem", "ImportFailureItem", "CellFailure", "PROPERTY", "IMPORT_CELL", "format_result",
           "import_result"]

PROPERTY = "conformance_result"
IMPORT_CELL = "import"  # the one cell of a subject module that failed to import


class CellFailure(Exception):
    def __init__(self, result: CellResult):
        super().__init__(f"{cell_id(result.subject, result.cell)}: {result.outcome}")
        self.result = result


def format_result(result: CellResult) -> str:
    lines = [f"{cell_id(result.subject, result.cell)}: {result.outcome.upper()} ({result.finding})", result.message]
    if result.counterexample:
        lines += ["", "shrunk counterexample:", json.dumps(result.counterexample.to_dict(), indent=None)]
    if result.reproducer:
        lines += ["", "reproducer:", result.reproducer]
    tb = result.details.get("traceback") if result.details else None
    if tb:
        lines += ["", "traceback:", tb]
    return "\n".join(lines)


class ConformanceItem(pytest.Item):
    def __init__(self, *, subject: Subject, cell: str, owner: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.subject = subject
        self.cell = cell
        self.owner = owner  # the ConformanceSession
        self.add_marker(pytest.mark.conformance)

    def runtest(self) -> None:
        result = self.owner.executor.run(self.subject, self.cell)  # each search's seed: the run's and the cell's
        self.user_properties.append((PROPERTY, result.to_dict()))
        # Plain strings for --junitxml, which writes each user property as a <property>.
        self.user_properties += [("conformance_subject", result.subject), ("conformance_cell", result.cell),
                                 ("conformance_outcome", result.outcome),
                                 ("conformance_finding", result.finding or "")]
        self.user_properties += junit_properties(result)  # conformance_perf_* figures of a performance cell
        if result.outcome == "skipped":
            pytest.skip(result.message)
        if not result.passed:
            if self.subject.xfail and outcome(result.outcome).kernel_fault:  # a known bug excuses the kernel only
                pytest.xfail(f"known-buggy subject ({self.subject.xfail}): {result.outcome} ({result.finding})")
            raise CellFailure(result)

    def repr_failure(self, excinfo, style=None):  # noqa: ANN001
        if isinstance(excinfo.value, CellFailure):
            return format_result(excinfo.value.result)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        module = sys.modules.get(self.subject.launcher.__module__)
        path = getattr(module, "__file__", None) or str(self.path)
        return path, None, cell_id(self.subject.name, self.cell)


def import_result(failure: Any) -> CellResult:
    """The crash cell that stands for a subject module that failed to import (an ImportFailure)."""
    return CellResult.of(failure.module, IMPORT_CELL, "crash",
                         f"cannot import subject module {failure.module!r}: {failure.error}", finding="import-error",
                         details={"traceback": failure.traceback, "module": failure.module})


class ImportFailureItem(pytest.Item):
    """A subject module that raised while importing: one failing item, so the rest of the run goes on."""

    def __init__(self, *, failure: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.failure = failure
        self.add_marker(pytest.mark.conformance)

    def runtest(self) -> None:
        result = import_result(self.failure)
        self.user_properties.append((PROPERTY, result.to_dict()))
        self.user_properties += [("conformance_subject", result.subject), ("conformance_cell", result.cell),
                                 ("conformance_outcome", result.outcome), ("conformance_finding", result.finding)]
        raise CellFailure(result)

    def repr_failure(self, excinfo, style=None):  # noqa: ANN001
        if isinstance(excinfo.value, CellFailure):
            line = excinfo.value.result.message
            if self.config.get_verbosity() > 0:
                return f"{line}\n\n{self.failure.traceback}"
            return line + "  (-v shows the traceback)"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return str(self.path), None, cell_id(self.failure.module, IMPORT_CELL)
