"""The fused ReLU+dropout kernel against the statistical model, and planted bugs the checks must catch.

Model: each element is ``relu(x) / (1 - p)`` or exactly 0, dropped
independently with probability ``p`` whatever x is. A drop is only visible
where ``relu(x) > 0``, so rates and agreements are counted over positive
inputs. Every statistical check rejects at ``ALPHA`` = 1e-6; this file makes
about a dozen such checks on the correct kernel, so by the union bound
(:func:`bonferroni`) it fails by chance with probability below about 1.2e-5.

Run through the interpreter (``tests/quality/conftest.py`` sets
``TRITON_INTERPRET=1``); ``tl.rand`` costs about 0.5-1 s per 100k elements
there, so the inputs are 40k elements (about 20k positive). With 20k trials a
rate check at p = 0.5 has power 0.99 against a deviation of about 0.026
(``binomial_sample_size(0.5, 0.026, 1e-6, 0.99)``).
"""

import functools
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels_under_test.dropout import BLOCK_SIZE, check_dropout_args, relu_dropout  # noqa: E402
from triton_conformance.oracles.statistics import (  # noqa: E402
    agreement_expected,
    binomial_sample_size,
    binomial_test,
    bonferroni,
)

ALPHA = 1e-6  # per statistical check
N = 40_000
SEED, OTHER_SEED = 1234, 98765
RATES = (0.0, 0.1, 0.5, 0.9)


@functools.lru_cache(maxsize=None)
def inputs(dtype=torch.float32):
    # mixed signs: the ReLU matters, and the rate must not depend on the sign
    return torch.randn(N, generator=torch.Generator().manual_seed(0)).to(dtype)


@functools.lru_cache(maxsize=None)
def run(launcher, p, seed, dtype=torch.float32):
    return launcher(inputs(dtype), p, seed)


# %%
# The checks, written once and used on the real kernel and on the planted bugs.


def rate_result(launcher, p, seed=SEED):
    """Exact binomial test of the number of dropped elements among positive inputs against p."""
    x, y = inputs(), run(launcher, p, seed)
    positive = x > 0
    dropped = int((y[positive] == 0).sum())
    return binomial_test(dropped, int(positive.sum()), p, description=f"drop rate at p={p}, seed={seed}")


def value_errors(launcher, p, seed=SEED, dtype=torch.float32):
    """Indices where the output is neither exactly 0 nor relu(x)/(1-p) (float64 oracle) within a few ulps."""
    x, y = inputs(dtype), run(launcher, p, seed, dtype)
    reference = torch.relu(x.double()) / (1 - p)
    out = y.double()
    rtol = 8 * torch.finfo(dtype).eps
    kept_ok = (out - reference).abs() <= rtol * reference.abs()
    dropped_ok = (out == 0) & (reference >= 0)
    return torch.nonzero(~(kept_ok | dropped_ok)).flatten().tolist()


def agreement_result(launcher, p, seed=SEED, other=OTHER_SEED):
    """Binomial test of how often two seeds' masks agree (on positive inputs) against p^2 + (1-p)^2."""
    x = inputs()
    positive = x > 0
    first = run(launcher, p, seed)[positive] != 0
    second = run(launcher, p, other)[positive] != 0
    agree = int((first == second).sum())
    return binomial_test(agree, int(positive.sum()), agreement_expected(p), description=f"mask agreement at p={p}")


# %%
# The correct kernel passes every check.


@pytest.mark.parametrize("p", RATES)
def test_drop_rate_matches_p(p):
    result = rate_result(relu_dropout, p)
    assert not result.rejects(ALPHA), result.describe()


@pytest.mark.parametrize("p", RATES)
def test_kept_values_are_scaled_relu_and_dropped_are_exact_zeros(p):
    bad = value_errors(relu_dropout, p)
    assert not bad, f"{len(bad)} elements wrong at p={p}, first at index {bad[0]}"


def test_float16_values_and_rate():
    assert not value_errors(relu_dropout, 0.5, dtype=torch.float16)
    x, y = inputs(torch.float16), run(relu_dropout, 0.5, SEED, torch.float16)
    positive = x > 0
    result = binomial_test(int((y[positive] == 0).sum()), int(positive.sum()), 0.5)
    assert not result.rejects(ALPHA), result.describe()


def test_p_zero_is_exactly_relu():
    assert torch.equal(run(relu_dropout, 0.0, SEED), torch.relu(inputs()))


@pytest.mark.parametrize("p", RATES)
def test_same_seed_is_bitwise_reproducible(p):
    again = relu_dropout(inputs(), p, SEED)
    assert torch.equal(again.view(torch.int32), run(relu_dropout, p, SEED).view(torch.int32))


@pytest.mark.parametrize("p", RATES)
def test_another_seed_gives_an_independent_mask(p):
    if p > 0:
        assert not torch.equal(run(relu_dropout, p, SEED), run(relu_dropout, p, OTHER_SEED))
    result = agreement_result(relu_dropout, p)
    assert not result.rejects(ALPHA), result.describe()


def test_the_stated_power_needs_no_more_than_the_sample():
    positives = int((inputs() > 0).sum())
    assert binomial_sample_size(0.5, 0.026, ALPHA, 0.99) <= positives
    assert bonferroni(12 * ALPHA, 12) == pytest.approx(ALPHA)


@pytest.mark.parametrize(
    "args, error",
    [
        ((torch.zeros(4), 1.0, 0), ValueError),
        ((torch.zeros(4), -0.1, 0), ValueError),
        ((torch.zeros(4), float("nan"), 0), ValueError),
        ((torch.zeros(4), True, 0), TypeError),
        ((torch.zeros(4), 0.5, 1.5), TypeError),
        ((torch.zeros(4), 0.5, -1), ValueError),
        ((torch.zeros(4), 0.5, 2**31), ValueError),
        ((torch.zeros(4, dtype=torch.float64), 0.5, 0), TypeError),
        ((torch.zeros(4, 4).t(), 0.5, 0), ValueError),
        (([1.0, 2.0], 0.5, 0), TypeError),
    ],
    ids=["p=1", "p<0", "p=nan", "p=bool", "seed=float", "seed<0", "seed=2**31", "float64", "transposed", "list"],
)
def test_arguments_outside_the_contract_are_rejected(args, error):
    with pytest.raises(error):
        check_dropout_args(*args)
    with pytest.raises(error):
        relu_dropout(*args)


def test_empty_and_shaped_inputs():
    assert relu_dropout(torch.empty(0), 0.5, 1).shape == (0,)
    x = torch.randn(3, 5, 7)
    y = relu_dropout(x, 0.0, 1)
    assert y.shape == x.shape and torch.equal(y, torch.relu(x))


# %%
# Planted bugs: each must be caught by the check meant for it.

SCALED_BY_ONE_MINUS_P, INVERTED, SEED_IGNORED = 1, 2, 3


@triton.jit
def buggy_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BUG: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.maximum(tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32), 0.0)
    if BUG == SEED_IGNORED:
        r = tl.rand(0, offsets)
    else:
        r = tl.rand(seed, offsets)
    if BUG == INVERTED:
        keep = r < p
    else:
        keep = r >= p
    if BUG == SCALED_BY_ONE_MINUS_P:
        out = tl.where(keep, y * (1.0 - p), 0.0)
    else:
        out = tl.where(keep, y * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def buggy_launcher(bug):
    def launch(x, p, seed):
        out = torch.empty_like(x)
        grid = (triton.cdiv(x.numel(), BLOCK_SIZE),)
        buggy_kernel[grid](x, out, x.numel(), p, 1.0 / (1.0 - p), seed, BUG=bug, BLOCK_SIZE=BLOCK_SIZE)
        return out

    launch.__name__ = f"buggy_{bug}"
    return launch


scaled_by_one_minus_p = buggy_launcher(SCALED_BY_ONE_MINUS_P)
inverted = buggy_launcher(INVERTED)
seed_ignored = buggy_launcher(SEED_IGNORED)


def test_scaling_by_one_minus_p_is_caught_by_the_value_check():
    assert value_errors(scaled_by_one_minus_p, 0.1)
    assert not rate_result(scaled_by_one_minus_p, 0.1).rejects(ALPHA)  # the mask itself is right


def test_inverted_keep_is_caught_by_the_rate_check_away_from_one_half():
    assert rate_result(inverted, 0.1).rejects(ALPHA)
    # at p = 0.5 an inverted comparison drops at exactly the right rate: why the rate must vary
    assert not rate_result(inverted, 0.5).rejects(ALPHA)


def test_an_ignored_seed_is_caught_by_the_agreement_check():
    result = agreement_result(seed_ignored, 0.5)
    assert result.rejects(ALPHA) and result.statistic == 1.0, result.describe()
    assert not rate_result(seed_ignored, 0.5).rejects(ALPHA)
