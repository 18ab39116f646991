"""The one judging step every cell kind uses: the oracle, the tolerance, the mask policy and the model.

Given a launcher's inputs and outputs, :meth:`Judge.compare` evaluates the
subject's float64 oracle on the same inputs, applies the declared
fully-masked-row policy, derives the bound (the subject's ``Tolerance``, its
``error_scale``, the reduction length, the accumulation dtype, tf32 for a
``tl.dot`` on CUDA) and compares; a stochastic subject's output is checked
against its model instead.  The searched cells, the large-index cell and the
performance cell all judge through here, so a contract means the same
everywhere.

Raised exceptions are judged here too (:func:`clean_rejection`), and a
subject's own oracle that raises is an :class:`OracleError`: a mistake in
the declaration, never a verdict about the kernel.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import torch

from triton_conformance.conformance.rules import OutputCheck, rule_for
from triton_conformance.conformance.discards import raise_if_out_of_memory
from triton_conformance.model.inputs import FP8_DTYPES
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.subject import Subject
from triton_conformance.oracles import magnitude
from triton_conformance.oracles.quantization import dequantized
from triton_conformance.oracles.tolerance import Bound, default_bound

__all__ = ["Judge", "OracleError", "as_tuple", "clean_rejection", "exception_text", "rejection"]


def as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def exception_text(exc: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-limit:]


class OracleError(BaseException):
    """The subject's oracle (or ``error_scale``) raised.

    A BaseException, so neither the launcher's ``except Exception`` nor
    Hypothesis takes it for a failure of the kernel: it ends the cell as an
    ``oracle-error``.
    """

    def __init__(self, what: str, exc: BaseException):
        super().__init__(f"the subject's {what} raised {type(exc).__name__}: {exc}")
        self.what = what
        self.traceback = exception_text(exc)


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    """The installed package directories of triton and torch (imported by now: the launcher ran)."""
    roots = []
    for name in ("triton", "torch"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            roots.append(os.path.dirname(os.path.realpath(path)) + os.sep)
    return tuple(roots)


def _innermost_file(exc: BaseException) -> str:
    tb = exc.__traceback__
    last = ""
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return os.path.realpath(last) if last else ""


def rejection(exc: BaseException) -> str:
    """How the launcher refused an input: ``"clean"``, ``"unexplained"`` or ``"none"``.

    Clean: raised by the launcher's own code (whatever the type: a bare
    ``assert`` is the Triton tutorials' idiom), with a message.  Unexplained:
    no message, or raised inside triton or torch (compared with their real
    package directories, so a user's folder named ``triton/`` is still the
    user's code) or a triton error type.  None: an ImportError, which no input
    causes (the launcher cannot run at all): never a refusal, a crash.
    """
    if isinstance(exc, ImportError):
        return "none"
    innermost = _innermost_file(exc)
    inside_library = type(exc).__module__.startswith("triton") or any(
        innermost.startswith(root) for root in _library_roots())
    return "clean" if str(exc).strip() and not inside_library else "unexplained"


def clean_rejection(exc: BaseException) -> bool:
    """Whether ``exc`` is the launcher's own refusal, in words (see :func:`rejection`)."""
    return rejection(exc) == "clean"


def _as_float32(value: float) -> float:
    """``value`` rounded to the nearest fp32 (inf past fp32's range, as the kernel would hold it)."""
    return float(torch.tensor(value, dtype=torch.float32))


@dataclass(frozen=True)
class Judge:
    """Judges one subject's outputs on one back end.

    ``options``: what the cell kinds ask of the subject's judging rule (a stochastic subject's
    ``example_alpha``, the level of its per-example rate test).
    """

    subject: Subject
    on_cuda: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    # -- the oracle -------------------------------------------------------
    def launched_scalars(self, scalars: Mapping[str, Any]) -> dict[str, Any]:
        """``scalars`` as the kernel received them: a float scalar rounded to fp32, the type Triton gives
        a Python float argument (a kernel forming ``1 - beta2`` from it is exact; the oracle must start
        from the same beta2).  Int and bool scalars, and names the contract does not declare, as they are."""
        declared = self.subject.contract.scalars
        return {n: (_as_float32(v) if n in declared and declared[n].kind == "float" and isinstance(v, float) else v)
                for n, v in scalars.items()}

    def _call(self, what: str, fn: Any, inputs: Mapping[str, Any], scalars: Mapping[str, Any]) -> tuple:
        try:
            return as_tuple(fn(**inputs, **self.launched_scalars(scalars)))
        except Exception as exc:  # noqa: BLE001 - any error in the user's own reference is theirs
            raise_if_out_of_memory(exc, f"in the {what}")  # the machine's limit, not a mistake of theirs
            raise OracleError(what, exc) from None

    def as_float64(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Copies of ``inputs``: float tensors in float64 (an input with a declared ``Scale`` dequantized);
        integer and bool tensors (indices, masks) as they are."""
        copies = {n: (v.to(torch.float64) if v.dtype.is_floating_point else v.clone()) for n, v in inputs.items()}
        return dequantized(self.subject.contract.inputs, copies)

    def oracle(self, inputs: Mapping[str, Any], scalars: Mapping[str, Any], *, in_input_dtype: bool = False) -> tuple:
        """The oracle's outputs on float64 copies of the float ``inputs`` (integer and bool ones keep their
        dtype, so indices index), or on copies in their own dtype."""
        if in_input_dtype:
            copies = {n: v.clone() for n, v in inputs.items()}
        else:
            copies = self.as_float64(inputs)
        return self._call("oracle", self.subject.contract.oracle, copies, scalars)

    def mask_policy(self, inputs: Mapping[str, Any], ref: Any) -> Any:
        """The oracle's output with the declared fully-masked-row policy applied."""
        contract = self.subject.contract
        name = contract.mask_name
        if name is None or name not in inputs:
            return ref
        decl = contract.inputs[name]
        mask = inputs[name]
        keep = mask.bool() if decl.kind == "bool" else (mask == 0)
        dead = ~keep.any(dim=-1)
        lead = dead.dim()
        if tuple(ref.shape[:lead]) != tuple(dead.shape) or not dead.any():
            return ref
        ref = ref.clone()
        ref[dead.to(ref.device)] = 0.0 if decl.fully_masked == "zeros" else float("nan")
        return ref

    # -- the tolerance ----------------------------------------------------
    def bound(self, dims: Mapping[str, int], dtypes: Mapping[str, str], out: Any, ref: Any, scale: Any = None, *,
              reduction: int | None = None, accumulate: Any = None):
        """The :class:`~triton_conformance.oracles.tolerance.Bound` for ``out`` against ``ref``.

        ``scale``: the elementwise magnitude errors scale with (the subject's
        ``error_scale``), default the largest finite ``|ref|``.  ``reduction`` /
        ``accumulate``: the terms summed into each element and the dtype they are
        summed in, where they are not the contract's (a gradient's own).
        """
        contract = self.subject.contract
        out_dtype = str(out.dtype).replace("torch.", "")
        if reduction is None:
            reduction = dims.get(contract.reduces, 1) if contract.reduces else 1
        if scale is None:
            finite = ref[torch.isfinite(ref)]
            scale = float(finite.abs().max()) if finite.numel() else 1.0
        # tl.dot rounds fp32 inputs to tf32 on CUDA when the contract says it does; the interpreter has no tf32.
        tf32 = (contract.dot_precision == "tf32" and out.device.type == "cuda" and "float32" in dtypes.values())
        fp8_fast = (contract.dot_precision == "fp8-fast-accumulate" and out.device.type == "cuda"
                    and any(d in FP8_DTYPES for d in dtypes.values()))
        # The accumulation dtype: the declared one, or the example's input dtype (accumulate="input" or a mapping).
        if accumulate is None:
            accumulate = contract.accumulation(dtypes)
        bound = default_bound(out_dtype=out_dtype, accumulate=accumulate, reduction=reduction, scale=scale,
                              tf32=tf32, fp8_fast_accumulation=fp8_fast)
        tol = contract.tolerance
        if tol is None:
            return bound
        if tol.reference_k is not None:
            return Bound(rtol=bound.rtol, atol=bound.atol, reference_k=tol.reference_k, floor=tol.floor,
                         source="subject" + (", tf32 dot" if tf32 else ""), per_term=bound.per_term)
        return Bound(rtol=bound.rtol if tol.rtol is None else tol.rtol,
                     atol=bound.atol if tol.atol is None else tol.atol, source="subject")

    # -- the comparison ---------------------------------------------------
    def compare(self, inputs: Mapping[str, Any], dims: Mapping[str, int], dtypes: Mapping[str, str],
                scalars: Mapping[str, Any], outputs: tuple, *, where: str = "") -> Finding | None:
        """A Finding if ``outputs`` (the launcher's, for ``inputs``) break the contract, else None.

        An output that fails the plain bound is judged again against the magnitude of the terms
        behind each element (:meth:`output_magnitudes`), traced only then.
        ``where`` qualifies output names in messages (``"last 3 rows of "``).
        """
        contract = self.subject.contract
        refs = self.oracle(inputs, scalars)
        if len(refs) != len(outputs):
            return Finding("wrong", "bad-output", f"launcher returned {len(outputs)} outputs, oracle {len(refs)}")
        scales = (None,) * len(refs)
        if contract.error_scale is not None:
            scales = self._call("error_scale", contract.error_scale, self.as_float64(inputs), scalars)
            if len(scales) != len(refs):  # a mistake in the declaration, said as one
                raise OracleError("error_scale", ValueError(
                    f"it returned {len(scales)} scale(s) for the oracle's {len(refs)} output(s), expected one each"))
        rule = rule_for(self.subject)
        lowps: list = []  # the oracle in the inputs' own dtype, evaluated once if a rule asks for it

        def lowp(i: int) -> Any:
            if not lowps:
                lowps.append(self.oracle(inputs, scalars, in_input_dtype=True))
            return self.mask_policy(inputs, lowps[0][i].to(torch.float64))

        magnitudes = self.output_magnitudes(inputs, scalars)  # traced only for an output failing the bound

        for i, (out, ref) in enumerate(zip(outputs, refs)):
            if not isinstance(out, torch.Tensor):
                return Finding("wrong", "bad-output", f"output {i} is {type(out).__name__}, expected a tensor")
            ref = self.mask_policy(inputs, ref.to(torch.float64))
            scale = scales[i].abs().to(torch.float64) if isinstance(scales[i], torch.Tensor) else scales[i]
            name = where + (f"output[{i}]" if len(outputs) > 1 else "output")
            found = rule.check(OutputCheck(out=out, ref=ref, bound=self.bound(dims, dtypes, out, ref, scale), name=name,
                                           inputs=inputs, scalars=scalars, judge=self, lowp=lambda i=i: lowp(i),
                                           magnitude=functools.partial(magnitudes, i)))
            if found is not None:
                return found
        return None

    # -- gradients --------------------------------------------------------
    def oracle_gradients(self, inputs: Mapping[str, Any], grad_output: Any, scalars: Mapping[str, Any]) -> tuple:
        """Float64 autograd of the oracle on copies of ``inputs``: the declared gradients of the output
        backpropagating ``grad_output`` (zeros for an input the oracle's output does not depend on)."""
        names = self.subject.contract.backward.grads
        copies = self.as_float64(inputs)
        for n in names:
            copies[n].requires_grad_(True)
        try:
            with torch.enable_grad():
                ref = as_tuple(self.subject.contract.oracle(**copies, **self.launched_scalars(scalars)))[0]
                grads = torch.autograd.grad(ref, [copies[n] for n in names], grad_outputs=grad_output,
                                            allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - an error in the user's own reference is theirs
            raise_if_out_of_memory(exc, "in the oracle's float64 autograd")
            raise OracleError("oracle's float64 autograd", exc) from None
        return tuple(torch.zeros_like(copies[n]) if g is None else g for n, g in zip(names, grads))

    def compare_gradients(self, inputs: Mapping[str, Any], grad_output: Any, dims: Mapping[str, int],
                          dtypes: Mapping[str, str], scalars: Mapping[str, Any], grads: tuple) -> Finding | None:
        """A Finding if the backward's ``grads`` (for ``inputs`` and the float64 ``grad_output``) break the
        contract, else None.  Each gradient is bounded as an output is, with the terms its own reduction
        sums (``Contract.grad_reduction``: dW sums over the rows) in its own accumulation dtype."""
        contract = self.subject.contract
        backward = contract.backward
        refs = self.oracle_gradients(inputs, grad_output, scalars)
        scales: dict[str, Any] = {}
        if backward.error_scale is not None:
            try:
                with torch.no_grad():
                    scales = dict(backward.error_scale(**self.as_float64(inputs), grad_output=grad_output,
                                                       **self.launched_scalars(scalars)))
            except Exception as exc:  # noqa: BLE001 - an error in the user's own declaration is theirs
                raise OracleError("backward error_scale", exc) from None
        magnitudes = self.gradient_magnitudes(inputs, scalars, grad_output)  # only for a gradient failing its bound
        for index, (name, grad, ref) in enumerate(zip(backward.grads, grads, refs)):
            if grad is None:
                return Finding("wrong", "missing-gradient", f"no gradient for {name!r} (the backward returned None "
                               "for an input the contract says gets one)", {"gradient": name})
            scale = scales.get(name)
            if isinstance(scale, torch.Tensor):
                scale = scale.abs().to(torch.float64)
            reduction = contract.grad_reduction(name, dims)
            bound = self.bound(dims, dtypes, grad, ref, scale, reduction=reduction,
                               accumulate=contract.grad_accumulation(name, dtypes))
            found = rule_for(self.subject).check(OutputCheck(out=grad.detach(), ref=ref.detach(), bound=bound,
                                                             name=f"grad {name}", inputs=inputs, scalars=scalars,
                                                             judge=self,
                                                             magnitude=functools.partial(magnitudes, index)))
            if found is not None:
                return replace(found, message=f"{found.message} (reduction {reduction} terms)",
                               details={**found.details, "gradient": name, "reduction": reduction})
        return None

    def output_magnitudes(self, inputs: Mapping[str, Any], scalars: Mapping[str, Any]):
        """A function of an output's index giving the magnitude of the terms behind each of its elements
        (:func:`~triton_conformance.oracles.magnitude.output_magnitudes`; traced once, on the first call:
        only an output that fails the plain bound needs it), or None where they cannot be traced."""
        return _traced_once(lambda: magnitude.output_magnitudes(
            self.subject.contract.oracle, self.as_float64(inputs), self.launched_scalars(scalars)))

    def gradient_magnitudes(self, inputs: Mapping[str, Any], scalars: Mapping[str, Any], grad_output: Any):
        """As :meth:`output_magnitudes`, for the gradients the backward declares (in ``Backward.grads``
        order), backpropagating ``grad_output``: pass ``functools.partial(it, i)`` to ``compare``."""
        return _traced_once(lambda: magnitude.gradient_magnitudes(
            self.subject.contract.oracle, self.as_float64(inputs), self.launched_scalars(scalars),
            self.subject.contract.backward.grads, grad_output.detach().to(torch.float64)))


def _traced_once(trace: Any):
    """``i -> trace()[i]``, calling ``trace`` at most once (:class:`magnitude.Unavailable` where it gave one,
    or too few)."""
    done: list = []

    def of(i: int):
        if not done:
            done.append(trace())
        mags = done[0]
        if isinstance(mags, magnitude.Unavailable):
            return mags
        if i >= len(mags):
            return magnitude.Unavailable(f"the oracle gave {len(mags)} output(s) under magnitude tracking")
        if mags[i] is None:
            return magnitude.Unavailable("the traced gradient is None")
        return mags[i]

    return of
