"""A subject's backward, as its contract declares it: :class:`Backward`, and its validation.

Plain data with no torch import, as the rest of the contract; :func:`resolve_backward` spells out
the defaults (the gradients, the output's shape, the outputs that carry gradients) and raises
:class:`~triton_conformance.errors.InvalidContract` naming the field that is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from triton_conformance.model.claims import accumulate_value
from triton_conformance.model.inputs import FLOAT_DTYPES, _fail

__all__ = ["Backward", "resolve_backward"]


@dataclass(frozen=True)
class Backward:
    """A subject's backward, as its contract declares it (``register(..., backward=...)``).

    - ``grads``: the inputs that get gradients (default: every float Tensor input);
    - ``output``: the dim symbols of the output's shape, which grad_output has
      (default: the shape of the first input in ``grads``);
    - ``outputs``: which of the forward's outputs carry a gradient, each backpropagated with a
      grad_output of its own: None (every float output the launcher returns, each shaped as
      ``output``), their positions (``(0, 1)`` for a fused add+norm's ``(out, residual)``), or
      {position: dim symbols} for outputs shaped otherwise (``{0: ("M", "N"), 1: ("M",)}``);
    - ``reduces``: gradient name -> dim symbol(s) its computation sums over, which
      scale its tolerance (default: the output dims the input lacks, as dW sums
      over rows; else the forward's ``reduces``);
    - ``deterministic``: bitwise-identical gradients for identical inputs (None: as
      the forward claims; False for a dW reduced with atomics);
    - ``overwrites_grad_output``: the backward may write into grad_output;
    - ``error_scale``: a torch function of the inputs, ``grad_output`` and the scalars (by
      keyword, float64; ``grad_output`` is {position: tensor} where more than output 0 carries
      a gradient) giving {gradient name: the magnitude its rounding errors scale with},
      elementwise or a number (the terms it sums, where they cancel); default the largest
      ``|oracle gradient|``;
    - ``accumulate``: {gradient name: the precision its terms are formed and summed in}, for a
      gradient where that is not the forward's ``accumulate`` (a value as ``Contract.accumulate``
      takes: a float dtype, ``"input"``, or {input dtype: dtype}); e.g. ``{"W": "input"}`` for a
      dW summing ``dy * x_hat`` products rounded to the input dtype (HF Llama's RMSNorm casting).
    """

    grads: tuple[str, ...] = ()
    output: tuple[str, ...] | None = None
    outputs: Any = None
    reduces: Mapping[str, Any] = field(default_factory=dict)
    deterministic: bool | None = None
    overwrites_grad_output: bool = False
    error_scale: Callable[..., Any] | None = None
    accumulate: Mapping[str, Any] = field(default_factory=dict)


def resolve_backward(contract: Any, b: Any) -> Backward | None:
    """``Contract.backward`` as declared (True, a name, names, or a Backward), validated and resolved: its
    grads, output shape, outputs, reductions and accumulations spelt out (None: no backward)."""
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
    outputs = _outputs(contract, b.outputs, output)
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
        accumulate[name] = accumulate_value(f"backward.accumulate[{name!r}]", acc)
    return replace(b, grads=grads, output=output, outputs=outputs, reduces=reduces, accumulate=accumulate,
                   deterministic=contract.deterministic if b.deterministic is None else b.deterministic)


def _outputs(contract: Any, outputs: Any, output: tuple[str, ...]) -> dict[int, tuple[str, ...]] | None:
    """``Backward.outputs`` as {position: dim symbols}, or None (every float output, shaped ``output``)."""
    if outputs is None:
        return None
    expected = ("None (every float output), the positions of the outputs that carry a gradient such as "
                "(0, 1), or {position: dim symbols} for outputs shaped otherwise")
    if isinstance(outputs, int) and not isinstance(outputs, bool):
        outputs = (outputs,)
    if isinstance(outputs, Mapping):
        pairs = list(outputs.items())
    elif isinstance(outputs, (tuple, list)):
        pairs = [(p, output) for p in outputs]
    else:
        raise _fail("Contract", "backward.outputs", outputs, expected)
    positions = [p for p, _ in pairs]
    if not pairs or len(set(positions)) != len(positions) or any(
            isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in positions):
        raise _fail("Contract", "backward.outputs", outputs, expected + ": distinct positions >= 0, at least one")
    resolved = {}
    for p, syms in sorted(pairs):
        syms = (syms,) if isinstance(syms, str) else syms
        if not isinstance(syms, (tuple, list)) or any(s not in contract.dims for s in syms):
            raise _fail("Contract", f"backward.outputs[{p}]", syms,
                        f"a tuple of dims declared in dims={sorted(contract.dims)}")
        resolved[p] = tuple(syms)
    return resolved
