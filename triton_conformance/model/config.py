"""The frozen configuration of a run: device, profile, seed, budgets and timeouts.

Built once from the options (:func:`run_config`), validated there, and sent
as it is to every worker process: no setting travels through the
environment.  Profiles are plain data here; the engine turns one into
Hypothesis settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from triton_conformance.errors import ConformanceUsageError

__all__ = ["Profile", "PROFILES", "RunConfig", "run_config", "profile_named", "parse_budget", "parse_compat", "DEVICES",
           "DEVICE_CHOICES", "INTERPRETER", "CUDA", "AUTO", "parse_device", "on_cuda", "ISOLATIONS",
           "parse_worker_memory"]

INTERPRETER, CUDA, AUTO = "interpreter", "cuda", "auto"
DEVICES = (INTERPRETER, CUDA)  # where a run's kernels run
DEVICE_CHOICES = DEVICES + (AUTO,)  # what --conformance-device takes (conformance/backend.select_device resolves auto)
ISOLATIONS = ("process", "none")


def parse_device(name: Any, *, where: str = "device") -> str:
    """What a device name means: ``'interpreter'``, ``'cuda'`` or ``'auto'`` (not yet resolved).

    The one parser of device names, for every layer (no torch here).  It reads a run's device
    (``interpreter``, ``cuda``, ``auto``) and a torch device as reproducers and tensors name it
    (``cpu``, ``cuda:1``, ``torch.device("cuda", 0)``: the interpreter's tensors live on the CPU);
    anything else raises :class:`ConformanceUsageError` naming ``where``.
    """
    text = str(getattr(name, "type", name))  # a torch.device names its type
    base = text.partition(":")[0]
    if base in (INTERPRETER, "cpu"):
        return INTERPRETER
    if base == CUDA or text == AUTO:
        return base
    raise ConformanceUsageError(f"{where}={name!r}, expected one of {DEVICE_CHOICES} or a torch device "
                                "('cpu', 'cuda:0')")


def on_cuda(name: Any) -> bool:
    """Whether ``name`` (any spelling :func:`parse_device` reads) is a CUDA device; ``auto`` is not, yet."""
    return parse_device(name) == CUDA


@dataclass(frozen=True)
class Profile:
    """How hard a cell is searched.

    - ``max_examples``: examples per searched cell;
    - ``derandomize``: the same examples on every run and machine (``seed`` is ignored);
    - ``max_elements`` / ``max_outer``: caps on each input's elements and on every dim but the widest;
    - ``database``: Hypothesis's example database directory (failures are replayed first), or None;
    - ``compile_budget``: most new Triton specializations a subject may compile on CUDA (None: no limit);
    - ``shrink_calls``: kernel runs the shrinker may spend after the first failure; counted, not
      timed, so which failure is reported does not depend on the machine's speed.
    - ``interpreter_cost``: the interpreted work a cell may spend on the Triton interpreter, in the
      counted units of :mod:`triton_conformance.conformance.search.interpreter_cost` (about 1.5 us each on
      a loaded 2-core CPU: docs/benchmarks.md); None: no bound.  Never used on CUDA;
    - ``interpreter_example_cost``: an example's own share of it (None: the pool over twice the
      examples); an example may spend more only from what the pool holds beyond every example's share.
    """

    name: str
    max_examples: int
    derandomize: bool
    max_elements: int
    max_outer: int
    database: str | None = None
    compile_budget: int | None = None
    shrink_calls: int = 40
    interpreter_cost: int | None = None
    interpreter_example_cost: int | None = None


# A cell's interpreted work under ci and dev, and an example's share (counted units; see
# conformance/interpreter_cost.py, and docs/benchmarks.md for their seconds on a 2-core CPU).
CI_INTERPRETER_COST = 16_000_000
CI_INTERPRETER_EXAMPLE_COST = 800_000

PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("dev", max_examples=10, derandomize=False, max_elements=1 << 12, max_outer=16,
            interpreter_cost=CI_INTERPRETER_COST, interpreter_example_cost=CI_INTERPRETER_EXAMPLE_COST),
    Profile("ci", max_examples=10, derandomize=True, max_elements=1 << 12, max_outer=16,
            interpreter_cost=CI_INTERPRETER_COST, interpreter_example_cost=CI_INTERPRETER_EXAMPLE_COST),
    Profile("nightly", max_examples=30, derandomize=False, max_elements=1 << 18, max_outer=512,
            database=".conformance/examples", compile_budget=16,
            interpreter_cost=8 * CI_INTERPRETER_COST, interpreter_example_cost=2 * CI_INTERPRETER_EXAMPLE_COST),
)}


def profile_named(name: str, where: str = "profile") -> Profile:
    """The profile called ``name``; ConformanceUsageError naming ``where`` otherwise."""
    if name not in PROFILES:
        raise ConformanceUsageError(f"{where}={name!r}, expected one of {tuple(PROFILES)}")
    return PROFILES[name]


def parse_budget(value: Any, where: str = "compile budget") -> int | None:
    """A compile budget from an option value: a positive int, or None for 0 / empty / None (no limit)."""
    if value in (None, "", "0", 0):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if n < 0 or isinstance(value, bool):
        raise ConformanceUsageError(f"{where}={value!r}, expected a non-negative number of compilations "
                                    "(0: no limit)")
    return n


# RunConfig's compile_budget when none is given: the profile's own.
PROFILE_BUDGET = "profile"


@dataclass(frozen=True)
class RunConfig:
    """Everything a cell's run depends on besides the subject: the same in every process of a run.

    ``compile_budget``: new specializations a subject may compile on CUDA; the profile's unless
    given (None: no limit).
    """

    device: str = "interpreter"
    profile: Profile = PROFILES["ci"]
    seed: int | None = None
    compile_budget: int | None = PROFILE_BUDGET  # type: ignore[assignment]
    timeout: float | None = 300.0
    isolation: str = "process"
    max_examples: int | None = None
    compat: tuple[str, ...] | None = None  # the interpreter compatibility layer's shims (None: all of them)
    # Most bytes one searched example may need (estimated from its spec): a fraction of the
    # machine's physical memory if at most 1, else bytes; None: no cap.  Over it, examples are discarded.
    memory_cap: float | None = 0.25
    # What each worker process may allocate (see parse_worker_memory): "auto" (sized from the host's
    # available memory), bytes, or None (no bound).  A cell run in this process is never bounded.
    worker_memory: str | int | None = AUTO
    # Examples one Hypothesis test case draws, each judged on its own, the first failure shrunk: the engine's
    # cost a test case shared by that many (1: a case an example, the draws every run so far has made).
    batch: int = 1

    def __post_init__(self) -> None:
        if self.device not in DEVICES:  # resolved: no auto, no torch spelling
            raise ConformanceUsageError(f"RunConfig: device={self.device!r}, expected one of {DEVICES}")
        if self.isolation not in ISOLATIONS:
            raise ConformanceUsageError(f"RunConfig: isolation={self.isolation!r}, expected one of {ISOLATIONS}")
        if self.compile_budget == PROFILE_BUDGET:
            object.__setattr__(self, "compile_budget", self.profile.compile_budget)
        memory = self.worker_memory
        if not (memory in (AUTO, None) or (isinstance(memory, int) and not isinstance(memory, bool) and memory > 0)):
            raise ConformanceUsageError(f"RunConfig: worker_memory={memory!r}, expected 'auto', None or a positive "
                                        "number of bytes")

    @property
    def examples(self) -> int:
        return self.max_examples or self.profile.max_examples

    @property
    def compiles(self) -> bool:
        """Whether kernels compile here (and so are counted against the budget)."""
        return on_cuda(self.device)


def parse_compat(value: Any) -> tuple[str, ...] | None:
    """The compat option's shim names: None for ``all`` (or unset), () for ``none``, else the listed names."""
    if value in (None, "all"):
        return None
    if isinstance(value, str):
        return () if value.strip() in ("", "none") else tuple(n.strip() for n in value.split(",") if n.strip())
    return tuple(value)


def parse_worker_memory(value: Any, where: str = "worker memory") -> str | int | None:
    """A worker's memory bound from an option value: ``'auto'`` (or unset), None for ``none`` / ``off`` / 0,
    or the bytes of a number of GiB (``'8'``, ``'0.5'``).  ConformanceUsageError naming ``where`` otherwise.
    """
    if value in (None, "", AUTO):
        return AUTO
    if isinstance(value, str) and value.strip().lower() in ("none", "off", "0"):
        return None
    try:
        gib = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        gib = -1.0
    if not 0 < gib < 1 << 20:  # also NaN
        raise ConformanceUsageError(f"{where}={value!r}, expected auto, none, or a positive number of GiB "
                                    "each worker process may allocate")
    return int(gib * (1 << 30))


def run_config(*, device: str = "interpreter", profile: str = "ci", seed: Any = None, compile_budget: Any = None,
               timeout: Any = "300", isolation: str = "process", max_examples: int | None = None,
               compat: Any = None, worker_memory: Any = AUTO, batch: Any = None,
               where: dict[str, str] | None = None) -> RunConfig:
    """A validated RunConfig from option values (strings as given); each error names where the value came from.

    - ``device``: already resolved (``auto`` is resolved by the back end, before kernels are imported);
    - ``compile_budget``: None for the profile's, 0 for no limit;
    - ``timeout``: seconds a cell may run, a positive number;
    - ``max_examples``: examples per searched cell instead of the profile's;
    - ``compat``: the interpreter compatibility layer's shims (see :func:`parse_compat`);
    - ``worker_memory``: each worker process's memory bound (see :func:`parse_worker_memory`);
    - ``batch``: examples a Hypothesis test case draws (a positive int; None: 1).
    """
    where = where or {}
    p = profile_named(profile, where.get("profile", "profile"))
    try:
        seed_value = int(seed) if seed not in (None, "") else None
    except (TypeError, ValueError):
        raise ConformanceUsageError(f"{where.get('seed', 'seed')}={seed!r}, expected an integer") from None
    budget = p.compile_budget if compile_budget in (None, "") else parse_budget(
        compile_budget, where.get("compile_budget", "compile_budget"))
    try:
        seconds = float(timeout) if timeout not in (None, "") else None
    except (TypeError, ValueError):
        seconds = -1.0
    if seconds is not None and not seconds > 0:
        raise ConformanceUsageError(f"{where.get('timeout', 'timeout')}={timeout!r}, expected a positive number "
                                    "of seconds")
    if isolation not in ISOLATIONS:
        raise ConformanceUsageError(f"{where.get('isolation', 'isolation')}={isolation!r}, expected one of "
                                    f"{ISOLATIONS}")
    if max_examples is not None and not (isinstance(max_examples, int) and max_examples > 0):
        raise ConformanceUsageError(f"{where.get('max_examples', 'max_examples')}={max_examples!r}, expected a "
                                    "positive int")
    memory = parse_worker_memory(worker_memory, where.get("worker_memory", "worker_memory"))
    text = "1" if batch in (None, "") else str(batch)
    if not text.isdigit() or int(text) < 1:
        raise ConformanceUsageError(f"{where.get('batch', 'batch')}={batch!r}, expected a positive number of "
                                    "examples a test case")
    return RunConfig(device=device, profile=p, seed=seed_value, compile_budget=budget, timeout=seconds,
                     isolation=isolation, max_examples=max_examples, compat=parse_compat(compat),
                     worker_memory=memory, batch=int(text))
