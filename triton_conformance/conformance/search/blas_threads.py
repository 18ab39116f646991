"""One BLAS thread while a cell runs on the interpreter, so that a unit of counted work costs what it was fitted to.

The interpreter runs a launch's programs one at a time, and a ``tl.dot`` is a
``np.matmul`` of one block (64 x 128 x 128, say).  numpy's OpenBLAS splits
even that over every core, and its threads wait for each other by spinning:
on this project's 2-core machine ``gems_mm[shape:beyond-range]`` took 114 s
(52 s of it system time, the main thread yielding to the BLAS thread) for the
same 16M units that took 30.6 s with one BLAS thread, and 33 s in a two-worker
run where each worker's BLAS thread took the other worker's core (docs/performance.md).
A block's product is too small to gain from threads, and the results are the
same bits: OpenBLAS splits a product's rows and columns between threads, never
its sums.

numpy has no call for it, so the OpenBLAS numpy loaded is found among the
process's mapped libraries and asked directly (its ``set_num_threads``, under
whichever of the names its builds export); where there is none (another BLAS,
no ``/proc``), nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["one_blas_thread", "openblas_threads"]

# (setter, getter) names: scipy-openblas (numpy >= 2 wheels, 64-bit ints), then plain OpenBLAS builds
_NAMES = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
          ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
          ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
          ("openblas_set_num_threads", "openblas_get_num_threads"))

_FOUND: list[tuple[Any, Any]] = []  # the (setter, getter) pairs, once looked for with numpy loaded


def _mapped_openblas() -> list[str]:
    try:
        with open(f"/proc/{os.getpid()}/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "openblas" in line.lower()}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in os.path.basename(p))


def _openblas() -> list[tuple[Any, Any]]:
    if _FOUND or "numpy" not in sys.modules:  # before numpy is loaded there is nothing to find yet
        return _FOUND
    for path in _mapped_openblas():
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same library, not a second copy
        except OSError:
            continue
        for setter, getter in _NAMES:
            if hasattr(lib, setter) and hasattr(lib, getter):
                get = getattr(lib, getter)
                get.restype = ctypes.c_int
                _FOUND.append((getattr(lib, setter), get))
                break
    if not _FOUND:
        _FOUND.append((None, None))  # looked, none: do not look again
    return _FOUND


def openblas_threads() -> int | None:
    """The threads numpy's OpenBLAS uses now, or None where it cannot be asked."""
    found = [(s, g) for s, g in _openblas() if g is not None]
    return int(found[0][1]()) if found else None


@contextlib.contextmanager
def one_blas_thread(*, enabled: bool = True) -> Iterator[None]:
    """numpy's OpenBLAS on one thread inside the block, on as many as before after it (``enabled`` False:
    unchanged, as on CUDA, where the interpreter runs nothing)."""
    found = [(s, g) for s, g in _openblas() if s is not None] if enabled else []
    before = [int(g()) for _, g in found]
    for set_threads, _ in found:
        set_threads(ctypes.c_int(1))
    try:
        yield
    finally:
        for (set_threads, _), n in zip(found, before):
            set_threads(ctypes.c_int(n))
