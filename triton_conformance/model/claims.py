"""The claims about precision a contract makes beside its inputs: accumulation, and per device.

- ``accumulate`` values (a float dtype, ``"input"``, or {input dtype: dtype}), for the forward and for
  each gradient (:mod:`.backward`);
- :class:`PerDevice`, a claim that differs by device (``accumulate={"cpu": "input", "cuda": "float32"}``),
  which :meth:`~.contract.Contract.on_device` resolves for the device a cell runs on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from triton_conformance.model.inputs import ACCUMULATE_INPUT, FLOAT_DTYPES, _fail

__all__ = ["DEVICE_KEYS", "PerDevice", "accumulate_value", "on_device"]

# The devices a per-device claim names.  The interpreter runs the launcher on CPU tensors, so a library
# that dispatches on ``x.is_cuda`` takes its CPU path there: the "cpu" claim applies on the interpreter,
# unless the subject declares ``pretend_cuda=True`` (its tensors then report CUDA inside the launcher, which
# takes its CUDA path: the "cuda" claim applies), or an "interpreter" claim says what runs there.
DEVICE_KEYS = ("cpu", "cuda", "interpreter")


@dataclass(frozen=True, slots=True)
class PerDevice:
    """One claim per device: ``claims`` holds (device, value) pairs, "cpu" and "cuda" at least."""

    claims: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, where: str, mapping: Mapping[str, Any], check: Callable[[str, Any], Any]) -> "PerDevice":
        """Validate ``mapping`` (device -> claim), each claim with ``check(where, value)``."""
        unknown = [k for k in mapping if k not in DEVICE_KEYS]
        missing = [k for k in ("cpu", "cuda") if k not in mapping]
        if unknown or missing:
            raise _fail("Contract", where, dict(mapping), f"a mapping from devices {DEVICE_KEYS} to claims, naming "
                        "'cpu' and 'cuda' (the interpreter takes 'interpreter' if given, else 'cpu')")
        return cls(tuple((k, check(f"{where}[{k!r}]", v)) for k, v in mapping.items()))

    def on(self, device: str, interpreter_path: str = "cpu") -> Any:
        """The claim on ``device`` ("cpu", "cuda" or "interpreter"); on the interpreter, the "interpreter" claim
        if given, else that of ``interpreter_path``, the device whose code path the launcher takes there."""
        claims = dict(self.claims)
        if device not in DEVICE_KEYS or interpreter_path not in ("cpu", "cuda"):
            raise ValueError(f"PerDevice.on: device={device!r}, interpreter_path={interpreter_path!r}, expected "
                             f"one of {DEVICE_KEYS} and 'cpu' or 'cuda'")
        if device == "interpreter":
            return claims.get("interpreter", claims[interpreter_path])
        return claims[device]

    def __repr__(self) -> str:
        return f"PerDevice({dict(self.claims)!r})"


def on_device(value: Any, device: str, interpreter_path: str = "cpu") -> Any:
    """``value`` as it applies on ``device``: a :class:`PerDevice` claim resolved, anything else as it is."""
    return value.on(device, interpreter_path) if isinstance(value, PerDevice) else value


def accumulate_value(where: str, acc: Any) -> str | dict[str, str]:
    """A validated accumulation declaration (``Contract.accumulate``, ``Backward.accumulate[...]``)."""
    expected = (f"a float dtype {FLOAT_DTYPES}, {ACCUMULATE_INPUT!r} (the input dtype), or a mapping "
                "from input dtype to accumulation dtype such as {'float16': 'float16', 'float32': 'float32'}")
    if isinstance(acc, PerDevice):
        return acc
    if isinstance(acc, Mapping) and any(k in DEVICE_KEYS for k in acc):
        return PerDevice.of(where, acc, accumulate_value)
    if isinstance(acc, Mapping):
        for k, v in acc.items():
            if k not in FLOAT_DTYPES:
                raise _fail("Contract", where, k, f"input dtypes from {FLOAT_DTYPES} as keys")
            if v not in FLOAT_DTYPES:
                raise _fail("Contract", f"{where}[{k!r}]", v, f"an accumulation dtype from {FLOAT_DTYPES}")
        return dict(acc)
    if acc not in FLOAT_DTYPES + (ACCUMULATE_INPUT,):
        raise _fail("Contract", where, acc, expected)
    return acc
