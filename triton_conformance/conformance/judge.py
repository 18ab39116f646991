"""The one judging step every cell kind uses: the oracle, the tolerance, the mask policy and the model.

Given a launcher's inputs and outputs, :meth:`Judge.compare` evaluates the
subject's float64 oracle on the same inputs, applies the declared
fully-masked-row policy, derives the bound (the subject's ``Tolerance``, its
``error_scale``, the reduction length, the accumulation dtype, tf32 or fp8 for a
``tl.dot`` on CUDA) and compares; a stochastic subject's output is checked against
its model instead.  Every cell kind judges through here: a contract means the same everywhere.

Raised exceptions are judged by :mod:`.rejections` (:func:`clean_rejection`), and a
subject's own oracle that raises is an :class:`OracleError`: a mistake in
the declaration, never a verdict about the kernel.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import torch

from triton_conformance.conformance.rejections import OracleError, as_tuple, clean_rejection, exception_text, rejection
from triton_conformance.conformance.rules import OutputCheck, rule_for
from triton_conformance.conformance.discards import raise_if_out_of_memory
from triton_conformance.conformance.lazy import at_unit, nth, once, traced_once, unit_of
from triton_conformance.model.contract import Contract
from triton_conformance.model.inputs import FP8_DTYPES
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.subject import Subject
from triton_conformance.oracles import magnitude, rounded_steps
from triton_conformance.oracles.precision import Errors
from triton_conformance.oracles.quantization import dequantized
from triton_conformance.oracles.rounding import widened
from triton_conformance.oracles.tolerance import Bound, default_bound

__all__ = ["Judge", "OracleError", "WorstErrors", "as_tuple", "claim_site", "claimed", "clean_rejection",
           "exception_text", "grad_outputs_by_position", "rejection"]


def _as_float32(value: float) -> float:
    """``value`` rounded to the nearest fp32 (inf past fp32's range, as the kernel would hold it)."""
    return float(torch.tensor(value, dtype=torch.float32))


class WorstErrors:
    """The worst error of the outputs a judge has judged, pass or fail: in ulps of the output's dtype and as
    the share of the bound used (a cell's judge is its own, so this is the cell's; :meth:`details`)."""

    def __init__(self) -> None:
        self.ulps: float | None = None
        self.used: float | None = None

    def observe(self, errors: Errors) -> None:
        self.ulps = errors.ulps if self.ulps is None else max(self.ulps, errors.ulps)
        self.used = errors.used if self.used is None else max(self.used, errors.used)

    def details(self) -> dict[str, float | str]:
        """``{"error_ulps": ..., "allowance_used": ...}``, or nothing where no output was judged."""
        if self.ulps is None:
            return {}
        return {"error_ulps": _json_float(self.ulps), "allowance_used": _json_float(self.used)}


def _json_float(x: float) -> float | str:
    return round(x, 4) if x == x and abs(x) != float("inf") else "inf"


def claim_site(subject: Any, on_cuda: bool) -> tuple[str, str]:
    """Where ``subject``'s per-device claims are read on this back end: (device, interpreter path) for
    :meth:`Contract.on_device`.  The interpreter's are ``"interpreter"``'s, else those of the path the launcher
    takes there: ``"cuda"``'s under ``pretend_cuda``, ``"cpu"``'s otherwise."""
    path = "cuda" if getattr(subject, "pretend_cuda", False) else "cpu"  # tests judge bare stand-ins
    return ("cuda" if on_cuda else "interpreter"), path


def claimed(subject: Subject, on_cuda: bool) -> tuple[Subject, str | None]:
    """``subject`` with its contract as it claims on this back end (every per-device claim resolved, dtypes
    included, so the cell's draws, its expectation and its judge read one contract), and the device whose
    claims applied (None: none differs by device)."""
    device, path = claim_site(subject, on_cuda)
    source = subject.contract.claims_source(device, path)
    if source is None:
        return subject, None
    return replace(subject, contract=subject.contract.on_device(device, interpreter_path=path)), source


def largest_finite_magnitude(ref: Any) -> float:
    """The largest ``|x|`` over ``ref``'s finite elements, 1.0 if it has none: one masked reduction, where
    selecting the finite elements first (boolean indexing) cost about 0.2 ms an example on the CPU."""
    if ref.numel() == 0:
        return 1.0
    top = float(ref.abs().max())  # finite: every element is (NaN and inf would make it NaN or inf)
    if math.isfinite(top):
        return top
    top = float(torch.where(torch.isfinite(ref), ref.abs(), -1.0).max())
    return top if top >= 0 else 1.0


@dataclass(frozen=True)
class Judge:
    """Judges one subject's outputs on one back end.

    ``options``: what the cell kinds ask of the subject's judging rule (a stochastic subject's
    ``example_alpha``, the level of its per-example rate test).  ``worst``: the worst error judged so far.
    """

    subject: Subject
    on_cuda: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    worst: WorstErrors = field(default_factory=WorstErrors, compare=False, repr=False)

    @functools.cached_property
    def claims(self) -> Contract:
        """The subject's contract as it claims on this back end (:func:`claim_site`)."""
        device, path = claim_site(self.subject, self.on_cuda)
        return self.subject.contract.on_device(device, interpreter_path=path)

    # -- the oracle -------------------------------------------------------
    def launched_scalars(self, scalars: Mapping[str, Any]) -> dict[str, Any]:
        """``scalars`` as the kernel received them: a float scalar rounded to fp32, the type Triton gives
        a Python float argument (a kernel forming ``1 - beta2`` from it is exact).  The magnitude pass
        gets them so too, each carrying its own rounding to fp32, so a kernel whose host formed
        ``1 - beta2`` in float64 is inside the bound as well (:mod:`~..oracles.magnitude`).  Int and
        bool scalars, and names the contract does not declare, as they are."""
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
        copies = {n: (widened(v) if v.dtype.is_floating_point else v.clone()) for n, v in inputs.items()}
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
        contract = self.claims
        out_dtype = str(out.dtype).replace("torch.", "")
        if reduction is None:
            reduction = dims.get(contract.reduces, 1) if contract.reduces else 1
        if scale is None:
            scale = largest_finite_magnitude(ref)
        # tl.dot rounds fp32 inputs to tf32 on CUDA when the contract says it does; the interpreter has no tf32.
        tf32 = (contract.dot_precision == "tf32" and out.device.type == "cuda" and "float32" in dtypes.values())
        # Hopper's tensor cores sum fp8 products in ~14 bits inside each MMA, whatever the promotion between
        # them (docs/tolerance.md, fp8): every reduction over fp8 inputs on CUDA, or a contract that says so.
        fp8_fast = (out.device.type == "cuda" and any(d in FP8_DTYPES for d in dtypes.values())
                    and (contract.dot_precision == "fp8-fast-accumulate" or reduction > 1))
        # The accumulation dtype: the declared one, or the example's input dtype (accumulate="input" or a mapping).
        accumulate = contract.accumulation(dtypes) if accumulate is None else accumulate
        bound = default_bound(out_dtype=out_dtype, accumulate=accumulate, reduction=reduction, scale=scale,
                              tf32=tf32, fp8_fast_accumulation=fp8_fast)
        if (tol := contract.tolerance) is None:
            return bound
        if tol.reference_k is not None:
            return Bound(rtol=bound.rtol, atol=bound.atol, reference_k=tol.reference_k, floor=tol.floor,
                         source="subject" + (", tf32 dot" if tf32 else ""), per_term=bound.per_term,
                         accumulate=bound.accumulate)
        return Bound(rtol=bound.rtol if tol.rtol is None else tol.rtol,
                     atol=bound.atol if tol.atol is None else tol.atol, source="subject")

    def input_dtype(self, dtypes: Mapping[str, str]) -> str:
        """The example's input dtype (its least precise float input): the precision verdict's fallback."""
        return self.subject.contract.accumulation(dtypes, "input")

    # -- the comparison ---------------------------------------------------
    def compare(self, inputs: Mapping[str, Any], dims: Mapping[str, int], dtypes: Mapping[str, str],
                scalars: Mapping[str, Any], outputs: tuple, *, where: str = "") -> Finding | None:
        """A Finding if ``outputs`` (the launcher's, for ``inputs``) break the contract, else None.

        An output that fails the plain bound is judged again against the magnitude of the terms
        behind each element (:meth:`output_magnitudes`), traced only then.
        ``where`` qualifies output names in messages (``"last 3 rows of "``).
        """
        contract = self.subject.contract
        scalars = {**scalars, **contract.keyword_values(dims)}  # the dims a relation hands over by keyword
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
        # The oracle in the inputs' own dtype, evaluated once if a rule asks for it (Tolerance(reference_k)).
        lowps = once(lambda: self.oracle(inputs, scalars, in_input_dtype=True))

        magnitudes = self.output_magnitudes(inputs, scalars)  # traced only for an output failing the bound
        rounded = once(lambda: rounded_steps.rounded_outputs(self.subject.contract.oracle, self.as_float64(inputs),
                                                              self.launched_scalars(scalars), _dtype(self, dtypes)))

        for i, (out, ref) in enumerate(zip(outputs, refs)):
            if not isinstance(out, torch.Tensor):
                return Finding("wrong", "bad-output", f"output {i} is {type(out).__name__}, expected a tensor")
            ref = self.mask_policy(inputs, ref.to(torch.float64))
            scale = scales[i].abs().to(torch.float64) if isinstance(scales[i], torch.Tensor) else scales[i]
            name = where + (f"output[{i}]" if len(outputs) > 1 else "output")
            bound = self.bound(dims, dtypes, out, ref, scale)
            found = rule.check(OutputCheck(out=out, ref=ref, bound=bound, name=name,
                                           inputs=inputs, scalars=scalars, judge=self,
                                           lowp=lambda i=i: self.mask_policy(inputs, lowps()[i].to(torch.float64)),
                                           magnitude=at_unit(magnitudes, i, unit_of(bound)),
                                           input_bound=lambda out=out, ref=ref, scale=scale: self.bound(
                                               dims, dtypes, out, ref, scale, accumulate=self.input_dtype(dtypes)),
                                           rounded=lambda i=i: nth(rounded(), i, lambda r: self.mask_policy(inputs, r))))
            if found is not None:
                return found
        return None

    # -- gradients --------------------------------------------------------
    def _oracle_autograd(self, inputs: Mapping[str, Any], scalars: Mapping[str, Any], backprop: Any,
                         in_input_dtype: bool = False) -> Any:
        """``backprop(outputs, leaves)`` on the oracle's outputs for float64 copies of ``inputs`` (or in their own
        dtype), the declared gradients' copies the leaves; the user's reference raising is an OracleError."""
        names = self.subject.contract.backward.grads
        copies = {n: v.detach().clone() for n, v in inputs.items()} if in_input_dtype else self.as_float64(inputs)
        for n in names:
            copies[n].requires_grad_(True)
        try:
            with torch.enable_grad():
                refs = as_tuple(self.subject.contract.oracle(**copies, **self.launched_scalars(scalars)))
                return backprop(refs, [copies[n] for n in names])
        except Exception as exc:  # noqa: BLE001 - an error in the user's own reference is theirs
            raise_if_out_of_memory(exc, "in the oracle's float64 autograd")
            raise OracleError("oracle's float64 autograd", exc) from None

    def oracle_gradients(self, inputs: Mapping[str, Any], grad_output: Any, scalars: Mapping[str, Any],
                         in_input_dtype: bool = False) -> tuple:
        """Float64 autograd of the oracle on copies of ``inputs`` (``in_input_dtype``: in their dtype, the
        FlashAttention rule's reference): the declared gradients of sum_i <output_i, grad_output_i> (``grad_output``:
        {output position: its grad_output}, or output 0's alone), zeros for an input the outputs do not reach."""
        gos = grad_outputs_by_position(grad_output)

        def backprop(refs: tuple, leaves: list) -> tuple:
            # An output the inputs do not reach adds nothing (unless none does: autograd then says so).
            pairs = [(refs[p], g.to(refs[p].dtype)) for p, g in gos.items()]
            pairs = [(r, g) for r, g in pairs if r.requires_grad] or pairs
            grads = torch.autograd.grad([r for r, _ in pairs], leaves, grad_outputs=[g for _, g in pairs],
                                        allow_unused=True)
            return tuple(torch.zeros_like(leaf) if g is None else g for leaf, g in zip(leaves, grads))

        return self._oracle_autograd(inputs, scalars, backprop, in_input_dtype)

    def compare_gradients(self, inputs: Mapping[str, Any], grad_output: Any, dims: Mapping[str, int],
                          dtypes: Mapping[str, str], scalars: Mapping[str, Any], grads: tuple) -> Finding | None:
        """A Finding if the backward's ``grads`` (for ``inputs`` and the float64 ``grad_output``: {output
        position: its grad_output}, or output 0's alone) break the contract, else None.  Each gradient is
        bounded as an output is, with the terms its own reduction sums (``Contract.grad_reduction``: dW sums
        over the rows) in its own accumulation dtype."""
        gos = grad_outputs_by_position(grad_output)
        if max(gos) > 0 and max(gos) >= (count := len(self.oracle(inputs, scalars))):
            if self.subject.contract.backward.outputs is not None:  # the declaration disagrees with its oracle
                raise OracleError("oracle", ValueError(f"it returned {count} output(s), but Backward(outputs=...) "
                                                       f"declares a gradient for output {max(gos)}"))
            return Finding("wrong", "bad-output", f"the launcher returned output[{max(gos)}] with a gradient, the "
                           f"oracle {count} output(s)")
        # The declared error_scale gets one grad_output as it always has, or all of them by position.
        grad_output = gos[0] if list(gos) == [0] else gos
        contract = self.subject.contract
        backward = contract.backward
        scalars = {**scalars, **contract.keyword_values(dims)}  # the dims a relation hands over by keyword
        refs = self.oracle_gradients(inputs, grad_output, scalars)
        scales: dict[str, Any] = {}
        if backward.error_scale is not None:
            try:
                with torch.no_grad():
                    scales = dict(backward.error_scale(**self.as_float64(inputs), grad_output=grad_output,
                                                       **self.launched_scalars(scalars)))
            except Exception as exc:  # noqa: BLE001 - an error in the user's own declaration is theirs
                raise OracleError("backward error_scale", exc) from None
        magnitudes = self.gradient_magnitudes(inputs, scalars, gos)  # only for a gradient failing its bound
        contributions = traced_once(lambda unit: self._gradient_shares(inputs, gos, scalars))  # only where one fails
        rounded = once(lambda: rounded_steps.rounded_gradients(
            contract.oracle, self.as_float64(inputs), self.launched_scalars(scalars), backward.grads,
            {p: g.detach().to(torch.float64) for p, g in gos.items()}, _dtype(self, dtypes)))
        # The gradients in the inputs' own dtype, once, if the rule asks (Tolerance(reference_k)).
        lowps = once(lambda: self.oracle_gradients(inputs, grad_output, scalars, in_input_dtype=True))
        for index, (name, grad, ref) in enumerate(zip(backward.grads, grads, refs)):
            if grad is None:
                return Finding("wrong", "missing-gradient", f"no gradient for {name!r} (the backward returned None "
                               "for an input the contract says gets one)", {"gradient": name})
            scale = scales.get(name)
            if isinstance(scale, torch.Tensor):
                scale = scale.abs().to(torch.float64)
            reduction = contract.grad_reduction(name, dims)
            bound = self.bound(dims, dtypes, grad, ref, scale, reduction=reduction,
                               accumulate=self.claims.grad_accumulation(name, dtypes))
            at_input = functools.partial(self.bound, dims, dtypes, grad, ref, scale, reduction=reduction,
                                         accumulate=self.input_dtype(dtypes))

            def check(bound: Bound, grad: Any = grad, ref: Any = ref, index: int = index, name: str = name,
                      at_input: Any = at_input):
                return rule_for(self.subject).check(OutputCheck(
                    out=grad.detach(), ref=ref.detach(), bound=bound, name=f"grad {name}", inputs=inputs,
                    scalars=scalars, judge=self, magnitude=at_unit(magnitudes, index, unit_of(bound)),
                    input_bound=at_input, lowp=lambda i=index: lowps()[i].to(torch.float64),
                    rounded=lambda: nth(rounded(), index)))

            found = check(bound)
            if found is not None and len(gos) > 1 and bound.source.startswith("dtype"):  # a Tolerance stands
                shares = contributions(index)
                if not isinstance(shares, magnitude.Unavailable):
                    found = check(bound.with_rounded_shares(str(grad.dtype).replace("torch.", ""), shares))
            if found is not None:
                return replace(found, message=f"{found.message} (reduction {reduction} terms)",
                               details={**found.details, "gradient": name, "reduction": reduction})
        return None

    def _gradient_shares(self, inputs: Mapping[str, Any], gos: Mapping[int, Any], scalars: Mapping[str, Any]):
        """For each declared gradient, sum_i |its part backpropagated from output i alone| (float64 autograd
        of the oracle, one pass per output; an output the inputs do not reach has no part)."""
        def backprop(refs: tuple, leaves: list) -> tuple:
            shares = [torch.zeros_like(leaf) for leaf in leaves]
            for p, go in gos.items():
                if refs[p].requires_grad:
                    parts = torch.autograd.grad(refs[p], leaves, grad_outputs=go, allow_unused=True,
                                                retain_graph=True)
                    shares = [s if g is None else s + g.detach().abs() for s, g in zip(shares, parts)]
            return tuple(shares)

        return self._oracle_autograd(inputs, scalars, backprop)

    def output_magnitudes(self, inputs: Mapping[str, Any], scalars: Mapping[str, Any]):
        """A function of an output's index giving the magnitude of the terms behind each of its elements
        (:func:`~triton_conformance.oracles.magnitude.output_magnitudes`; traced once, on the first call:
        only an output that fails the plain bound needs it), or None where they cannot be traced."""
        return traced_once(lambda unit: magnitude.output_magnitudes(
            self.subject.contract.oracle, self.as_float64(inputs), self.launched_scalars(scalars), unit))

    def gradient_magnitudes(self, inputs: Mapping[str, Any], scalars: Mapping[str, Any], grad_output: Any):
        """As :meth:`output_magnitudes`, for the gradients the backward declares (in ``Backward.grads``
        order), backpropagating ``grad_output`` ({output position: its grad_output}, or output 0's alone):
        pass ``functools.partial(it, i)`` to ``compare``."""
        gos = {p: g.detach().to(torch.float64) for p, g in grad_outputs_by_position(grad_output).items()}
        return traced_once(lambda unit: magnitude.gradient_magnitudes(
            self.subject.contract.oracle, self.as_float64(inputs), self.launched_scalars(scalars),
            self.subject.contract.backward.grads, gos, unit))


def grad_outputs_by_position(grad_output: Any) -> dict[int, Any]:
    """``grad_output`` as {output position: its grad_output}: a mapping as it is, one tensor as output 0's."""
    return dict(grad_output) if isinstance(grad_output, Mapping) else {0: grad_output}


def _dtype(judge: Judge, dtypes: Mapping[str, str]) -> torch.dtype:
    """The example's input dtype, as the oracle's steps are rounded to it."""
    dtype = getattr(torch, str(judge.input_dtype(dtypes)), None)
    return dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else torch.float32
