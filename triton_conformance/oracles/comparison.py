"""Compare a kernel's output with the float64 oracle under a :class:`Bound`."""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch

from triton_conformance.oracles.magnitude import Unavailable
from triton_conformance.oracles.precision import Errors, errors_of, more_precise, verdict
from triton_conformance.oracles.rounded_steps import CLASSES, special_class
from triton_conformance.oracles.tolerance import SAFETY_FACTOR, Bound

__all__ = ["Mismatch", "compare"]


@dataclass(frozen=True)
class Mismatch:
    """Why an output differs from the oracle; ``kind`` is the finding name."""

    kind: str  # "mismatch", "nan-mismatch", "bad-shape", "bad-dtype"
    message: str
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    first_index: tuple[int, ...] | None = None
    mismatched: int = 0
    total: int = 0
    tolerance: str = ""
    output: str = ""  # the output's name ("output[1]", "grad x"): findings on different outputs are different
    magnitudes_unavailable: str = ""  # why the second stage could not judge (the plain bound did)
    precision: dict | None = None  # the precision verdict (:meth:`.precision.Verdict.to_dict`), if judged

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "max_abs_err": self.max_abs_err,
                "max_rel_err": self.max_rel_err, "first_index": self.first_index,
                "mismatched": self.mismatched, "total": self.total, "tolerance": self.tolerance,
                "output": self.output,
                **({"magnitudes_unavailable": self.magnitudes_unavailable} if self.magnitudes_unavailable else {}),
                **({"precision": dict(self.precision)} if self.precision else {})}


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    """The index of the first true element of ``mask``, in row-major order.

    Unravelled in plain Python: ``torch.unravel_index`` calls ``torch._check``, whose first
    call in a process imports ``torch.fx.experimental.symbolic_shapes`` and sympy (0.3 s on
    the CPU, 2.9 s under a profiler on the GPU machine), once in every cell worker.
    """
    flat = int(torch.nonzero(mask.reshape(-1))[0, 0])
    index = []
    for size in reversed(mask.shape):
        flat, at = divmod(flat, size)
        index.append(at)
    return tuple(reversed(index))


def compare(actual: torch.Tensor, expected: torch.Tensor, bound: Bound,
            lowp: torch.Tensor | None = None, name: str = "out",
            magnitude: Callable[[], torch.Tensor | None] | torch.Tensor | None = None,
            input_bound: Callable[[], Bound | None] | Bound | None = None,
            observe: Callable[[Errors], None] | None = None,
            rounded: Callable[[], Any] | None = None) -> Mismatch | None:
    """None if ``actual`` matches ``expected`` (float64) within ``bound``; else a Mismatch.

    NaN positions, and ±inf positions with their signs, must match exactly, the oracle's taken as rounding
    to ``actual``'s dtype makes them (a finite value past its range is an infinity there).

    ``magnitude``: the magnitude of the terms behind each element of ``expected``
    (:mod:`.magnitude`), or a function that computes it.  It is asked for only
    when some element fails ``bound``; those elements are then judged again
    under ``bound.conditioned(magnitude)`` (an element whose terms cancel may be
    off by their size).
    ``input_bound``: the bound with intermediates in the input dtype (or a function giving it), asked for
    only when the output still fails: the mismatch then carries the precision verdict (:mod:`.precision`).
    ``observe``: told the output's worst error (:class:`~.precision.Errors`) under the bound that judged it,
    pass or fail.
    ``rounded``: a function giving the oracle's output with every step rounded to the input dtype
    (:mod:`.rounded_steps`), asked for only where NaN/inf positions differ: the precision verdict then says
    whether that evaluation makes them too.
    """
    mismatch, errors = _compare(actual, expected, bound, lowp, name)
    if mismatch is not None and mismatch.kind == "nan-mismatch" and rounded is not None:
        return _special_verdict(mismatch, actual, expected, bound, rounded, input_bound, lambda a, e: compare(
            a, e, bound, lowp, name, magnitude, input_bound, observe), magnitude)
    m = None
    if mismatch is not None and mismatch.kind == "mismatch" and bound.per_term > 0 and magnitude is not None:
        m = magnitude() if callable(magnitude) else magnitude
        if m is None or isinstance(m, Unavailable) or tuple(m.shape) != tuple(expected.shape):
            reason = (m.reason if isinstance(m, Unavailable) else "none were traced" if m is None else
                      f"magnitudes of shape {tuple(m.shape)} for an output of shape {tuple(expected.shape)}")
            m = None
            mismatch = replace(mismatch, magnitudes_unavailable=reason,
                               message=f"{mismatch.message}; magnitudes unavailable ({reason}): judged by the "
                                       "plain bound")
        else:
            mismatch, errors = _compare(actual, expected, bound.conditioned(m), lowp, name)
    if observe is not None and errors is not None:
        observe(errors)
    if mismatch is None or mismatch.kind != "mismatch" or errors is None or input_bound is None:
        return mismatch
    return _with_verdict(mismatch, errors, actual, expected, bound, input_bound, m, lowp, name, magnitude)


def _with_verdict(mismatch: Mismatch, errors: Errors, actual, expected, bound: Bound, input_bound, m, lowp,
                  name: str, magnitude: Any = None) -> Mismatch:
    """``mismatch`` with the precision its output achieved: judged again at the input dtype's unit roundoff
    (the same magnitudes, where there were some) when the claim is more precise than that."""
    low = input_bound() if callable(input_bound) else input_bound
    if low is None or low.per_term <= 0 or not bound.accumulate or not low.accumulate:
        return mismatch
    ratio_input = None
    if more_precise(bound.accumulate, low.accumulate):
        m = _at_input_unit(magnitude, low, m)
        _, low_errors = _compare(actual, expected, low if m is None else low.conditioned(m), lowp, name)
        ratio_input = 0.0 if low_errors is None else low_errors.used
    found = verdict(bound.accumulate, low.accumulate, errors.used, ratio_input)
    return replace(mismatch, precision=found.to_dict(), message=f"{mismatch.message}; precision: {found.describe()}")


def _at_input_unit(magnitude: Any, low: Bound, m):
    """The magnitudes counted at the input dtype's unit where ``magnitude`` can give them (a function of the
    unit), so that what depends on the unit (a step within reach of fp16's roundings) is judged there;
    else ``m``, those of the claimed unit."""
    if m is None or not callable(magnitude) or not inspect.signature(magnitude).parameters:
        return m
    again = magnitude(low.per_term / SAFETY_FACTOR)
    return again if isinstance(again, torch.Tensor) and again.shape == m.shape else m


def _special_verdict(mismatch: Mismatch, actual, expected, bound: Bound, rounded, input_bound, rest,
                     magnitude=None) -> Mismatch:
    """``mismatch`` (NaN/inf positions differ) with its precision verdict: explained where the oracle's steps,
    each rounded to the input dtype, make the kernel's NaN or inf at every such position, or the kernel's inf
    is an overflow within the input-dtype bound's reach (:func:`_overflow_within_reach`), and the other
    elements pass (or are within the input-dtype bound: ``rest``, the comparison without those positions);
    else worse."""
    low = input_bound() if callable(input_bound) else input_bound
    dtype = low.accumulate if low is not None and low.accumulate else str(actual.dtype).replace("torch.", "")
    r = rounded()
    if not isinstance(r, torch.Tensor) or tuple(r.shape) != tuple(expected.shape):
        why = r.reason if isinstance(r, Unavailable) else "no evaluation in the input dtype"
        return replace(mismatch, message=f"{mismatch.message}; no precision verdict for NaN/inf ({why})")
    a = actual.detach().to(torch.float64)
    special = _special_positions(a, _overflowed(expected.detach().to(a.device, torch.float64), actual.dtype))
    kernel, steps = special_class(a), special_class(r.to(a.device))
    # NaN for the steps' inf or the other way round: overflowed intermediates, and the order of the
    # operations decides which of inf - inf and inf comes out
    swapped = (kernel > 0) & (steps > 0) & ((kernel == 1) | (steps == 1))
    unmade = special & (kernel != steps) & ~swapped & ~_overflow_within_reach(a, expected, low, magnitude,
                                                                              actual.dtype)
    counts = {"special_positions": int(special.sum()), "special_explained": int((special & ~unmade).sum())}
    base = {"claimed": bound.accumulate or dtype, "input": dtype, **counts}
    if unmade.any():
        idx = _first(unmade)
        found = {"achieved": "worse", **base}
        text = (f"{CLASSES[int(kernel[idx])]} at {idx} ({int(unmade.sum())} such elements), where the oracle's "
                f"steps each rounded to {dtype} give {r[idx].item()!r}: wrong")
        return replace(mismatch, precision=found, message=f"{mismatch.message}; precision: {text}")
    zero = torch.zeros((), dtype=torch.float64, device=a.device)
    others = rest(torch.where(special, zero, a).to(actual.dtype),
                  torch.where(special, zero, expected.detach().to(a.device, torch.float64)))
    within = others is None or (others.precision or {}).get("achieved") == "input-dtype"
    found = {**(others.precision if others is not None and others.precision else {}), **base,
             "achieved": "input-dtype" if within else "worse"}
    text = (f"NaN/inf at {counts['special_positions']} elements where {dtype} intermediates overflow, underflow or "
            f"cancel (the oracle's steps, each rounded to {dtype}, give the same NaN, inf or finite value there); "
            "the other elements: "
            + ("within the bound" if others is None else others.message))
    return replace(mismatch, precision=found, message=f"{mismatch.message}; precision: {text}")


def _overflow_within_reach(a: torch.Tensor, expected: torch.Tensor, low: Bound | None, magnitude,
                           dtype: torch.dtype) -> torch.Tensor:
    """Where the kernel's ±inf (``a``, in float64; its dtype ``dtype``) is the overflow of a value the input-dtype bound allows: the oracle's finite
    value, of the same sign, within that bound (its magnitudes at the input dtype's unit where there are
    some) of the first value that rounds to inf (fp16 cumprod's 65,312 with an allowance past 65,520), of
    either sign where the allowance is larger than the value; or the kernel's NaN there (a solve whose
    intermediates overflow subtracts inf from inf)."""
    e = expected.detach().to(a.device, torch.float64)
    none = torch.zeros_like(a, dtype=torch.bool)
    if low is None or not dtype.is_floating_point or dtype == torch.float64:
        return none
    info = torch.finfo(dtype)
    threshold = info.max + info.eps * 2.0 ** math.floor(math.log2(info.max)) / 2  # rounds to inf from here
    if callable(magnitude):
        m = magnitude(low.per_term / SAFETY_FACTOR) if inspect.signature(magnitude).parameters else magnitude()
    else:
        m = magnitude
    if isinstance(m, torch.Tensor) and tuple(m.shape) == tuple(e.shape) and low.per_term > 0:
        low = low.conditioned(m.to(a.device))
    atol = low.atol if isinstance(low.atol, (int, float)) else low.atol.detach().to(a.device, torch.float64)
    allowance = atol + low.rtol * e.abs()
    reached = ~torch.isnan(e) & (e.abs() + allowance >= threshold)
    signed = (torch.sign(a) == torch.sign(e)) | (allowance >= e.abs())  # a sign within the allowance is open
    # a NaN there is inf - inf of overflowed steps
    return reached & ((torch.isinf(a) & torch.isfinite(e) & signed) | torch.isnan(a))


def _special_positions(a: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """Where ``a`` and ``e`` differ in NaN, or in an infinity (its sign included)."""
    nan_diff = torch.isnan(a) != torch.isnan(e)
    inf_diff = (torch.isinf(a) | torch.isinf(e)) & ~(torch.isnan(a) | torch.isnan(e)) & (a != e)
    return nan_diff | inf_diff


def _overflowed(expected: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``expected`` with each finite value past ``dtype``'s range replaced by what rounding to ``dtype`` makes
    of it: a correct kernel's fp16 result of -709,961 is -inf, its e4m3fn result of 597.7 is 448 (a format
    without infinities saturates, as torch's cast and the GPU's ``cvt.rn.satfinite`` do)."""
    if not dtype.is_floating_point or dtype == torch.float64:
        return expected
    rounded = expected.to(dtype).to(torch.float64)
    past = torch.isfinite(expected) & (torch.isinf(rounded) | (expected.abs() > torch.finfo(dtype).max))
    return torch.where(past, rounded, expected)


def _compare(actual: torch.Tensor, expected: torch.Tensor, bound: Bound, lowp: torch.Tensor | None,
             name: str) -> tuple[Mismatch | None, Errors | None]:
    """The mismatch (None if there is none) and the output's worst error (None where there is no number)."""
    if tuple(actual.shape) != tuple(expected.shape):
        return Mismatch("bad-shape", f"{name}: shape {tuple(actual.shape)} != oracle {tuple(expected.shape)}",
                        output=name), None
    a = actual.detach().to(torch.float64)  # on the kernel's device: a GPU compares large outputs faster
    e = expected.detach().to(a.device, torch.float64)
    total = a.numel()
    diff = a - e
    # The common case in one pass over the difference: a finite sum has no NaN or inf in either side (a sum
    # of finite values that overflows takes the general path), and an oracle inside the output dtype's
    # range is what rounding to it leaves finite (:func:`_overflowed` changes nothing).
    plain = total > 0 and math.isfinite(float(diff.sum()))
    e_abs = e.abs() if plain else None
    if plain and not _inside_range(float(e_abs.max()), actual.dtype):
        plain = False
    if plain:
        err = diff.abs()
    else:
        e = _overflowed(e, actual.dtype)
        special = _special_positions(a, e)
        if special.any():
            idx = _first(special)
            return Mismatch("nan-mismatch",
                            f"{name}: NaN/inf positions differ at {int(special.sum())} of {total} elements; "
                            f"first at {idx}: got {a[idx].item()!r}, oracle {e[idx].item()!r}",
                            first_index=idx, mismatched=int(special.sum()), total=total,
                            tolerance=bound.describe(), output=name), None
        finite = torch.isfinite(e) & torch.isfinite(a)
        err = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
        e_abs = e.abs()
    if bound.reference_k is not None and lowp is not None:
        lp = lowp.detach().to(a.device, torch.float64)
        ref_err = torch.where(torch.isfinite(lp) & torch.isfinite(e), (lp - e).abs(), torch.zeros_like(e))
        worst_lowp = float(ref_err.max()) if ref_err.numel() else 0.0
        extra = bound.reference_k * worst_lowp + bound.floor
    else:
        extra = 0.0
    atol = bound.atol if isinstance(bound.atol, (int, float)) else bound.atol.detach().to(a.device, torch.float64)
    limit = atol + bound.rtol * e_abs + extra
    bad = err > limit
    errors = errors_of(err, e, limit, actual.dtype, expected_abs=e_abs)
    if not bad.any():
        return None, errors
    rel = err / e_abs.clamp_min(torch.finfo(torch.float64).tiny)
    worst_rel = rel.max() if plain else rel[finite].max()  # every element is finite on the plain path
    idx = _first(bad)
    return Mismatch(
        "mismatch",
        f"{name}: {int(bad.sum())} of {total} elements outside tolerance; first at {idx}: "
        f"got {a[idx].item()!r}, oracle {e[idx].item()!r}; max abs err {err.max().item():.3g}, "
        f"max rel err {worst_rel.item():.3g}; tolerance {bound.describe()}",
        max_abs_err=err.max().item(), max_rel_err=worst_rel.item(), first_index=idx,
        mismatched=int(bad.sum()), total=total, tolerance=bound.describe(), output=name,
    ), errors


def _inside_range(largest: float, dtype: torch.dtype) -> bool:
    """Whether a finite oracle of largest magnitude ``largest`` is left as it is by rounding to ``dtype``."""
    return not dtype.is_floating_point or dtype == torch.float64 or largest <= _largest_finite(dtype)


@functools.lru_cache(maxsize=None)
def _largest_finite(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).max)
