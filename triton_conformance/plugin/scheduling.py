"""pytest-xdist scheduling that keeps each subject's cells on one worker.

Under ``--dist loadgroup`` xdist groups tests by their ``xdist_group`` mark,
which it records by appending ``@group`` to the node id; pytest 9 computes
node ids afresh, so the suffix is lost and every cell is its own unit.  This
scheduler groups conformance cells (node ids ``::subject[cell]``) by subject
itself: the subject's compile budget and Triton's kernel cache then serve all
of its cells, in order, as with one worker.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

from triton_conformance.model.cells import split_cell_id

__all__ = ["SubjectGroupScheduling", "subject_of"]


def subject_of(nodeid: str) -> str | None:
    """The subject of a conformance cell's node id ``::name[cell]`` (with any ``@group``), else None."""
    named = split_cell_id(nodeid[2:].partition("@")[0]) if nodeid.startswith("::") else None
    return named[0] if named else None


class SubjectGroupScheduling(LoadGroupScheduling):
    """``--dist loadgroup``, with each conformance subject a group of its own."""

    def _split_scope(self, nodeid: str) -> str:
        subject = subject_of(nodeid)
        return f"conformance:{subject}" if subject else super()._split_scope(nodeid)
