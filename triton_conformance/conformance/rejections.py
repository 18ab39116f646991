"""How a launcher's raised exception is read, and the oracle's own failure (:class:`OracleError`).

A launcher's exception is its refusal of an input when its own code raised it in words
(:func:`rejection`); raised inside triton or torch, or with no message, it is unexplained.  A subject's
oracle that raises is an :class:`OracleError`: a mistake in the declaration, never a verdict.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from typing import Any

__all__ = ["OracleError", "as_tuple", "clean_rejection", "exception_text", "rejection"]


def as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def exception_text(exc: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-limit:]


class OracleError(BaseException):
    """The subject's oracle (or ``error_scale``) raised.

    A BaseException, so neither the launcher's ``except Exception`` nor
    Hypothesis takes it for a failure of the kernel: it ends the cell as an
    ``oracle-error``.
    """

    def __init__(self, what: str, exc: BaseException):
        super().__init__(f"the subject's {what} raised {type(exc).__name__}: {exc}")
        self.what = what
        self.traceback = exception_text(exc)


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    """The installed package directories of triton and torch (imported by now: the launcher ran)."""
    roots = []
    for name in ("triton", "torch"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            roots.append(os.path.dirname(os.path.realpath(path)) + os.sep)
    return tuple(roots)


def _innermost_file(exc: BaseException) -> str:
    tb = exc.__traceback__
    last = ""
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return os.path.realpath(last) if last else ""


def rejection(exc: BaseException) -> str:
    """How the launcher refused an input: ``"clean"``, ``"unexplained"`` or ``"none"``.

    Clean: raised by the launcher's own code (whatever the type: a bare
    ``assert`` is the Triton tutorials' idiom), with a message.  Unexplained:
    no message, or raised inside triton or torch (compared with their real
    package directories, so a user's folder named ``triton/`` is still the
    user's code) or a triton error type.  None: an ImportError, which no input
    causes (the launcher cannot run at all): never a refusal, a crash.
    """
    if isinstance(exc, ImportError):
        return "none"
    innermost = _innermost_file(exc)
    inside_library = type(exc).__module__.startswith("triton") or any(
        innermost.startswith(root) for root in _library_roots())
    return "clean" if str(exc).strip() and not inside_library else "unexplained"


def clean_rejection(exc: BaseException) -> bool:
    """Whether ``exc`` is the launcher's own refusal, in words (see :func:`rejection`)."""
    return rejection(exc) == "clean"
