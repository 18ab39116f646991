"""Autotuned kernels under test: pin one config, and emulate the tuning benchmark.

A subject's ``@triton.autotune`` kernels are found by :mod:`.discovery`.

:class:`Tuning` hooks each tuner for the duration of a cell (instance
attributes only, removed afterwards), so that a launch

- ``pin``: runs one named config if the kernel's own pruning keeps it (a
  launch where it is pruned raises :class:`ConfigPruned`: the example is
  discarded, never failed);
- ``bench``: runs every surviving config on the same inputs first, as the
  autotuner's benchmark does (``reset_to_zero`` / ``restore_value`` hooks
  included), in a chosen order, with a fixed winner, then the final call;
- ``choose``: runs the first survivor not in ``avoid`` (priming the tuner's
  cache for the ``autotune:key`` cell with a config not tried yet).

A config the cell forces (pinned or chosen) that does not fit the device
(``OutOfResources``: shared memory, registers) is one Triton's own
``Autotuner._bench`` skips, so a user never runs it: where another survivor
of the same launch compiles, the example is discarded (:class:`ConfigUnfit`);
where none does, the kernel cannot run at all and the error stands (a
``compile-error``).

Each launch of the kernel is attributed to its config (``launches``), and on
CUDA each new specialization too (``compiles``).  Under the interpreter the
compat layer's autotune shim has already pruned; nothing is timed anywhere:
the benchmark's ``do_bench`` runs each config :data:`BENCH_RUNS` times and
returns a made-up timing that makes the chosen winner win.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from typing import Any, Callable, Iterable

import torch
from triton.runtime.autotuner import Autotuner
from triton.runtime.errors import OutOfResources

import triton_conformance.compat as compat
from triton_conformance.compat import surviving_configs
from triton_conformance.conformance.kinds.autotune.wrappers import clear_tuning
from triton_conformance.conformance.discards import PRUNED, UNFIT, ExampleDiscarded

__all__ = ["config_name", "ConfigPruned", "ConfigUnfit", "Tuning", "BENCH_RUNS", "quick_benchmarks", "QUICK_BENCH_RUNS"]

BENCH_RUNS = 1  # kernel_call()s per config in an emulated do_bench: one already shows a missing reset
# Timed runs per config when a real tuner benchmarks on CUDA during a cell: enough to rank configs,
# where do_bench's 25 ms warm-up and 100 ms of repetitions cost half a second a tuning of four configs.
QUICK_BENCH_RUNS = 3


def config_name(config: Any) -> str:
    """``BLOCK_N=64,num_warps=4,num_stages=3`` (num_ctas and maxnreg only where set)."""
    parts = [f"{k}={v}" for k, v in config.kwargs.items()]
    parts += [f"num_warps={config.num_warps}", f"num_stages={config.num_stages}"]
    if getattr(config, "num_ctas", 1) != 1:
        parts.append(f"num_ctas={config.num_ctas}")
    if getattr(config, "maxnreg", None) is not None:
        parts.append(f"maxnreg={config.maxnreg}")
    return ",".join(parts)


class ConfigPruned(ExampleDiscarded):
    """The pinned config is not among the survivors of the kernel's own pruning for this launch: the
    example is discarded (the shrinker skips the candidate), never failed."""

    def __init__(self, kernel: str, config: str, survivors: list[str]):
        super().__init__(PRUNED, f"{kernel}: config {config} pruned here (survivors: {survivors})")
        self.kernel = kernel


class ConfigUnfit(ExampleDiscarded):
    """The forced config does not fit the device for this launch, and ``fits`` (another survivor) does:
    the autotuner would have skipped it, so the example is discarded, never failed."""

    def __init__(self, config: str, error: OutOfResources, fits: str):
        super().__init__(UNFIT, f"config {config}: {error} (config {fits} fits)")
        self.resource = f"{error.name}, required {error.required}, limit {error.limit}"


def _compat_pruned() -> bool:
    return "autotune" in compat.installed()


class Tuning:
    """Hooks on every tuner of a cell; a context manager.  Set ``policy`` (and ``pins`` / ``order`` /
    ``avoid``) before each launch; read ``launches``, ``compiles``, ``survivors``, ``tuned``, ``chosen``."""

    def __init__(self, tuners: Iterable[Any], backend: Any = None):
        self.tuners = tuple(tuners)
        self.counting = bool(getattr(backend, "compiles", False))
        self.policy = "pin"
        self.pins: dict[int, str | None] = {}  # id(tuner) -> config name (None: the first survivor)
        self.order = "forward"  # the benchmark's order: "forward" (as pruned) or "reversed"
        self.avoid: dict[int, set[str]] = {}  # "choose": id(tuner) -> configs not to choose (already tried)
        self.chosen: dict[int, str] = {}  # "choose": id(tuner) -> the config its last tuning chose
        self.fresh = False  # "choose": whether the last tunings chose a config not in avoid
        self.clear_cache = True  # each launch tunes afresh (False: the tuner's cache is kept)
        self.launches: Counter = Counter()
        self.compiles: Counter = Counter()
        self.survivors: dict[int, list[str]] = {}  # id(tuner) -> the survivors of its last tuning
        self._survivor_configs: dict[int, list] = {}  # id(tuner) -> those survivors' Config objects
        self.unfit: dict[str, str] = {}  # a forced config that did not fit -> the resource (see ConfigUnfit)
        self.benchmarked: dict[int, list[str]] = {}  # id(tuner) -> configs the last benchmark ran, in order
        self.ran: dict[int, str] = {}  # id(tuner) -> the config of its last final launch
        self.tuned = 0  # tunings (cache misses) so far
        self.pruned = 0  # launches refused because the pinned config was pruned
        self._saved: list[tuple[Any, str, Any]] = []
        self._benching: str | None = None
        self._current: str | None = None
        self._hook = None

    # -- names ---------------------------------------------------------------------------------------
    def label(self, tuner: Any, name: str | None) -> str:
        return name if len(self.tuners) == 1 or name is None else f"{tuner.base_fn.__name__}: {name}"

    def _name_of_launch(self, tuner: Any, kwargs: dict) -> str:
        for cfg in list(tuner.configs):
            if all(kwargs.get(k, v) == v for k, v in cfg.all_kwargs().items()) and all(
                    k in kwargs for k in cfg.kwargs):
                return self.label(tuner, config_name(cfg))
        return self.label(tuner, ",".join(f"{k}={kwargs[k]}" for k in sorted(kwargs)
                                          if k.isupper() or k in ("num_warps", "num_stages")))

    # -- hooks ---------------------------------------------------------------------------------------
    def _set(self, obj: Any, attr: str, value: Any) -> None:
        self._saved.append((obj, attr, obj.__dict__.get(attr, _MISSING)))
        obj.__dict__[attr] = value

    def __enter__(self) -> "Tuning":
        compat = _compat_pruned()
        for tuner in self.tuners:
            clear_tuning(tuner)

            def prune(kwargs: dict, tuner: Any = tuner) -> list:
                result = list(Autotuner.prune_configs(tuner, kwargs))
                if compat:
                    survivors = list(surviving_configs(tuner))
                else:
                    survivors = result
                names = [config_name(c) for c in survivors]
                self.survivors[id(tuner)] = names
                self._survivor_configs[id(tuner)] = survivors
                self.tuned += 1
                if self.policy == "pin":
                    want = self.pins.get(id(tuner))
                    if want is None:
                        return survivors[:1]
                    if want not in names:
                        self.pruned += 1
                        raise ConfigPruned(tuner.base_fn.__name__, want, names)
                    return [survivors[names.index(want)]]
                if self.policy == "choose":
                    avoid = self.avoid.get(id(tuner), set())
                    fresh = [c for c, n in zip(survivors, names) if n not in avoid]
                    self.fresh = self.fresh or bool(fresh)
                    pick = (fresh or survivors)[0]
                    self.chosen[id(tuner)] = config_name(pick)
                    return [pick]
                ordered = survivors if self.order == "forward" else survivors[::-1]
                self.benchmarked[id(tuner)] = [config_name(c) for c in ordered]
                return ordered

            def bench(*args: Any, config: Any, tuner: Any = tuner, **meta: Any) -> Any:
                self._benching = config_name(config)
                try:
                    return Autotuner._bench(tuner, *args, config=config, **meta)
                finally:
                    self._benching = None

            def do_bench(kernel_call: Callable[[], Any], quantiles: Any = None, tuner: Any = tuner,
                         **_: Any) -> list:
                for _run in range(BENCH_RUNS):
                    kernel_call()
                # The winner is the first survivor in the kernel's own order, whatever order they ran in.
                t = 0.0 if self._benching == (self.survivors.get(id(tuner)) or [None])[0] else 1.0
                return [t, t, t]

            fn = tuner.fn
            original = fn.__dict__.get("run") or type(fn).run.__get__(fn)

            def run(*args: Any, tuner: Any = tuner, original: Any = original, **kwargs: Any) -> Any:
                name = self._name_of_launch(tuner, kwargs)
                self.launches[name] += 1
                if self._benching is None:
                    self.ran[id(tuner)] = name
                self._current = name
                if self._benching is not None or self.policy == "bench":
                    return original(*args, **kwargs)  # Autotuner._bench skips a config that does not fit
                try:
                    return original(*args, **kwargs)
                except OutOfResources as exc:
                    fits = self._fitting_survivor(tuner, name, original, args, kwargs)
                    if fits is None:
                        raise  # no survivor fits: the kernel cannot run on this draw at all
                    unfit = ConfigUnfit(name, exc, fits)
                    self.unfit[name] = unfit.resource
                    raise unfit from exc

            self._set(tuner, "prune_configs", prune)
            self._set(tuner, "_bench", bench)
            self._set(tuner, _bench_attr(tuner), do_bench)
            self._set(fn, "run", run)
        if self.counting:
            self._install_compile_hook()
        return self

    def _fitting_survivor(self, tuner: Any, name: str, original: Any, args: tuple, kwargs: dict) -> str | None:
        """The first other survivor of this launch that compiles and loads without ``OutOfResources``
        (compiled as a warm-up, never launched: its pre_hook runs first, as the autotuner's would)."""
        survivors = self._survivor_configs.get(id(tuner), ())
        forced = next((c for c in survivors if self.label(tuner, config_name(c)) == name), None)
        base = {k: v for k, v in kwargs.items() if forced is None or k not in forced.all_kwargs()}
        for config in survivors:
            if config is forced:
                continue
            self._current = self.label(tuner, config_name(config))  # its compile is counted as its own
            current = {**base, **config.all_kwargs(), "warmup": True}
            if config.pre_hook:
                config.pre_hook({**(tuner.nargs or {}), **current})
            try:
                kernel = original(*args, **current)
                if kernel is not None and hasattr(kernel, "_init_handles"):
                    kernel._init_handles()  # where a CUDA kernel's resources are checked
            except OutOfResources:
                continue
            return config_name(config)
        return None

    def _install_compile_hook(self) -> None:
        try:
            from triton import knobs  # triton 3.4 and later: older ones have no compile hook
        except ImportError:  # pragma: no cover
            return
        previous = knobs.runtime.jit_cache_hook

        def hook(*args: Any, **kwargs: Any) -> Any:
            self.compiles[self._current or "?"] += 1
            return previous(*args, **kwargs) if previous else False

        knobs.runtime.jit_cache_hook = hook
        self._hook = (knobs.runtime, previous)

    def __exit__(self, *exc: Any) -> None:
        if self._hook is not None:
            runtime, previous = self._hook
            runtime.jit_cache_hook = previous
            self._hook = None
        for obj, attr, value in reversed(self._saved):
            if value is _MISSING:
                obj.__dict__.pop(attr, None)
            else:
                obj.__dict__[attr] = value
        self._saved.clear()
        for tuner in self.tuners:
            clear_tuning(tuner)

    # -- the launcher ---------------------------------------------------------------------------------
    def wrap(self, subject: Any) -> Any:
        """``subject`` whose launcher clears every tuner's cache first (unless ``clear_cache`` is False)."""
        launcher = subject.launcher

        def tuned_launcher(**kw: Any) -> Any:
            if self.clear_cache:
                for tuner in self.tuners:
                    clear_tuning(tuner)
            return launcher(**kw)

        tuned_launcher.__qualname__ = getattr(launcher, "__qualname__", "launcher")
        return dataclasses.replace(subject, launcher=tuned_launcher)

    def per_config(self, counts: Counter) -> dict[str, int]:
        return dict(sorted(counts.items()))


_MISSING = object()


def _bench_attr(tuner: Any) -> str:
    """The attribute a tuner calls to benchmark: ``do_bench``, or behind a property ``_do_bench`` (triton 3.9)."""
    return "_do_bench" if isinstance(getattr(type(tuner), "do_bench", None), property) else "do_bench"


def _quick_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> list:
    """A tuner's benchmark in :data:`QUICK_BENCH_RUNS` timed runs after one warm-up: (median, min, max) ms."""
    kernel_call()
    times = []
    for _run in range(QUICK_BENCH_RUNS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel_call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return [times[len(times) // 2], times[0], times[-1]]


@contextlib.contextmanager
def quick_benchmarks(tuners: Iterable[Any]):  # noqa: ANN201 - a context manager
    """While active, each tuner ranks its configs with :func:`_quick_bench` (instance attributes only).

    The battery judges what a kernel computes, not how fast its tuning is: the configs are still
    ranked by a timing, so the tuner's choice is still a real one, at a few runs' cost.
    """
    saved = []
    for tuner in tuners:
        attr = _bench_attr(tuner)
        saved.append((tuner, attr, tuner.__dict__.get(attr, _MISSING)))
        tuner.__dict__[attr] = _quick_bench
    try:
        yield
    finally:
        for tuner, attr, value in reversed(saved):
            if value is _MISSING:
                tuner.__dict__.pop(attr, None)
            else:
                tuner.__dict__[attr] = value
