"""The claims about precision a contract makes beside its inputs: accumulation, the backward, per device.

- ``accumulate`` values (a float dtype, ``"input"``, or {input dtype: dtype});
- :class:`Backward`, the declared backward, resolved against its contract by :func:`resolve_backward`;
- :class:`PerDevice`, a claim that differs by device (``accumulate={"cpu": "input", "cuda": "float32"}``),
  which :meth:`~.contract.Contract.on_device` resolves for the device a cell runs on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from triton_conformance.model.inputs import ACCUMULATE_INPUT, FLOAT_DTYPES, _fail

__all__ = ["Backward", "DEVICE_KEYS", "PerDevice", "resolve_backward"]

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


def _accumulate_value(where: str, acc: Any) -> str | dict[str, str]:
    """A validated accumulation declaration (``Contract.accumulate``, ``Backward.accumulate[...]``)."""
    expected = (f"a float dtype {FLOAT_DTYPES}, {ACCUMULATE_INPUT!r} (the input dtype), or a mapping "
                "from input dtype to accumulation dtype such as {'float16': 'float16', 'float32': 'float32'}")
    if isinstance(acc, PerDevice):
        return acc
    if isinstance(acc, Mapping) and any(k in DEVICE_KEYS for k in acc):
        return PerDevice.of(where, acc, _accumulate_value)
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


@dataclass(frozen=True)
class Backward:
    """A subject's backward, as its contract declares it (``register(..., backward=...)``).

    - ``grads``: the inputs that get gradients (default: every float Tensor input);
    - ``output``: the dim symbols of the output's shape, which grad_output has
      (default: the shape of the first input in ``grads``);
    - ``reduces``: gradient name -> dim symbol(s) its computation sums over, which
      scale its tolerance (default: the output dims the input lacks, as dW sums
      over rows; else the forward's ``reduces``);
    - ``deterministic``: bitwise-identical gradients for identical inputs (None: as
      the forward claims; False for a dW reduced with atomics);
    - ``overwrites_grad_output``: the backward may write into grad_output;
    - ``error_scale``: a torch function of the inputs, ``grad_output`` and the scalars (by
      keyword, float64) giving {gradient name: the magnitude its rounding errors scale with},
      elementwise or a number (the terms it sums, where they cancel); default the largest
      ``|oracle gradient|``;
    - ``accumulate``: {gradient name: the precision its terms are formed and summed in}, for a
      gradient where that is not the forward's ``accumulate`` (a value as ``Contract.accumulate``
      takes: a float dtype, ``"input"``, or {input dtype: dtype}); e.g. ``{"W": "input"}`` for a
      dW summing ``dy * x_hat`` products rounded to the input dtype (HF Llama's RMSNorm casting).
    """

    grads: tuple[str, ...] = ()
    output: tuple[str, ...] | None = None
    reduces: Mapping[str, Any] = field(default_factory=dict)
    deterministic: bool | None = None
    overwrites_grad_output: bool = False
    error_scale: Callable[..., Any] | None = None
    accumulate: Mapping[str, Any] = field(default_factory=dict)


def resolve_backward(contract: Any, b: Any) -> Backward | None:
    """``contract``'s (a :class:`~.contract.Contract`, being built) ``backward=`` declaration validated and completed (its defaults filled in from the
    contract), or None for no backward."""
    if b is None or b is False:
        return None
    if b is True:
        b = Backward()
    elif isinstance(b, str):
        b = Backward(grads=(b,))
    elif isinstance(b, (tuple, list)):
        b = Backward(grads=tuple(b))
    elif not isinstance(b, Backward):
        raise _fail("Contract", "backward", b, "True, the names of the inputs that get gradients, "
                    "or Backward(grads=..., ...)")
    floats = [n for n in contract.tensor_names if getattr(contract.inputs[n], "index_of", None) is None
              and any(d in FLOAT_DTYPES for d in contract.inputs[n].dtypes)]
    grads = tuple(b.grads) if b.grads else tuple(floats)
    for name in grads:
        if name not in floats:
            raise _fail("Contract", "backward.grads", name, f"names of float Tensor inputs from {floats}")
    if not grads or len(set(grads)) != len(grads):
        raise _fail("Contract", "backward.grads", grads, "each float input named once, at least one")
    output = tuple(b.output) if b.output is not None else tuple(contract.inputs[grads[0]].shape)
    for sym in output:
        if sym not in contract.dims:
            raise _fail("Contract", "backward.output", sym, f"dims declared in dims={sorted(contract.dims)}")
    reduces = {}
    for name, syms in dict(b.reduces).items():
        syms = (syms,) if isinstance(syms, str) else tuple(syms)
        if name not in grads or any(s not in contract.dims for s in syms):
            raise _fail("Contract", f"backward.reduces[{name!r}]", syms,
                        f"a gradient from {grads} mapped to dims from {sorted(contract.dims)}")
        reduces[name] = syms
    if b.error_scale is not None and not callable(b.error_scale):
        raise _fail("Contract", "backward.error_scale", b.error_scale, "a callable or None")
    if b.deterministic not in (None, True, False) or not isinstance(b.overwrites_grad_output, bool):
        raise _fail("Contract", "backward", b, "deterministic None/True/False, overwrites_grad_output a bool")
    if not isinstance(b.accumulate, Mapping):
        raise _fail("Contract", "backward.accumulate", b.accumulate, f"a mapping from gradients {grads} to "
                    "accumulation dtypes")
    accumulate = {}
    for name, acc in b.accumulate.items():
        if name not in grads:
            raise _fail("Contract", "backward.accumulate", name, f"a gradient from {grads} as keys")
        accumulate[name] = _accumulate_value(f"backward.accumulate[{name!r}]", acc)
    return replace(b, grads=grads, output=output, reduces=reduces, accumulate=accumulate,
                   deterministic=contract.deterministic if b.deterministic is None else b.deterministic)
