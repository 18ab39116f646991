"""A claim that differs by device: :class:`PerDevice`, and the devices it names.

Any claim of a contract may take one, through the same mapping: a tolerance, an accumulation (the
forward's, a gradient's: :mod:`.claims`) or a tensor's dtypes (:class:`~.inputs.Tensor`).
:meth:`~.contract.Contract.on_device` resolves every one of them for the device a cell runs on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from triton_conformance.errors import InvalidContract

__all__ = ["DEVICE_KEYS", "PerDevice", "on_device", "is_per_device"]


def _fail(owner: str, name: str, value: Any, expected: str) -> InvalidContract:
    return InvalidContract(f"{owner}: {name}={value!r}, expected {expected}")


def is_per_device(value: Any) -> bool:
    """Whether a declared ``value`` is a per-device claim: a :class:`PerDevice`, or a mapping naming a device."""
    return isinstance(value, PerDevice) or (isinstance(value, Mapping) and any(k in DEVICE_KEYS for k in value))


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
    def of(cls, where: str, mapping: Mapping[str, Any], check: Callable[[str, Any], Any],
           owner: str = "Contract") -> "PerDevice":
        """Validate ``mapping`` (device -> claim), each claim with ``check(where, value)``; ``owner`` names the
        declaration in the error ("Contract", "Tensor")."""
        unknown = [k for k in mapping if k not in DEVICE_KEYS]
        missing = [k for k in ("cpu", "cuda") if k not in mapping]
        if unknown or missing:
            raise _fail(owner, where, dict(mapping), f"a mapping from devices {DEVICE_KEYS} to claims, naming "
                        "'cpu' and 'cuda' (the interpreter takes 'interpreter' if given, else 'cpu')")
        return cls(tuple((k, check(f"{where}[{k!r}]", v)) for k, v in mapping.items()))

    def source(self, device: str, interpreter_path: str = "cpu") -> str:
        """The device whose claim applies on ``device`` ("cpu", "cuda" or "interpreter"): on the interpreter,
        "interpreter" if it is given, else ``interpreter_path``, the device whose code path the launcher takes
        there."""
        if device not in DEVICE_KEYS or interpreter_path not in ("cpu", "cuda"):
            raise ValueError(f"PerDevice.on: device={device!r}, interpreter_path={interpreter_path!r}, expected "
                             f"one of {DEVICE_KEYS} and 'cpu' or 'cuda'")
        if device == "interpreter":
            return "interpreter" if "interpreter" in dict(self.claims) else interpreter_path
        return device

    def on(self, device: str, interpreter_path: str = "cpu") -> Any:
        """The claim on ``device`` (that of :meth:`source`)."""
        return dict(self.claims)[self.source(device, interpreter_path)]

    def __repr__(self) -> str:
        return f"PerDevice({dict(self.claims)!r})"


def on_device(value: Any, device: str, interpreter_path: str = "cpu") -> Any:
    """``value`` as it applies on ``device``: a :class:`PerDevice` claim resolved, anything else as it is."""
    return value.on(device, interpreter_path) if isinstance(value, PerDevice) else value
