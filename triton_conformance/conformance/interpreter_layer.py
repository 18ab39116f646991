"""Installing the interpreter's compat layer without changing what the oracle side sees.

The shims patch torch and triton; the magnitude pass imports parts of torch
lazily (its decompositions script functions at import), and an import made
under a shim sees the shim.  Every place that installs the layer (the plugin,
the workers, the replay and the reproducers) calls :func:`install_compat`,
which makes the oracle side's imports first.
"""

from __future__ import annotations

from typing import Iterable

import triton_conformance.compat as compat
from triton_conformance.compat import DEFAULT_TARGET, TargetDevice

__all__ = ["install_compat"]


def install_compat(names: Iterable[str] | None = None, *, target: TargetDevice = DEFAULT_TARGET) -> tuple[str, ...]:
    """:func:`compat.install`, after the oracle side's imports (only under the interpreter: off it nothing is
    installed)."""
    if compat.interpreter_active():
        from triton_conformance.oracles.magnitude import import_before_shims

        import_before_shims()
    return compat.install(names, target=target)
