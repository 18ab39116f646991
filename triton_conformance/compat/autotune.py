"""``@triton.autotune`` under the interpreter: prune as the autotuner would, run one config, time nothing.

The autotuner benchmarks through ``driver.active`` ("0 active drivers" on a
CPU machine), and timing interpreted programs would say nothing about the GPU
anyway.  With this shim ``Autotuner.prune_configs`` runs the kernel's own
pruning (``prune_configs_by``: ``early_config_prune``, then ``perf_model`` /
``top_k``) and keeps one survivor -- the one :func:`pin_config` names, else the
one with the largest blocks (:func:`interpreted_fastest`) -- so ``Autotuner.run``
takes its single-config path and benchmarks nothing.  Every survivor is
recorded: :func:`surviving_configs` gives them, so each can be tested as its
own variant.

``Autotuner`` subclasses with a runtime of their own (FlagGems' ``LibTuner``)
benchmark even a single survivor and keep their choices in a cache of their
own (a database, keyed by their own key).  Under the shim a tuner's benchmark
is untimed (it returns 0 ms and runs nothing) unless the engine has hooked it,
and a cache that is not a dict is replaced by one in memory: a choice lives
for this process only, so the pruning above decides it, not a past run.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice
from triton_conformance.errors import InvalidArgument

__all__ = ["apply", "interpreted_fastest", "pin_config", "surviving_configs"]

_SURVIVORS = "_compat_surviving_configs"
_PIN = "_compat_pinned_config"


def _autotuner(kernel: Any) -> Any:
    from triton.runtime.autotuner import Autotuner

    k = kernel
    while k is not None and not isinstance(k, Autotuner):
        k = getattr(k, "fn", None)  # an @triton.heuristics wrapper around the autotuner
    if k is None:
        raise InvalidArgument(f"kernel={kernel!r}, expected an @triton.autotune kernel")
    return k


def surviving_configs(kernel: Any) -> tuple:
    """The configs ``kernel`` kept after its own pruning at its last launch (a 1-config kernel: that config).

    Empty before the first launch (pruning may depend on the arguments).
    """
    tuner = _autotuner(kernel)
    if len(tuner.configs) == 1:
        return tuple(tuner.configs)
    return tuple(getattr(tuner, _SURVIVORS, ()))


@contextlib.contextmanager
def pin_config(kernel: Any, index: int) -> Iterator[None]:
    """Launches of ``kernel`` inside the block run its ``index``-th surviving config (not the interpreter's pick)."""
    tuner = _autotuner(kernel)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise InvalidArgument(f"pin_config: index={index!r}, expected a non-negative int")
    previous = getattr(tuner, _PIN, None)
    setattr(tuner, _PIN, index)
    tuner.cache.clear()  # the choice is cached by tuning key
    try:
        yield
    finally:
        setattr(tuner, _PIN, previous)
        tuner.cache.clear()


def apply(patch: Patch, target: TargetDevice) -> None:
    from triton.runtime.autotuner import Autotuner

    original = Autotuner.prune_configs

    def prune_configs(self: Any, kwargs: dict, *args: Any, **more: Any) -> list:
        survivors = list(original(self, kwargs, *args, **more))
        setattr(self, _SURVIVORS, tuple(survivors))
        index = getattr(self, _PIN, None)
        if index is None:
            return [interpreted_fastest(survivors)]
        if index >= len(survivors):
            raise InvalidArgument(f"pin_config: index={index} but {self.base_fn.__name__} kept "
                                  f"{len(survivors)} config(s) after pruning")
        return [survivors[index]]

    patch.set(Autotuner, "prune_configs", prune_configs)
    patch.set(Autotuner, "do_bench", _Untimed())
    patch.set(Autotuner, "cache", property(_get_cache, _set_cache))


def interpreted_fastest(configs: list) -> Any:
    """The config the interpreter runs in the fewest steps: the largest product of its ``BLOCK*`` values
    (the first of equals).  The interpreter's cost is per operation of a program, while a block's elements
    are one numpy operation: a row softmax in blocks of 128 lanes runs 8 times fewer operations than in
    blocks of 16.  Which config runs outside the ``autotune:*`` cells says nothing about the GPU's choice
    (the cells test every survivor, each pinned)."""
    def block_product(config: Any) -> int:
        product = 1
        for name, value in (getattr(config, "kwargs", None) or {}).items():
            if name.upper().startswith("BLOCK") and isinstance(value, int) and value > 0:
                product *= value
        return product

    return max(configs, key=block_product)  # max keeps the first of equals


def _untimed(kernel_call: Any, quantiles: Any = None, **kwargs: Any) -> list[float]:
    return [0.0, 0.0, 0.0]


class _Untimed:
    """``Autotuner.do_bench`` under the interpreter: no timing.  A non-data descriptor, so a benchmark the
    engine sets on a tuner instance still wins."""

    def __get__(self, tuner: Any, owner: Any = None) -> Any:
        return self if tuner is None else _untimed


def _get_cache(tuner: Any) -> dict:
    return tuner.__dict__.setdefault("cache", {})


def _set_cache(tuner: Any, value: Any) -> None:
    tuner.__dict__["cache"] = value if isinstance(value, dict) else {}  # a subclass's persistent cache: in memory
