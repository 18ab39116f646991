"""The four testers that bench/bug_finding.py compares on the bug zoo.

Each has ``name``, ``unavailable()`` (None, or why it cannot run at all),
``skip_reason(subject, untestable)`` (None, or why it cannot test this
subject) and ``run(subject, seed=, device=, untestable=, backend=, randomize=)``
returning a :class:`~bench.testers.common.Run`.
"""

from bench.testers.handwritten import FixedShape, GpuCheck, TutorialGrid
from bench.testers.suite import Suite

__all__ = ["TESTERS", "make_tester"]

TESTERS = {t.name: t for t in (FixedShape, TutorialGrid, GpuCheck, Suite)}


def make_tester(name: str):
    """A tester by name; an unknown name is a ValueError listing the known ones."""
    if name not in TESTERS:
        raise ValueError(f"tester={name!r}, expected one of {sorted(TESTERS)}")
    return TESTERS[name]()
