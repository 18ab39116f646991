"""Oracles: float64 references and the tolerance policy that judges against them."""

from triton_conformance.oracles.tolerance import ROUNDING_FACTOR, SAFETY_FACTOR, UNIT_ROUNDOFF, Bound, default_bound

__all__ = ["ROUNDING_FACTOR", "SAFETY_FACTOR", "UNIT_ROUNDOFF", "Bound", "compare", "default_bound"]


def __getattr__(name: str):
    # compare needs torch; import it only when asked for.
    if name == "compare":
        from triton_conformance.oracles.comparison import compare

        return compare
    raise AttributeError(name)
