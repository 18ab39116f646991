"""The sanitizer mode: isolation workers under NVIDIA ``compute-sanitizer --tool memcheck``.

The battery's own memory checks see a kernel's writes only inside the guard
bands around each allocation.  memcheck sees every access the GPU makes, to
any address, so with ``--conformance-sanitizer`` each cell runs in a worker
started as ``compute-sanitizer --tool memcheck --log-file LOG python -m ..._worker``,
with PyTorch's caching allocator off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``)
so every tensor is its own allocation and an access past one is out of bounds.
The worker runs one cell and exits; its log is parsed and the findings are
folded into the cell: an invalid access makes it *unsafe* (finding
``sanitizer-oob`` and the like), whatever the battery thought of it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace

from triton_conformance.model.outcomes import CellResult
from triton_conformance.errors import ConformanceUsageError

__all__ = ["SANITIZER_ENV", "SanitizerRecord", "SanitizerReport", "Sanitizer", "find_sanitizer", "parse_report",
           "fold_into"]

SANITIZER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
_SEARCH = ("$CUDA_HOME/bin", "/usr/local/cuda/bin")

_PREFIX = re.compile(r"^=+ ?")
_ACCESS = re.compile(r"^Invalid __(?P<space>\w+)__ (?P<access>read|write|atomic)\w* of size (?P<size>\d+)")
_AT = re.compile(r"^at (?P<where>.+?)(?: in (?P<location>.+))?$")
_THREAD = re.compile(r"^by thread \((?P<thread>[\d,]+)\) in block \((?P<block>[\d,]+)\)")
_ADDRESS = re.compile(r"^Address (?P<address>0x[0-9a-fA-F]+) is (?P<problem>out of bounds|misaligned|.+)")
_API = re.compile(r"^Program hit (?P<error>\w+) \(error (?P<code>\d+)\) due to \"(?P<why>[^\"]*)\"")
_SUMMARY = re.compile(r"ERROR SUMMARY: (?P<n>\d+) errors?")


@dataclass(frozen=True)
class SanitizerRecord:
    """One invalid access that memcheck reported."""

    kind: str  # sanitizer-oob, sanitizer-misaligned, sanitizer-invalid-access
    access: str  # read / write / atomic
    space: str  # global / shared / local
    size: int
    kernel: str = ""
    location: str = ""
    thread: str = ""
    block: str = ""
    address: str = ""
    text: str = ""

    def describe(self) -> str:
        where = f" in {self.kernel}" + (f" ({self.location})" if self.location else "") if self.kernel else ""
        who = f", thread ({self.thread}) block ({self.block})" if self.thread else ""
        at = f" at {self.address}" if self.address else ""
        return f"invalid __{self.space}__ {self.access} of {self.size} bytes{at}{where}{who}"


@dataclass
class SanitizerReport:
    """What one worker's memcheck log says."""

    records: list[SanitizerRecord] = field(default_factory=list)
    api_errors: list[str] = field(default_factory=list)
    error_count: int | None = None  # from the ERROR SUMMARY; None if the log has none (the tool died)
    log_tail: str = ""

    def to_dict(self) -> dict:
        return {"records": [asdict(r) for r in self.records], "api_errors": self.api_errors,
                "error_count": self.error_count}


def _record_kind(problem: str) -> str:
    if problem.startswith("out of bounds"):
        return "sanitizer-oob"
    if problem.startswith("misaligned"):
        return "sanitizer-misaligned"
    return "sanitizer-invalid-access"


def parse_report(text: str) -> SanitizerReport:
    """Parse memcheck's output (its ``--log-file``, or stdout): every invalid access, API error and the summary."""
    report = SanitizerReport(log_tail=text[-3000:])
    current: dict | None = None
    problem = ""

    def close() -> None:
        nonlocal current, problem
        if current is not None:
            report.records.append(SanitizerRecord(kind=_record_kind(problem), **current))
        current, problem = None, ""

    for raw in text.splitlines():
        if not raw.startswith("="):
            continue
        line = _PREFIX.sub("", raw).strip()
        if m := _ACCESS.match(line):
            close()
            current = {"access": m["access"], "space": m["space"], "size": int(m["size"]), "text": line}
        elif m := _API.match(line):
            close()
            report.api_errors.append(f"{m['error']} (error {m['code']}): {m['why']}")
        elif m := _SUMMARY.search(line):
            close()
            report.error_count = int(m["n"])
        elif current is not None:
            if m := _AT.match(line):
                where, location = m["where"], m["location"] or ""
                if where.startswith("0x") and location:  # older tools: "at 0x2a0 in add_kernel"
                    where, location = location, ""
                current.setdefault("kernel", where.split("+")[0])
                if location:
                    current.setdefault("location", location)
            elif m := _THREAD.match(line):
                current["thread"], current["block"] = m["thread"], m["block"]
            elif m := _ADDRESS.match(line):
                current["address"], problem = m["address"], m["problem"]
                current["text"] += "; " + line
            elif line.startswith("and is "):
                current["text"] += "; " + line
            elif not line:
                close()
    close()
    return report


def find_sanitizer(executable: str | None = None, *, where: str = "--conformance-sanitizer") -> str:
    """The path of ``compute-sanitizer``; raises ConformanceUsageError saying where it looked."""
    if executable:
        if os.access(executable, os.X_OK):
            return executable
        raise ConformanceUsageError(f"{where}: {executable!r} is not an executable file")
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    dirs = [os.path.expandvars(d) for d in _SEARCH if not d.startswith("$") or os.environ.get("CUDA_HOME")]
    for d in dirs:
        candidate = os.path.join(d, "compute-sanitizer")
        if os.access(candidate, os.X_OK):
            return candidate
    raise ConformanceUsageError(
        f"{where}: compute-sanitizer not found on PATH or in {dirs or ['/usr/local/cuda/bin']}; it ships with "
        "the CUDA toolkit (set CUDA_HOME, or put it on PATH), or run without the sanitizer")


class Sanitizer:
    """Starts workers under memcheck, one log file each, and reads the last worker's findings."""

    def __init__(self, executable: str, *, tool: str = "memcheck", print_limit: int = 20):
        self.executable = executable
        self.tool = tool
        self.print_limit = print_limit
        self._dir = tempfile.mkdtemp(prefix="conformance-sanitizer-")
        self._count = 0
        self.log: str | None = None

    def prefix(self) -> tuple[str, ...]:
        """The command that wraps the next worker (a fresh log file for it)."""
        self._count += 1
        self.log = os.path.join(self._dir, f"worker{self._count}.log")
        return (self.executable, "--tool", self.tool, "--log-file", self.log,
                "--print-limit", str(self.print_limit))

    def collect(self) -> SanitizerReport | None:
        """Parse and remove the last worker's log (call after the worker exited); None if there is none."""
        if self.log is None or not os.path.exists(self.log):
            return None
        with open(self.log, encoding="utf-8", errors="replace") as f:
            text = f.read()
        os.remove(self.log)
        self.log = None
        return parse_report(text)


def fold_into(result: CellResult, report: SanitizerReport | None) -> CellResult:
    """The cell's result with memcheck's findings: any invalid access makes it *unsafe*.

    A timeout or compile error stays what it is (the report is attached); a
    crash, wrong or passing cell with an invalid access becomes unsafe, since
    the access explains it.
    """
    if report is None:
        return result
    result = replace(result, details=dict(result.details, sanitizer=report.to_dict()))
    if not report.records or result.outcome in ("timeout", "compile-error"):
        return result
    first = report.records[0]
    before = f"{result.outcome} ({result.finding})" if result.outcome not in ("honoured", "rejected") else ""
    more = f" (+{len(report.records) - 1} more)" if len(report.records) > 1 else ""
    return replace(result, outcome="unsafe", finding=first.kind,
                   message=(f"compute-sanitizer {first.kind}: {first.describe()}{more}"
                            + (f"\nthe battery alone saw: {before}: {result.message}" if before else "")))
