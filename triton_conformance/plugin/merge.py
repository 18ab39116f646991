"""Whether a run may merge its results into the results file already there, so that nothing computed is lost.

A partial run (``-k``, ``--maxfail``, ``--conformance-cell``, a subset of the
subjects) replaces only the cells it ran
(:func:`triton_conformance.reports.combine.update_results`, the one merge of
results documents).  A fresh document is written only when asked
(``--conformance-fresh``).

A file of another schema, version or device is never merged into:
:func:`check_mergeable` refuses it before any cell runs.
"""

from __future__ import annotations

import os

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.reports.results_json import check_cells, read_results

__all__ = ["check_mergeable"]

FRESH_HINT = "pass --conformance-fresh (ini conformance_fresh = true) to replace it"


def check_mergeable(path: str, *, device: str, where: str = "--conformance-results") -> dict | None:
    """The document at ``path`` if this run may merge into it; None if there is none.

    Raises ConformanceUsageError naming ``where`` if the file is unreadable,
    of another schema or version, or from another device.
    """
    if not os.path.exists(path):
        return None
    try:
        doc = check_cells(read_results(path), path)
    except (OSError, ValueError) as exc:
        raise ConformanceUsageError(f"{where}={path!r} cannot be merged into: {exc}; {FRESH_HINT}, "
                                    "or choose another path") from None
    theirs = (doc.get("environment") or {}).get("device")
    if theirs != device:
        raise ConformanceUsageError(f"{where}={path!r} holds results from device {theirs!r} and this run is on "
                                    f"{device!r}; expected the same device to merge them: {FRESH_HINT}, or "
                                    "choose another path")
    return doc
