"""Stochastic models: what a random kernel's output may be, given its deterministic oracle.

A stochastic subject still declares an FP64 ``oracle``, the deterministic part
``f`` of what it computes (ReLU, for fused ReLU + dropout).  Its ``model``
says how each output element relates to ``f``'s: which values are allowed,
and which binary random *event* each element shows (dropped or kept, rounded
up or down) with what probability.  The statistical checks are written once
against that event view, so a new kind of stochastic kernel (random-mask
attention, stochastic rounding) only declares a model.

Declaring a model imports no torch; :meth:`StochasticModel.classify` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from triton_conformance.errors import InvalidContract

__all__ = ["Events", "StochasticModel", "Dropout", "StochasticRounding", "DEFAULT_ALPHA", "TORCH_SEED_RANGE"]

# The false-positive rate of one whole run of a subject's statistical checks.
DEFAULT_ALPHA = 1e-6
# The seeds drawn for a model with seed=None (passed to torch.manual_seed).
TORCH_SEED_RANGE = (0, 2**31 - 1)


@dataclass
class Events:
    """One output classified against the model.

    - ``event``: bool, the element shows the random event (for dropout: it was dropped);
    - ``observable``: bool, the event can be told from the output here (a dropped
      zero looks like a kept zero, so dropout's events are observable only where ``f(x) != 0``);
    - ``probability``: the model's P(event) for an observable element, a float or a tensor;
    - ``invalid``: bool, the element's value is impossible under the model;
    - ``allowed``: a description of the allowed values, for messages.
    """

    event: Any
    observable: Any
    probability: Any
    invalid: Any
    allowed: str = ""

    def counts(self) -> tuple[int, int]:
        """(events, trials) over the observable elements."""
        return int((self.event & self.observable).sum()), int(self.observable.sum())


@dataclass(frozen=True)
class StochasticModel:
    """Base class of output models; subclasses implement :meth:`classify` and :meth:`probability`.

    - ``seed``: name of the launcher's seed argument (a declared int scalar), or None
      for a launcher seeded through ``torch.manual_seed``: the harness calls
      ``torch.manual_seed(seed)`` before each launch, with a seed it draws from
      ``TORCH_SEED_RANGE``.
    - ``offset``: name of its offset argument into the random stream, if any.
    - ``probabilities``: name -> the values at which rates are tested, for each
      probability argument (a declared float scalar).
    - ``alpha``: the false-positive rate allowed for one run of all of the
      subject's statistical checks; each check gets a Bonferroni share of it.
    """

    seed: str | None = "seed"
    offset: str | None = None
    probabilities: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    alpha: float = DEFAULT_ALPHA

    kind = "stochastic"

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name in (("seed",) if self.seed is not None else ()) + (("offset",) if self.offset is not None else ()):
            value = getattr(self, name)
            if not (isinstance(value, str) and value.isidentifier()):
                raise InvalidContract(f"{owner}: {name}={value!r}, expected the name of a launcher argument"
                                  + (" (or None: seeded through torch.manual_seed)" if name == "seed" else ""))
        if not (isinstance(self.alpha, float) and 0 < self.alpha < 1):
            raise InvalidContract(f"{owner}: alpha={self.alpha!r}, expected a float in (0, 1), e.g. 1e-6")
        probabilities = dict(self.probabilities)
        for name, levels in probabilities.items():
            levels = tuple(levels)
            if not levels or not all(isinstance(q, (int, float)) and 0 <= q <= 1 for q in levels):
                raise InvalidContract(f"{owner}: probabilities[{name!r}]={levels!r}, expected probabilities in [0, 1]")
            probabilities[name] = tuple(float(q) for q in levels)
        object.__setattr__(self, "probabilities", probabilities)

    def scalar_names(self) -> tuple[str, ...]:
        """The launcher arguments the model refers to; the contract must declare each as a scalar."""
        seed = (self.seed,) if self.seed is not None else ()
        return seed + ((self.offset,) if self.offset else ()) + tuple(self.probabilities)

    @property
    def probability_name(self) -> str | None:
        """The probability argument the rate checks vary (the first declared)."""
        return next(iter(self.probabilities), None)

    def probability(self, params: Mapping[str, float]) -> float:
        """P(event) of an observable element for these launcher arguments."""
        raise NotImplementedError

    def classify(self, out, ref, params: Mapping[str, float], bound) -> Events:
        """Classify ``out`` (the kernel's output) against ``ref`` (``f``'s FP64 output).

        ``bound`` is the tolerance for values that carry ``f``'s numbers.
        """
        raise NotImplementedError

    def value_scale(self, ref_max: float, params: Mapping[str, float]) -> float:
        """The magnitude the output's values reach, given ``max |f(x)|``; tolerances scale with it."""
        return ref_max

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Dropout(StochasticModel):
    """Each element is ``f(x) / (1 - p)`` or exactly 0, dropped independently with probability ``p``.

    Independent across elements and of ``x``'s values; ``p`` is the launcher
    argument named by ``p`` (default ``"p"``), tested at ``levels``.
    """

    p: str = "p"
    levels: tuple[float, ...] = (0.0, 0.1, 0.5, 0.9, 0.99)

    kind = "dropout"

    def __post_init__(self) -> None:
        if not (isinstance(self.p, str) and self.p.isidentifier()):
            raise InvalidContract(f"Dropout: p={self.p!r}, expected the name of the launcher's probability argument")
        object.__setattr__(self, "probabilities", {self.p: self.levels, **dict(self.probabilities)})
        super().__post_init__()
        object.__setattr__(self, "levels", self.probabilities[self.p])

    def probability(self, params: Mapping[str, float]) -> float:
        return float(params[self.p])

    def value_scale(self, ref_max: float, params: Mapping[str, float]) -> float:
        return ref_max / max(1e-12, 1.0 - float(params[self.p]))  # survivors are f(x) / (1 - p)

    def classify(self, out, ref, params: Mapping[str, float], bound) -> Events:
        import torch

        p = float(params[self.p])
        got = out.to(torch.float64)
        kept_value = ref / (1.0 - p) if p < 1 else torch.zeros_like(ref)
        # a drop is visible only where the kept value would not itself be 0 in the output dtype
        observable = torch.isfinite(ref) & (ref != 0) & (kept_value.to(out.dtype) != 0)
        dropped = got == 0
        atol = bound.atol if isinstance(bound.atol, (int, float)) else bound.atol.to(got.device)
        kept = (got - kept_value).abs() <= atol + bound.rtol * kept_value.abs()
        invalid = torch.where(observable, ~(dropped | kept), got != 0)
        return Events(event=dropped & observable, observable=observable, probability=p, invalid=invalid,
                      allowed=f"0 or f(x)/(1-{self.p}) with {self.p}={p:g}")

    def describe(self) -> str:
        return f"Dropout(p={self.p!r}): 0 or f(x)/(1-p), dropped independently with probability p"


_MANTISSA_BITS = {"bfloat16": 7, "float16": 10, "float32": 23}
_MIN_EXPONENT = {"bfloat16": -126, "float16": -14, "float32": -126}


@dataclass(frozen=True)
class StochasticRounding(StochasticModel):
    """Each element is ``f(x)`` rounded to one of its two neighbours on the ``grid`` dtype's grid.

    Away from zero with probability (|f(x)| - down) / (up - down), where down
    and up are the grid points around |f(x)|, else towards zero, independently
    across elements.  The probability comes from the data, so the model
    declares no probability argument; an exact grid value must come back unchanged.
    """

    grid: str = "bfloat16"

    kind = "stochastic-rounding"

    def __post_init__(self) -> None:
        if self.grid not in _MANTISSA_BITS:
            raise InvalidContract(f"StochasticRounding: grid={self.grid!r}, expected one of {tuple(_MANTISSA_BITS)}")
        super().__post_init__()

    def neighbours(self, ref):
        """(down, up): the grid points around |ref| (equal where |ref| is on the grid)."""
        import torch

        magnitude = ref.abs()
        _, exponent = torch.frexp(magnitude)
        exponent = torch.clamp(exponent - 1, min=_MIN_EXPONENT[self.grid])  # subnormals share the smallest ulp
        ulp = torch.ldexp(torch.ones_like(magnitude), exponent - _MANTISSA_BITS[self.grid])
        down = torch.floor(magnitude / ulp) * ulp
        return down, torch.where(down == magnitude, down, down + ulp)

    def classify(self, out, ref, params: Mapping[str, float], bound) -> Events:
        import torch

        got = out.to(torch.float64)
        down, up = self.neighbours(ref)
        sign = torch.where(ref < 0, -1.0, 1.0).to(torch.float64)
        observable = torch.isfinite(ref) & (up != down)
        went_up = got == sign * up
        probability = torch.where(observable, (ref.abs() - down) / torch.where(observable, up - down, 1.0), 0.0)
        invalid = ~(went_up | (got == sign * down))
        return Events(event=went_up & observable, observable=observable, probability=probability, invalid=invalid,
                      allowed=f"f(x) rounded down or up to the {self.grid} grid")

    def describe(self) -> str:
        return f"StochasticRounding(grid={self.grid!r}): up with probability equal to the distance from below"
