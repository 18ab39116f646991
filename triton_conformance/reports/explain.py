"""What the reports say about a cell, in words: outcome letters and colours, findings, skip reasons.

Everything about an outcome class (letter, colour, passing, Allure status)
comes from :data:`triton_conformance.model.outcomes.OUTCOME_TABLE`, so an
outcome added there shows in every report.  Plain data only: results
documents as read from JSON, no torch.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from triton_conformance.model.outcomes import FAILING, OUTCOME_TABLE, SKIP_CODE

__all__ = ["LETTERS", "COLOURS", "CHECKED_PASSING", "KERNEL_FAULTS", "legend_line", "text_colour", "finding_text",
           "incidental_note", "skip_code", "skip_groups", "skip_example", "first_failure", "informative"]

LETTERS = {o.name: o.letter for o in OUTCOME_TABLE}
COLOURS = {o.name: o.colour for o in OUTCOME_TABLE}
# Outcomes of a cell that was checked and passed (skipped passes too, but checked nothing).
CHECKED_PASSING = tuple(o.name for o in OUTCOME_TABLE if o.passing and o.allure == "passed")
PASSING_NAMES = tuple(o.name for o in OUTCOME_TABLE if o.passing)
# Failing outcomes that are a verdict about the kernel (not a mistake in the declaration, like oracle-error).
KERNEL_FAULTS = tuple(o.name for o in OUTCOME_TABLE if getattr(o, "kernel_fault", not o.passing))


def legend_line() -> str:
    """``H honoured  R rejected  ...``: every outcome's letter, in table order."""
    return "  ".join(f"{o.letter} {o.name}" for o in OUTCOME_TABLE)


def text_colour(background: str) -> str:
    """Dark text on a light background, white on a dark one (relative luminance, as WCAG computes it)."""
    try:
        rgb = [int(background.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    except (ValueError, IndexError):
        return "#1d2125"
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    luminance = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "#1d2125" if luminance > 0.4 else "#fff"


# -- findings in words ------------------------------------------------------------------------------

def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _index(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(str(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _oob_write(r: dict[str, Any], d: dict[str, Any]) -> str | None:
    side, at, span = d.get("side"), d.get("byte_offset"), d.get("span_bytes")
    if side not in ("before", "after") or not isinstance(at, int) or not isinstance(span, int):
        return None
    shape, dtype = d.get("shape"), d.get("dtype")
    what = f"a {_index(shape)} {dtype} tensor" if isinstance(shape, list) and dtype else "a tensor"
    what += " the launcher allocated"
    if side == "after":
        return (f"wrote past the end of {what} ({_plural(span, 'byte')} long): the first changed byte is the "
                f"{_ordinal(at - span + 1)} byte after its end (offset {at} from its start)")
    return (f"wrote before the start of {what} ({_plural(span, 'byte')} long): the first changed byte is the "
            f"{_ordinal(-at)} byte before its start")


def _unwritten(r: dict[str, Any], d: dict[str, Any]) -> str | None:
    holes, total = d.get("unwritten"), d.get("total")
    if not isinstance(holes, int) or not isinstance(total, int):
        return None
    which = (f"gradient {d['gradient']}" if d.get("gradient") else
             f"output {d['output']}" if isinstance(d.get("output"), int) else "the output")
    text = f"left {holes} of {total} elements of {which} unwritten (they kept the poison it was allocated with)"
    if d.get("first_index") is not None:
        text += f"; the first at {_index(d['first_index'])}"
    return text


def _mutated(r: dict[str, Any], d: dict[str, Any]) -> str | None:
    names = d.get("inputs")
    if not isinstance(names, list) or not names:
        return None
    listed = ", ".join(str(n) for n in names)
    return (f"changed the memory of input{'s' if len(names) > 1 else ''} {listed} (its elements, the gaps "
            f"between them or the guard band around them) during the call")


def _poisoned_read(r: dict[str, Any], d: dict[str, Any]) -> str | None:
    if "address_error" in d:  # the large-index emulation saw the read itself: its message says where
        return None
    text = ("read memory outside its inputs' elements: its output changed when only the bytes around the "
            "inputs (gaps, row padding, guard band) were refilled")
    cx = r.get("counterexample") if isinstance(r.get("counterexample"), dict) else {}
    kinds = {n: l.get("kind") for n, l in (cx.get("layouts") or {}).items()
             if isinstance(l, dict) and l.get("kind") not in (None, "contiguous")}
    if kinds:
        text += " (" + ", ".join(f"{n} is {k}" for n, k in kinds.items()) + ")"
    return text


def _misaligned_descriptor(r: dict[str, Any], d: dict[str, Any]) -> str | None:
    desc = d.get("descriptor")
    if not isinstance(desc, dict) or not isinstance(desc.get("rules"), list):
        return None
    on = f" on input {d['input']}" if d.get("input") else ""
    return (f"built a tensor descriptor{on} that the GPU's copy engine refuses (breaking its "
            f"{', '.join(str(x) for x in desc['rules'])} rule): a fault or garbage on the GPU")


def _mismatch(r: dict[str, Any], d: dict[str, Any]) -> str | None:
    n, total = d.get("mismatched"), d.get("total")
    if not isinstance(n, int):
        return None
    what = ("NaN/inf positions differ from the oracle's" if r.get("finding") == "nan-mismatch"
            else "outputs differ from the oracle")
    text = f"{what} at {n} of {total} elements"
    if d.get("first_index") is not None:
        text += f", the first at {_index(d['first_index'])}"
    return text


_WORDS = {
    "oob-write": _oob_write,
    "unwritten": _unwritten,
    "mutated-input": _mutated,
    "poisoned-read": _poisoned_read,
    "misaligned-descriptor": _misaligned_descriptor,
    "mismatch": _mismatch,
    "nan-mismatch": _mismatch,
}
_FIXED = {
    "nondeterministic": "two calls on identical inputs gave different bits",
    "accepted-out-of-contract": "returned a result for an input outside the contract instead of refusing it",
    "unclean-rejection": "refused an out-of-contract input from inside Triton or torch, not in the launcher's "
                         "own checks",
    "exception": "raised an exception on an input inside the contract",
    "bad-shape": "returned an output of the wrong shape",
    "bad-output": "returned something other than the outputs the oracle gives",
}


def finding_text(r: dict[str, Any]) -> str:
    """The cell's finding in words ("" when it has none): what went wrong, not the raw detail keys."""
    kind = r.get("finding")
    if not kind:
        return ""
    details = r.get("details") if isinstance(r.get("details"), dict) else {}
    words = _WORDS.get(kind)
    text = words(r, details) if words else _FIXED.get(kind)
    return text or r.get("message") or str(kind).replace("-", " ")


# What a column is about, where a failure found there can be about something else.
_OWN_FINDINGS = {
    "memory": ("memory-safety", lambda r: r.get("outcome") != "wrong"),
    "determinism": ("nondeterminism", lambda r: r.get("outcome") != "wrong" or r.get("finding") == "nondeterministic"),
}


def incidental_note(r: dict[str, Any]) -> str | None:
    """For a failure that is not what its column tests (a wrong answer in the memory column), say so."""
    own = _OWN_FINDINGS.get(r.get("cell"))
    if own is None or r.get("outcome") not in FAILING or own[1](r):
        return None
    return (f"a wrong answer found while running the {r['cell']} cell, not a {own[0]} finding: "
            f"{finding_text(r) or r.get('finding') or r.get('outcome')}")


# -- skip reasons -----------------------------------------------------------------------------------

def skip_code(r: dict[str, Any]) -> str:
    """A skipped result's reason code (its details' ``skip_code``); one written before results carried codes
    gets its cell's dimension and ``other``, as :func:`~triton_conformance.conformance.results.skipped` gives."""
    code = (r.get("details") or {}).get(SKIP_CODE)
    return code if isinstance(code, str) and code else f"{str(r.get('cell') or '').partition(':')[0]}:other"


def skip_groups(results: Iterable[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Skipped cells grouped by :func:`skip_code`, the largest group first (each keeps its results, whose
    messages are shown as they are: one as the group's example)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if r.get("outcome") == "skipped":
            groups.setdefault(skip_code(r), []).append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def skip_example(group: list[dict[str, Any]]) -> str:
    """The message of a group's first skipped cell, whole: the group's example."""
    return next((r.get("message") for r in group if r.get("message")), "") or "no reason given"


# -- series -----------------------------------------------------------------------------------------

def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def informative(points: list[tuple[float, float]]) -> bool:
    """Whether a plot of ``points`` shows anything: two points or more, not all of them zero."""
    return len(points) >= 2 and any(y != 0 for _, y in points)


def first_failure(series: Any) -> tuple[float, float] | None:
    """``(last passing x, first failing x)`` of a series whose points carry an ``outcome``; None if none fails."""
    if not isinstance(series, list):
        return None
    points = sorted((p["x"], p["outcome"]) for p in series
                    if isinstance(p, dict) and _finite(p.get("x")) and isinstance(p.get("outcome"), str))
    last_pass = None
    for x, outcome in points:
        if outcome in PASSING_NAMES:
            last_pass = x
        elif last_pass is not None:
            return last_pass, x
        else:
            return None  # fails from the smallest size tried: no boundary to mark
    return None

