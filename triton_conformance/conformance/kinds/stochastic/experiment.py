"""Running a stochastic subject on designed inputs, and classifying what comes back against its model."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from triton_conformance.conformance.battery.launching import TORCH_SEED, launch, launcher_scalars
from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.kinds.stochastic.plan import POSITIVE_FRACTION, ROW_WIDTH
from triton_conformance.model.stochastic import TORCH_SEED_RANGE
from triton_conformance.oracles.statistics import StatResult, binomial_test, count_normal_test
from triton_conformance.strategies._internal.tensors import torch_dtype

__all__ = ["Draw", "Experiment", "DesignFailure", "require_valid", "probabilities", "at", "flat", "bernoulli_test",
           "agree_probability"]


@dataclass
class Draw:
    inputs: dict[str, Any]
    out: Any
    events: Any  # model.Events
    params: dict[str, float]


class Experiment:
    """Launches one subject on designed inputs and classifies what comes back."""

    def __init__(self, subject, backend, seed: int, judge: Judge | None = None):
        self.subject, self.contract, self.model = subject, subject.contract, subject.contract.model
        self.backend = backend
        self.judge = judge or Judge(subject, on_cuda=backend.compiles)  # every bound comes from the subject's judge
        self.last: dict[str, Any] | None = None  # the latest launch, for the counterexample
        self.elements = 0  # elements launched, for the cost figures
        self.generator = torch.Generator().manual_seed(seed)
        claimed = self.contract.float_dtypes()
        testable = [d for d in claimed if d not in backend.untestable]
        self.dtype = torch_dtype("float32" if "float32" in testable else (testable or claimed)[0])

    @property
    def seed_key(self) -> str:
        """The launch parameter carrying the seed: the seed scalar, or torch.manual_seed's."""
        return self.model.seed if self.model.seed is not None else TORCH_SEED

    def seed_range(self) -> tuple[int, int]:
        if self.model.seed is None:
            return TORCH_SEED_RANGE
        s = self.contract.scalars[self.model.seed]
        return int(s.low), int(s.high)

    def fresh_seed(self) -> int:
        low, high = self.seed_range()
        return int(torch.randint(low, high + 1, (1,), generator=self.generator))

    def call(self, inputs, params):
        """The launcher on ``inputs`` with ``params`` (torch seeded first for a torch-seeded subject)."""
        return launch(self.subject, inputs, params)

    def dims(self, elements: int) -> dict[str, int]:
        """Dims giving about ``elements`` elements in rows of ROW_WIDTH, within the contract's ranges."""
        c = self.contract
        dims = {s: max(d.min, min(1, d.max)) for s, d in c.dims.items()}
        shape = c.inputs[c.tensor_names[0]].shape
        last, first = shape[-1], shape[0]
        dims[last] = max(c.dims[last].min, min(c.dims[last].max, ROW_WIDTH if len(shape) > 1 else elements))
        if first != last:
            rest = math.prod(v for s, v in dims.items() if s != first)
            dims[first] = max(c.dims[first].min, min(c.dims[first].max, math.ceil(elements / max(rest, 1))))
        return dims

    def values(self, shape, *, positive: float = POSITIVE_FRACTION, duplicated: bool = False):
        """Magnitudes in [0.5, 2), positive with probability ``positive``; ``duplicated``: each value twice."""
        n = math.prod(shape)
        half = (n + 1) // 2 if duplicated else n
        mags = 0.5 + 1.5 * torch.rand(half, generator=self.generator, dtype=torch.float64)
        signs = torch.where(torch.rand(half, generator=self.generator) < positive, 1.0, -1.0).to(torch.float64)
        v = (mags * signs).to(self.dtype)  # round first, so duplicates stay equal in the input dtype
        if duplicated:
            v = torch.cat([v, v])[:n][torch.randperm(n, generator=self.generator)]
        return v.reshape(shape)

    def negatives_observable(self) -> bool:
        """Whether ``f`` of negative inputs is nonzero, so events there can be seen (not for ReLU)."""
        c = self.contract
        probe = {n: -torch.linspace(0.5, 2.0, 16, dtype=torch.float64).reshape(*([1] * (len(c.inputs[n].shape) - 1)),
                                                                                 16)
                 for n in c.tensor_names}
        ref = c.oracle(**probe, **launcher_scalars(self.params(0.5, 0)))
        ref = ref[0] if isinstance(ref, (tuple, list)) else ref
        return bool((ref != 0).all())

    def params(self, probability: float, seed: int) -> dict[str, float]:
        params = {}
        for name, s in self.contract.scalars.items():
            params[name] = s.representative()
        if self.model.probability_name is not None:
            params[self.model.probability_name] = probability
        params[self.seed_key] = seed
        if self.model.offset:
            params[self.model.offset] = 0
        return params

    def inputs(self, dims, **value_kw) -> dict[str, Any]:
        c = self.contract
        return {n: self.values(tuple(dims[s] for s in c.inputs[n].shape), **value_kw).to(self.backend.device)
                for n in c.tensor_names}

    def launch(self, inputs, params) -> Draw:
        self.last = {"shapes": {n: list(t.shape) for n, t in inputs.items()}, "params": dict(params),
                     "dtype": str(self.dtype).replace("torch.", "")}
        self.elements += sum(t.numel() for t in inputs.values())
        out = self.call(inputs, params)
        out = out[0] if isinstance(out, (tuple, list)) else out
        if self.backend.on_device:
            torch.cuda.synchronize()
        as64 = {n: t.detach().cpu().to(torch.float64) for n, t in inputs.items()}
        ref = self.contract.oracle(**as64, **launcher_scalars(params))
        ref = (ref[0] if isinstance(ref, (tuple, list)) else ref).to(torch.float64)
        out = out.detach().cpu()
        if tuple(out.shape) != tuple(ref.shape):
            raise DesignFailure("bad-shape", f"output shape {tuple(out.shape)}, oracle's {tuple(ref.shape)}")
        finite = ref[torch.isfinite(ref)].abs()
        scale = self.model.value_scale(float(finite.max()), params) if finite.numel() else 1.0
        dims = {sym: size for n, t in inputs.items() for sym, size in zip(self.contract.inputs[n].shape, t.shape)}
        dtypes = {n: str(t.dtype).replace("torch.", "") for n, t in inputs.items()}
        bound = self.judge.bound(dims, dtypes, out, ref, scale)
        return Draw(inputs, out, self.model.classify(out, ref, params, bound), params)

    def collect(self, probability: float, trials: int, **value_kw) -> tuple[int, int, list[Draw]]:
        """Launch with fresh seeds until ``trials`` observable elements: (events, trials, draws)."""
        events = seen = 0
        draws = []
        while seen < trials:
            need = math.ceil((trials - seen) / value_kw.get("positive", POSITIVE_FRACTION) * 1.02) + 64
            draw = self.launch(self.inputs(self.dims(need), **value_kw), self.params(probability, self.fresh_seed()))
            require_valid(draw)
            k, n = draw.events.counts()
            if n == 0:
                raise DesignFailure("invalid-value", "no element's event was observable; the model cannot be tested")
            events, seen = events + k, seen + n
            draws.append(draw)
        return events, seen, draws


class DesignFailure(Exception):
    """A designed experiment found an outcome that is not statistical: an impossible value, a crash, a bad edge."""

    def __init__(self, kind: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.kind, self.message, self.details = kind, message, details or {}


def require_valid(draw: Draw) -> None:
    """Raise DesignFailure if any element of the draw is a value the model does not allow."""
    bad = draw.events.invalid
    if bool(bad.any()):
        first = tuple(int(i) for i in torch.nonzero(bad)[0])
        x = {n: float(t.detach().cpu()[first]) for n, t in draw.inputs.items() if tuple(t.shape) == tuple(bad.shape)}
        raise DesignFailure("invalid-value", f"{int(bad.sum())} of {bad.numel()} elements are values the model "
                            f"does not allow ({draw.events.allowed}); first at {first}: got "
                            f"{float(draw.out[first])!r} for inputs {x} with {draw.params}",
                            {"first_index": first, "invalid": int(bad.sum())})


def probabilities(events):
    """P(event) of each element: one float when the model gives every element the same
    (dropout), else a float64 tensor shaped like the output (stochastic rounding)."""
    p = events.probability
    if isinstance(p, (int, float)):
        return float(p)

    return p.to(torch.float64).expand(events.event.shape)


def at(probs, index):
    """``probs`` at ``index`` (a mask, indices or a slice); a single probability stays one."""
    return probs if isinstance(probs, float) else probs[index]


def flat(probs):
    return probs if isinstance(probs, float) else probs.reshape(-1)


def bernoulli_test(k: int, n: int, probs, description: str) -> StatResult:
    """``k`` events in ``n`` trials: the exact binomial test for one probability, else the
    Poisson-binomial normal approximation over the ``n`` trials' probabilities."""
    if isinstance(probs, float):
        return binomial_test(k, n, probs, description)
    if n and float(probs.max() - probs.min()) < 1e-12:
        return binomial_test(k, n, float(probs.reshape(-1)[0]), description)
    return count_normal_test(k, n, float(probs.sum()), float((probs * (1 - probs)).sum()), description)


def agree_probability(pa, pb):
    """P(two independent events agree) for per-pair probabilities: p p' + (1 - p)(1 - p')."""
    return pa * pb + (1 - pa) * (1 - pb)
