"""The gradient cells (``grad``): a subject that declares a backward has its gradients judged.

Only a contract with ``backward=`` gets them (every other subject's matrix,
and the main job's cost, are unchanged).  Each cell searches examples with
:mod:`..gradients`: the forward inputs drawn as the searched cells draw them,
grad_output drawn with a layout class of its own, every declared gradient
compared with float64 autograd of the oracle:

- ``grad:layout:<class>``: grad_output contiguous, transposed, sliced, padded,
  offset, or stride-0 broadcast (``.sum().backward()``, ``expand()``);
- ``grad:dtype:<d>``: the inputs in each claimed float dtype;
- ``grad:memory``: inputs in any claimed layout, grad_output in any class, and
  every memory check twice, in both sentinels and poisons;
- ``grad:determinism``: two backward passes agree bit for bit, where claimed.
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.kinds.base import CellContext, CellKind
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.contract import FLOAT_DTYPES, Contract
from triton_conformance.model.outcomes import CellResult

__all__ = ["GradientCells"]

_LAYOUTS = (
    ("contiguous", "grad_output row-major"),
    ("transposed", "grad_output a .t() / .permute() view"),
    ("sliced", "grad_output stepped through with gaps (g[:, ::2])"),
    ("padded", "grad_output rows padded with extra elements"),
    ("offset", "grad_output at a storage offset of 1 to 64 elements"),
    ("broadcast", "grad_output with stride-0 dims, as .sum().backward() or expand() give"),
)
_DTYPES = ("float16", "bfloat16", "float32", "float64")


class GradientCells(CellKind):
    """The backward's cells, a dimension of their own; only for contracts that declare a backward."""

    steers = True
    kernels = "backward"
    dimension = Dimension("grad", "the declared backward's gradients, against float64 autograd of the oracle", (
        *(CellClass(f"layout:{k}", s) for k, s in _LAYOUTS),
        *(CellClass(f"dtype:{d}", f"inputs (and so grad_output) in {d}") for d in _DTYPES),
        CellClass("memory", "inputs in any claimed layout, grad_output in any; saved tensors and grad_output "
                            "unchanged, gradients fully written and inside their guard bands, no reads outside"),
        CellClass("determinism", "two backward passes on identical inputs agree bit for bit"),
    ))

    def values(self, contract: Contract) -> tuple[str, ...]:
        if contract.backward is None:
            return ()
        rank = len(contract.backward.output)
        layouts = [f"layout:{k}" for k, _ in _LAYOUTS if rank >= 2 or k not in ("transposed", "padded")]
        dtypes = [f"dtype:{d}" for d in contract.float_dtypes() if d in _DTYPES]
        determinism = ["determinism"] if contract.backward.deterministic else []
        return tuple(layouts + dtypes + ["memory"] + determinism)

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        if contract.backward is None:
            return "the subject declares no backward"
        if value == "determinism" and not contract.backward.deterministic:
            return "the backward is declared nondeterministic (Backward(deterministic=False): atomics in dW)"
        if value.startswith("layout:") and value[7:] in ("transposed", "padded") and len(contract.backward.output) < 2:
            return f"grad_output layout {value[7:]!r} needs an output of rank >= 2"
        if value.startswith("dtype:"):
            dtype = value[6:]
            if dtype not in contract.float_dtypes():
                return f"no input claims {dtype}"
            return backend.untestable.get(dtype)
        return None

    def run(self, context: CellContext, value: str) -> CellResult:
        from triton_conformance.conformance.search.gradient_engine import search_gradients

        testable = tuple(d for d in FLOAT_DTYPES if d not in context.backend.untestable)
        return search_gradients(context, dtypes=testable)
