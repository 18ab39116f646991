"""What a reproducer sets up before it imports the subject: the interpreter's compatibility shims.

A library that asks for the CUDA device or its name at import (or allocates
on ``cuda``) runs under the interpreter only with the compat layer in place
before its module is imported.  The run installed some shims (``--conformance-compat``);
a reproducer that did not would die at import, ``Torch not compiled with CUDA
enabled``, before reaching the kernel.  So every reproducer installs exactly
the shims its run had installed, after the back end's own prelude has switched
the interpreter on (:meth:`~.backend.Backend.prelude`).
"""

from __future__ import annotations

from typing import Any

import triton_conformance.compat as compat

__all__ = ["compat_prelude"]


def compat_prelude(backend: Any) -> str:
    """The reproducer's lines that install this process's compat shims (none on a compiling back end, or
    when none is installed)."""
    if backend.compiles:
        return ""
    shims = compat.installed()
    if not shims:
        return ""
    return ("from triton_conformance.conformance.interpreter_layer import install_compat\n\n"
            "# The interpreter shims the run used, before the subject's module is imported:\n"
            f"install_compat({list(shims)!r})\n")
