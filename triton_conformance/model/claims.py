"""The claims about precision a contract makes beside its inputs: accumulation, and per device.

- ``accumulate`` values (a float dtype, ``"input"``, or {input dtype: dtype}), for the forward and for
  each gradient (:mod:`.backward`);
- :class:`PerDevice` (:mod:`.per_device`, re-exported here), a claim that differs by device
  (``accumulate={"cpu": "input", "cuda": "float32"}``, ``Tensor(dtypes={"cpu": ..., "cuda": ...})``),
  which :meth:`~.contract.Contract.on_device` resolves for the device a cell runs on.
"""

from __future__ import annotations

from typing import Any, Mapping

from triton_conformance.model.inputs import ACCUMULATE_INPUT, FLOAT_DTYPES, _fail
from triton_conformance.model.per_device import DEVICE_KEYS, PerDevice, on_device

__all__ = ["DEVICE_KEYS", "PerDevice", "accumulate_value", "on_device"]

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
