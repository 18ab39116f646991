"""Judging rules: how one output is judged against its float64 reference, once the bound is known.

:class:`~.judge.Judge` evaluates the oracle, applies the mask policy and
derives the bound for every output; then the **rule** of the subject says
whether the output breaks the contract.  Rules are registered in order, and
the last registered one that applies to a subject is used, so a rule added
later (a library's own, or a kind's) is more specific than the ones before it:

- :class:`ToleranceRule` (built in, applies to every subject): the bound,
  with the FlashAttention rule's reference in the input dtype where the
  subject's ``Tolerance(reference_k=...)`` asks for it;
- the stochastic kind registers its model check for subjects with a model.

A new judging rule is one module: subclass :class:`JudgingRule`, say which
subjects it :meth:`~JudgingRule.applies` to, and :func:`register_rule` it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triton_conformance.errors import InvalidArgument
from triton_conformance.model.outcomes import Finding
from triton_conformance.oracles.comparison import compare

__all__ = ["OutputCheck", "JudgingRule", "ToleranceRule", "register_rule", "unregister_rule", "rule_for"]


@dataclass
class OutputCheck:
    """One output to judge, with everything a rule may need about it.

    - ``out`` / ``ref``: the kernel's output and the float64 reference (mask policy applied);
    - ``bound``: the resolved :class:`~..oracles.tolerance.Bound`;
    - ``name``: how messages name it (``"output"``, ``"output[1]"``, ``"grad x"``);
    - ``inputs``, ``scalars``: what the launcher got; ``judge``: the :class:`~.judge.Judge` (its subject,
      its oracle); ``lowp``: the reference computed in the inputs' own dtype (lazily, once per example);
      ``magnitude``: the magnitude of the terms behind each element of ``ref`` (lazily traced, or None
      where it cannot be: :mod:`~..oracles.magnitude`), which widens the bound where they cancel;
      ``input_bound``: the bound with intermediates in the input dtype (lazily), for the precision verdict
      of an output that fails (:mod:`~..oracles.precision`); ``rounded``: the oracle's output with every step
      rounded to the input dtype (lazily, :mod:`~..oracles.rounded_steps`), for the verdict on NaN/inf positions.
    """

    out: Any
    ref: Any
    bound: Any
    name: str
    inputs: Any
    scalars: Any
    judge: Any
    lowp: Callable[[], Any] = field(default=lambda: None)
    magnitude: Callable[[], Any] | None = None
    input_bound: Callable[[], Any] | None = None
    rounded: Callable[[], Any] | None = None


class JudgingRule:
    """How a subject's outputs are judged.  Subclass it and override :meth:`applies` and :meth:`check`."""

    name: str = "rule"

    def applies(self, subject: Any) -> bool:
        return True

    def check(self, output: OutputCheck) -> Finding | None:
        """A Finding if ``output`` breaks the contract, else None."""
        raise NotImplementedError(f"{type(self).__name__}.check")


class ToleranceRule(JudgingRule):
    """Every element within the bound of the float64 reference (widened where the terms behind it cancel);
    NaN and inf where the reference has them."""

    name = "tolerance"

    def check(self, output: OutputCheck) -> Finding | None:
        lowp = output.lowp() if output.bound.reference_k is not None else None
        worst = getattr(output.judge, "worst", None)  # the cell's worst error so far, pass or fail
        mismatch = compare(output.out, output.ref, output.bound, lowp=lowp, name=output.name,
                           magnitude=output.magnitude, input_bound=output.input_bound,
                           observe=None if worst is None else worst.observe, rounded=output.rounded)
        if mismatch is None:
            return None
        return Finding("wrong", mismatch.kind, mismatch.message, mismatch.to_dict())


_RULES: list[JudgingRule] = [ToleranceRule()]


def register_rule(rule: Any) -> Any:
    """Add ``rule`` (a JudgingRule, or a JudgingRule class: a decorator) after every rule so far; returns it."""
    if isinstance(rule, type):
        register_rule(rule())
        return rule
    if not isinstance(rule, JudgingRule):
        raise InvalidArgument(f"register_rule: rule={rule!r}, expected a JudgingRule")
    _RULES.append(rule)
    return rule


def unregister_rule(rule: Any) -> None:
    """Remove ``rule`` (an instance, or every instance of a class); the built-in tolerance rule stays."""
    _RULES[:] = [r for r in _RULES if isinstance(r, ToleranceRule) and type(r) is ToleranceRule
                 or (r is not rule and type(r) is not rule)]


def rule_for(subject: Any) -> JudgingRule:
    """The rule ``subject``'s outputs are judged by: the last registered one that applies."""
    return next(r for r in reversed(_RULES) if r.applies(subject))
