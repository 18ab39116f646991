"""What the common-practice testers share: plain inputs, the oracle, and what a run reports.

The first three testers do what people write by hand: draw ``torch.randn``
inputs (contiguous, at a few shapes), call the launcher, compare with the
reference.  They know nothing of layouts, poisoned memory or value classes;
that is the point of comparing them with the suite.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "Case",
    "Run",
    "clamp_dims",
    "dims_size",
    "failure_message",
    "float_dtypes",
    "make_inputs",
    "note_progress",
    "oracle_check",
    "reference",
    "run_cases",
    "scalar_values",
]


@dataclass
class Run:
    """One tester on one subject: did anything fail, where, and how long it took to know."""

    failed: bool
    case: str | None = None  # the test case (or contract cell) that failed first
    dims: dict[str, int] | None = None  # its dims (the counterexample's, for the suite)
    message: str = ""
    seconds: float = 0.0  # time to the verdict (the failure, shrunk), or the whole run if nothing failed
    first_failure_s: float | None = None  # time to the first failing example, before any shrinking
    cpu_s: float | None = None  # CPU seconds of this process to the verdict (load on the machine does not inflate it)
    first_failure_cpu_s: float | None = None  # CPU seconds to the first failing example
    cases: int = 0  # cases (or cells) run
    skipped: str | None = None  # why the tester could not test this subject at all

    def to_dict(self) -> dict[str, Any]:
        r4 = lambda x: None if x is None else round(x, 4)
        return {"failed": self.failed, "case": self.case, "dims": self.dims, "message": self.message[:500],
                "seconds": r4(self.seconds), "first_failure_s": r4(self.first_failure_s), "cpu_s": r4(self.cpu_s),
                "first_failure_cpu_s": r4(self.first_failure_cpu_s), "cases": self.cases,
                "skipped": self.skipped, "size": dims_size(self.dims)}


@dataclass
class Case:
    """One hand-written test case: an id, its dims, and a check that raises AssertionError on failure."""

    id: str
    dims: dict[str, int]
    check: Callable[[], None] = field(repr=False)


PROGRESS_ENV = "BUG_FINDING_PROGRESS"  # a file to hold the cell being run, read if the process dies


def note_progress(case: str) -> None:
    """Record the case about to run, so that a crash of the whole process can still be placed."""
    path = os.environ.get(PROGRESS_ENV)
    if path:
        with open(path, "w") as f:
            f.write(case)


def dims_size(dims: dict[str, int] | None) -> int | None:
    """Size of a counterexample: the product of its dims (None when there is none)."""
    if not dims:
        return None
    return math.prod(int(n) for n in dims.values())


def failure_message(exc: BaseException) -> str:
    """First line of a failure, with its exception type (an exception from the launcher counts as a failure)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def run_cases(cases: list[Case], *, stop_at_first: bool = True) -> Run:
    """Run cases in order, as pytest would; any exception fails the case."""
    start, cpu0 = time.perf_counter(), time.process_time()
    for i, case in enumerate(cases):
        note_progress(case.id)
        try:
            case.check()
        except Exception as exc:  # noqa: BLE001 (a crash on an in-contract input fails the test too)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0  # the first failure is the verdict
            run = Run(failed=True, case=case.id, dims=dict(case.dims), message=failure_message(exc),
                      seconds=elapsed, first_failure_s=elapsed, cpu_s=cpu, first_failure_cpu_s=cpu, cases=i + 1)
            if stop_at_first:
                return run
    return Run(failed=False, seconds=time.perf_counter() - start, cpu_s=time.process_time() - cpu0, cases=len(cases))


def clamp_dims(contract, wanted: dict[str, int]) -> dict[str, int]:
    """Each wanted size clamped into its Dim's range (a user writes shapes the kernel claims)."""
    out = {}
    for sym, d in contract.dims.items():
        n = int(wanted[sym])
        out[sym] = min(max(n, d.min, 0), d.max)
    return out


def scalar_values(contract, gen: torch.Generator) -> dict[str, Any]:
    """A typical value for each declared scalar, as a tutorial would hard-code it.

    Floats take the middle of their range (geometric for ranges spanning two
    decades or more, e.g. ``eps``); ints (seeds) are drawn at random.
    """
    values = {}
    for name, s in contract.scalars.items():
        if s.kind == "int":
            values[name] = int(torch.randint(int(s.low), int(s.high) + 1, (1,), generator=gen))
        elif s.low > 0 and s.high / s.low >= 100:
            values[name] = math.sqrt(s.low * s.high)
        else:
            values[name] = (s.low + s.high) / 2
    return values


def make_inputs(contract, dims: dict[str, int], dtype: str, device: str, gen: torch.Generator) -> dict[str, Any]:
    """Contiguous ``randn`` tensors for every input (float inputs in ``dtype`` where they claim it).

    A mask input gets random keep/drop entries with most kept (a boolean mask,
    or 0/-inf for an additive one); that is how hand-written attention tests mask.
    """
    inputs = {}
    for name, decl in contract.inputs.items():
        shape = tuple(dims[s] for s in decl.shape)
        if decl.is_mask:
            keep = torch.rand(shape, generator=gen) < 0.8
            if decl.kind == "bool":
                inputs[name] = keep.to(device)
            else:
                zeros = torch.zeros(shape, dtype=torch.float32)
                inputs[name] = zeros.masked_fill(~keep, float("-inf")).to(device)
            continue
        want = dtype if dtype in decl.dtypes else decl.dtypes[0]
        t = torch.randn(shape, generator=gen, dtype=torch.float32)
        inputs[name] = t.to(getattr(torch, want)).to(device)
    return inputs


def reference(contract, inputs: dict[str, Any], scalars: dict[str, Any]) -> tuple:
    """The contract's oracle on float64 copies of the inputs, as a tuple of outputs."""
    as64 = {n: (t.to(torch.float64) if t.is_floating_point() else t) for n, t in inputs.items()}
    out = contract.oracle(**as64, **scalars)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def outputs_of(result: Any) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def check_count(outs: tuple, refs: tuple) -> None:
    if len(outs) != len(refs):
        raise AssertionError(f"launcher returned {len(outs)} outputs, reference {len(refs)}")
    for i, (o, r) in enumerate(zip(outs, refs)):
        if not isinstance(o, torch.Tensor):
            raise AssertionError(f"output {i} is a {type(o).__name__}, expected a tensor")  # noqa: TRY004
        if tuple(o.shape) != tuple(r.shape):
            raise AssertionError(f"output {i} has shape {tuple(o.shape)}, expected {tuple(r.shape)}")


def oracle_check(subject, dims: dict[str, int], dtype: str, device: str, gen: torch.Generator,
                 close: Callable[[torch.Tensor, torch.Tensor], None], *,
                 reference_first: bool = False) -> Callable[[], None]:
    """A check: fresh random inputs, one call, every output against the float64 oracle cast to its dtype.

    ``reference_first``: compute the reference before calling the kernel (KernelBench's order);
    otherwise after it (the Triton tutorials' order), where a kernel that overwrites its
    input also spoils the reference.
    """
    contract = subject.contract

    def check() -> None:
        inputs = make_inputs(contract, dims, dtype, device, gen)
        scalars = scalar_values(contract, gen)
        if reference_first:
            refs = reference(contract, inputs, scalars)
            outs = outputs_of(subject(**inputs, **scalars))
        else:
            outs = outputs_of(subject(**inputs, **scalars))
            refs = reference(contract, inputs, scalars)
        check_count(outs, refs)
        for out, ref in zip(outs, refs):
            out = out.detach().cpu()
            close(out, ref.cpu().to(out.dtype))

    return check


def float_dtypes(contract, untestable: dict[str, str]) -> list[str]:
    """The float dtypes the contract claims that this backend can run."""
    return [d for d in contract.float_dtypes() if d not in untestable]
