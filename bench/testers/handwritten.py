"""Testers 1-3: what people write by hand (KernelBench-style trials, a tutorial grid, gpucheck).

Each tester turns a subject into a list of :class:`~bench.testers.common.Case`
and runs them in order, stopping at the first failure.  They all draw
contiguous ``randn`` inputs; they differ in shapes, dtypes and tolerance:

- ``fixed``: KernelBench's correctness check, 5 trials of fresh random inputs
  at one moderate shape (each dim ``2**round(14 / ndims)``, clamped into its
  range), float32 where claimed, ``torch.allclose(atol=1e-2, rtol=1e-2)``,
  the reference computed before the kernel runs, as KernelBench does.
- ``grid``: a Triton-tutorial-style ``@pytest.mark.parametrize`` grid: 4 shapes
  (about 2**10, 2**12 and 2**14 elements, all dims powers of two, and one of odd
  sizes ``1.5 * 2**round(12 / ndims) + 1``) x every claimed float dtype,
  ``torch.testing.assert_close`` (its defaults for fp32, ``atol=rtol=1e-2``
  for fp16/bf16 as the tutorials do), the kernel called before the reference
  as in the tutorials.
- ``gpucheck``: gpucheck 0.1.0 used as its README shows: its ``EDGE_SHAPES``
  (those of the subject's rank) and ``fuzz_shapes(ndim, max_size=512, n=16,
  seed)`` x every claimed float dtype, with its dtype-aware ``assert_close``
  (``k_dim`` for dot-product kernels, ``baseline_2x`` for attention, as the
  README advises).

Shapes are tuples over the subject's dims in declaration order, clamped into
each dim's range (a user writes shapes the kernel claims) and de-duplicated.
"""

from __future__ import annotations

import os
import sys

import torch

from bench.testers.common import (
    Case,
    Run,
    clamp_dims,
    float_dtypes,
    oracle_check,
    run_cases,
)
from bench.testers.stochastic import dropout_check, stochastic_skip

__all__ = ["GPUCHECK_SITE_ENV", "FixedShape", "GpuCheck", "TutorialGrid"]

GPUCHECK_SITE_ENV = "GPUCHECK_SITE"  # a --target directory holding gpucheck and rich, put on sys.path


def _shape_dims(contract, sizes) -> dict[str, int]:
    """Map a shape tuple onto the contract's dims (in declaration order), clamped into their ranges."""
    syms = list(contract.dims)
    return clamp_dims(contract, {s: sizes[i] for i, s in enumerate(syms)})


def _unique(dims_list: list[dict[str, int]]) -> list[dict[str, int]]:
    seen, out = set(), []
    for d in dims_list:
        key = tuple(d.items())
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _case_id(dims: dict[str, int], dtype: str) -> str:
    return "x".join(str(n) for n in dims.values()) + f"-{dtype}"


class _HandWritten:
    """Shared driver: cases = shapes x dtypes, a check per case, stop at the first failure."""

    name = ""
    handles_stochastic = True
    reference_first = False  # the tutorials call the kernel, then the reference

    def unavailable(self) -> str | None:
        return None

    def skip_reason(self, subject, untestable: dict[str, str]) -> str | None:
        if subject.contract.model is not None:
            if not self.handles_stochastic:
                return f"{self.name} has no check for stochastic kernels"
            return stochastic_skip(subject.contract)
        if not float_dtypes(subject.contract, untestable):
            return "no float dtype testable here"
        return None

    def shapes(self, contract, seed: int) -> list[dict[str, int]]:
        raise NotImplementedError

    def dtypes(self, contract, untestable: dict[str, str]) -> list[str]:
        return float_dtypes(contract, untestable)

    def close(self, subject, dims: dict[str, int]):
        raise NotImplementedError

    def cases(self, subject, *, seed: int, device: str, untestable: dict[str, str]) -> list[Case]:
        contract = subject.contract
        gen = torch.Generator().manual_seed(seed)
        cases = []
        for dims in self.shapes(contract, seed):
            for dtype in self.dtypes(contract, untestable):
                if contract.model is not None:
                    check = dropout_check(subject, dims, dtype, device, gen, self.close(subject, dims))
                else:
                    check = oracle_check(subject, dims, dtype, device, gen, self.close(subject, dims),
                                         reference_first=self.reference_first)
                cases.append(Case(_case_id(dims, dtype), dims, check))
        return cases

    def run(self, subject, *, seed: int, device: str, untestable: dict[str, str], backend=None,
            randomize: bool = False) -> Run:
        reason = self.skip_reason(subject, untestable)
        if reason is not None:
            return Run(failed=False, skipped=reason)
        return run_cases(self.cases(subject, seed=seed, device=device, untestable=untestable))


def moderate_size(k: int) -> int:
    """The fixed tester's per-dim size for a rank-k problem (about 2**14 elements)."""
    return 2 ** round(14 / k)


class FixedShape(_HandWritten):
    """Tester 1: KernelBench's 5 random trials at one moderate shape, ``allclose(1e-2, 1e-2)``."""

    name = "fixed"
    trials = 5
    reference_first = True  # KernelBench runs the reference model, then the new one

    def shapes(self, contract, seed):
        n = moderate_size(len(contract.dims))
        return [_shape_dims(contract, [n] * len(contract.dims))] * self.trials

    def dtypes(self, contract, untestable):
        claimed = float_dtypes(contract, untestable)
        return ["float32"] if "float32" in claimed else claimed[:1]

    def cases(self, subject, *, seed, device, untestable):
        cases = super().cases(subject, seed=seed, device=device, untestable=untestable)
        for i, case in enumerate(cases):
            case.id = f"trial{i}-{case.id}"
        return cases

    def close(self, subject, dims):
        def close(out, ref):
            if not torch.allclose(out.float(), ref.float(), atol=1e-2, rtol=1e-2):
                diff = (out.float() - ref.float()).abs()
                raise AssertionError(f"allclose failed: max abs diff {diff.nan_to_num(float('inf')).max():.4g}")
        return close


class TutorialGrid(_HandWritten):
    """Tester 2: a parametrize grid of 4 shapes (one not a power of two) x claimed dtypes."""

    name = "grid"

    def shapes(self, contract, seed):
        k = len(contract.dims)
        pow2 = [[2 ** round(e / k)] * k for e in (10, 12, 14)]
        odd = [round(1.5 * 2 ** round(12 / k)) + 1] * k
        return _unique([_shape_dims(contract, s) for s in pow2 + [odd]])

    def close(self, subject, dims):
        def close(out, ref):
            if out.dtype in (torch.float16, torch.bfloat16):
                torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)
            else:
                torch.testing.assert_close(out, ref)
        return close


def import_gpucheck():
    """gpucheck, from the environment or the directory named by $GPUCHECK_SITE; raises ImportError."""
    site = os.environ.get(GPUCHECK_SITE_ENV)
    if site and site not in sys.path:
        sys.path.append(site)
    import gpucheck
    from gpucheck.fuzzing.shapes import fuzz_shapes

    return gpucheck, fuzz_shapes


class GpuCheck(_HandWritten):
    """Tester 3: gpucheck 0.1.0's edge and fuzzed shapes with its dtype-aware ``assert_close``."""

    name = "gpucheck"
    handles_stochastic = False
    fuzz_n = 16
    fuzz_max = 512

    def unavailable(self) -> str | None:
        try:
            gpucheck, _ = import_gpucheck()
        except ImportError as exc:
            return (f"gpucheck is not importable ({exc}); pip install gpucheck==0.1.0 rich, or pip install "
                    f"--target DIR and set ${GPUCHECK_SITE_ENV}=DIR")
        if gpucheck.__version__ != "0.1.0":
            return f"gpucheck {gpucheck.__version__} found, this tester is written against 0.1.0"
        return None

    def shapes(self, contract, seed):
        gpucheck, fuzz_shapes = import_gpucheck()
        k = len(contract.dims)
        edge = [s for s in gpucheck.EDGE_SHAPES if len(s) == k]
        fuzzed = fuzz_shapes(k, max_size=self.fuzz_max, n=self.fuzz_n, seed=seed)
        return _unique([_shape_dims(contract, list(s)) for s in edge + fuzzed])

    def close(self, subject, dims):
        gpucheck, _ = import_gpucheck()
        contract = subject.contract
        kwargs = {}
        if contract.error_scale is not None and contract.reduces:  # a dot product: the README's k_dim
            kwargs["k_dim"] = dims[contract.reduces]
        if contract.tolerance is not None and contract.tolerance.reference_k is not None:
            kwargs["baseline_2x"] = True  # the README's FlashAttention-style tolerance

        def close(out, ref):
            gpucheck.assert_close(out, ref, **kwargs)
        return close

