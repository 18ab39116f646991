"""The statistics behind stochastic cells, checked against independent computations.

Reference values come from brute-force sums of ``math.comb`` probabilities,
closed forms of the chi-square survival function, printed tables (chi-square,
Kolmogorov, normal), R's ``binom.test`` documentation example, and small
torch simulations for the power of the sample-size formula.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_conformance.oracles.planning import (
    agreement_expected,
    binomial_power,
    binomial_sample_size,
    bonferroni,
    normal_quantile,
)
from triton_conformance.oracles.statistics import (
    StatResult,
    binomial_test,
    chi_square_uniformity,
    gamma_q,
    kolmogorov_q,
    ks_uniform,
)


def brute_force_p_value(k, n, p):
    """Two-sided exact p-value by enumerating every outcome with exact integer binomial coefficients."""
    pmf = [math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    return min(1.0, sum(q for q in pmf if q <= pmf[k] * (1 + 1e-7)))


# %% binomial_test


@pytest.mark.parametrize("p", [0.01, 0.1, 0.25, 0.5, 0.6, 0.9, 0.99])
def test_binomial_matches_brute_force_for_small_n(p):
    for n in range(1, 41):
        for k in range(n + 1):
            expected = brute_force_p_value(k, n, p)
            got = binomial_test(k, n, p).p_value
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-300), (k, n, p)


@pytest.mark.parametrize(
    "k, n, p, expected",
    [
        (682, 925, 0.75, 0.3825),  # R's ?binom.test example (Mendel's peas): p-value = 0.3825
        (0, 10, 0.5, 2 / 1024),  # only 0 and 10 are as unlikely
        (9, 10, 0.5, 22 / 1024),  # 0, 1, 9, 10
        (5, 10, 0.5, 1.0),
    ],
    ids=["R-mendel", "0-of-10", "9-of-10", "mode"],
)
def test_binomial_textbook_values(k, n, p, expected):
    assert binomial_test(k, n, p).p_value == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize("p, certain", [(0.0, 0), (1.0, 50)])
def test_binomial_degenerate_p_is_exact(p, certain):
    assert binomial_test(certain, 50, p).p_value == 1.0
    for k in (0, 1, 25, 49, 50):
        if k != certain:
            assert binomial_test(k, 50, p).p_value == 0.0


def test_binomial_large_n_is_fast_symmetric_and_near_the_normal_limit():
    n, p = 10_000_000, 0.3
    sd = math.sqrt(n * p * (1 - p))
    k = round(n * p + 3 * sd)
    result = binomial_test(k, n, p)
    # the normal limit is accurate to well under 1% of the p-value at this n
    assert result.p_value == pytest.approx(math.erfc(3 / math.sqrt(2)), rel=0.02)
    assert binomial_test(4_980_000, n, 0.5).p_value == binomial_test(n - 4_980_000, n, 0.5).p_value
    assert binomial_test(4_980_000, n, 0.5).p_value < 1e-30


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), p=st.floats(0.001, 0.999), data=st.data())
def test_binomial_p_value_falls_as_k_moves_away_from_the_mode(n, p, data):
    mode = min(n, math.floor((n + 1) * p))
    k = data.draw(st.integers(0, n))
    step = -1 if k <= mode else 1
    if not 0 <= k + step <= n:
        return
    here, further = binomial_test(k, n, p).p_value, binomial_test(k + step, n, p).p_value
    assert 0 <= further <= here <= 1


def test_binomial_result_describes_itself():
    result = binomial_test(30, 100, 0.5, description="drop rate at p=0.5")
    assert isinstance(result, StatResult)
    assert result.statistic == 0.3 and result.expected == 0.5 and result.n == 100
    assert result.rejects(1e-3) and not result.rejects(1e-6)
    text = result.describe()
    assert "drop rate at p=0.5" in text and "p-value=" in text and "n=100" in text
    with pytest.raises(AttributeError):
        result.p_value = 1.0  # frozen


@pytest.mark.parametrize(
    "args, error",
    [((11, 10, 0.5), ValueError), ((1, 10, 1.5), ValueError), ((True, 10, 0.5), TypeError), ((1, 10.0, 0.5), TypeError)],
    ids=["k>n", "p>1", "bool-k", "float-n"],
)
def test_binomial_rejects_bad_arguments(args, error):
    with pytest.raises(error):
        binomial_test(*args)


# %% chi-square


@pytest.mark.parametrize(
    "dof, x, tail",
    [(1, 3.841, 0.05), (2, 5.991, 0.05), (5, 15.086, 0.01), (10, 18.307, 0.05), (30, 43.773, 0.05), (100, 124.342, 0.05)],
)
def test_gamma_q_matches_chi_square_tables(dof, x, tail):
    assert gamma_q(dof / 2, x / 2) == pytest.approx(tail, rel=1e-3)


@settings(max_examples=80, deadline=None)
@given(a=st.integers(1, 60), x=st.floats(0, 200))
def test_gamma_q_matches_the_poisson_sum_for_integer_a(a, x):
    # Q(a, x) = P(Poisson(x) < a) for integer a
    expected = math.fsum(math.exp(-x + j * math.log(x) - math.lgamma(j + 1)) if x > 0 else float(j == 0) for j in range(a))
    assert gamma_q(a, x) == pytest.approx(expected, rel=1e-9, abs=1e-250)


@settings(max_examples=50, deadline=None)
@given(x=st.floats(1e-6, 100))
def test_gamma_q_half_matches_erfc(x):
    # chi-square with 1 dof: P(X > x) = erfc(sqrt(x / 2))
    assert gamma_q(0.5, x / 2) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-9, abs=1e-250)


def test_chi_square_uniformity_worked_example():
    result = chi_square_uniformity([10, 20, 30])  # E = 20 each: X = (100 + 0 + 100) / 20 = 10, 2 dof
    assert result.statistic == pytest.approx(10.0)
    assert result.expected == 2.0 and result.n == 60
    assert result.p_value == pytest.approx(math.exp(-5))
    assert chi_square_uniformity([25, 75], [0.25, 0.75]).p_value == pytest.approx(1.0)
    assert chi_square_uniformity(torch.tensor([10, 20, 30])).statistic == pytest.approx(10.0)


def test_chi_square_accepts_uniform_bins_and_rejects_a_biased_bin():
    u = torch.rand(50_000, generator=torch.Generator().manual_seed(5))
    counts = torch.bincount((u * 32).long(), minlength=32)
    assert chi_square_uniformity(counts).p_value > 1e-4
    counts[0] += 400  # one bin 25% heavy (10 sd of its count): the kind of position bias a rate test misses
    assert chi_square_uniformity(counts).p_value < 1e-6


def test_chi_square_refuses_what_its_limit_does_not_cover():
    with pytest.raises(ValueError, match="expected count"):
        chi_square_uniformity([1, 2, 3])
    with pytest.raises(ValueError, match="sum"):
        chi_square_uniformity([50, 50], [0.5, 0.6])
    with pytest.raises(ValueError, match="at least 2"):
        chi_square_uniformity([50])


# %% Kolmogorov-Smirnov


@pytest.mark.parametrize("lam, tail", [(1.224, 0.10), (1.358, 0.05), (1.628, 0.01), (0.828, 0.5)])
def test_kolmogorov_q_matches_tables(lam, tail):
    assert kolmogorov_q(lam) == pytest.approx(tail, rel=5e-3)


def test_kolmogorov_q_is_continuous_where_it_switches_series():
    assert kolmogorov_q(1 - 1e-12) == pytest.approx(kolmogorov_q(1.0), rel=1e-9)


def test_ks_exact_distance_on_a_tiny_sample():
    assert ks_uniform([0.5]).statistic == 0.5
    assert ks_uniform([0.25, 0.75]).statistic == pytest.approx(0.25)


def test_ks_accepts_uniform_and_rejects_skewed_samples():
    u = torch.rand(20_000, generator=torch.Generator().manual_seed(1234), dtype=torch.float64)
    assert ks_uniform(u).p_value > 1e-3
    assert ks_uniform(u * 0.98 + 0.02).p_value < 1e-6  # shifted by 2%
    assert ks_uniform(u**1.05).p_value < 1e-6


# %% planning: alpha and sample sizes


def test_bonferroni():
    assert bonferroni(1e-6, 20) == pytest.approx(5e-8)
    with pytest.raises(ValueError):
        bonferroni(1e-6, 0)
    with pytest.raises(ValueError):
        bonferroni(1.0, 3)


@pytest.mark.parametrize("q, z", [(0.5, 0.0), (0.975, 1.959964), (0.995, 2.575829), (0.8, 0.841621), (1e-9, -5.997807)])
def test_normal_quantile_matches_tables(q, z):
    assert normal_quantile(q) == pytest.approx(z, abs=1e-6)


def test_sample_size_starts_from_the_textbook_value_and_reaches_exact_power():
    # normal formula: ((1.96 * 0.5 + 0.8416 * sqrt(0.24)) / 0.1)^2 = 193.9, whose exact power is only 0.764
    assert binomial_power(194, 0.5, 0.4, 0.05) == pytest.approx(0.764, abs=1e-3)
    n = binomial_sample_size(0.5, 0.1, 0.05, 0.8)
    assert 194 <= n <= 1.1 * 194
    for p1 in (0.4, 0.6):
        assert binomial_power(n, 0.5, p1, 0.05) >= 0.8


@pytest.mark.parametrize("n, p0, p1, alpha", [(194, 0.5, 0.6, 0.05), (300, 0.1, 0.15, 0.01), (50, 0.9, 0.7, 1e-3), (80, 0.3, 0.3, 0.05)])
def test_binomial_power_matches_brute_force(n, p0, p1, alpha):
    expected = math.fsum(
        math.comb(n, k) * p1**k * (1 - p1) ** (n - k) for k in range(n + 1) if brute_force_p_value(k, n, p0) < alpha
    )
    assert binomial_power(n, p0, p1, alpha) == pytest.approx(expected, rel=1e-9)


def test_sample_size_reaches_the_stated_power_by_simulation():
    p0, delta, alpha, power = 0.5, 0.01, 1e-6, 0.99
    n = binomial_sample_size(p0, delta, alpha, power)
    assert 120_000 < n < 140_000  # about 130k: the figure a README would quote
    gen = torch.Generator().manual_seed(7)
    draws = torch.binomial(torch.full((300,), float(n)), torch.full((300,), p0 + delta), generator=gen)
    rejected = sum(binomial_test(int(k), n, p0).p_value < alpha for k in draws.tolist())
    # with true power 0.99, 300 runs give >= 289 rejections except with probability ~1e-3
    assert rejected >= 289, rejected
    # and under the null the test almost never rejects
    draws = torch.binomial(torch.full((300,), float(n)), torch.full((300,), p0), generator=gen)
    assert sum(binomial_test(int(k), n, p0).p_value < alpha for k in draws.tolist()) == 0


def test_sample_size_at_p0_zero_is_exact():
    n = binomial_sample_size(0.0, 0.01, 1e-6, 0.99)
    assert 0.99**n <= 0.01 < 0.99 ** (n - 1)


def test_sample_size_grows_with_power_and_shrinks_with_delta():
    assert binomial_sample_size(0.1, 0.01, 1e-6, 0.999) > binomial_sample_size(0.1, 0.01, 1e-6, 0.9)
    assert binomial_sample_size(0.1, 0.02, 1e-6, 0.9) < binomial_sample_size(0.1, 0.01, 1e-6, 0.9)


# %% agreement


@pytest.mark.parametrize("p, expected", [(0.0, 1.0), (0.5, 0.5), (1.0, 1.0), (0.1, 0.82)])
def test_agreement_expected(p, expected):
    assert agreement_expected(p) == pytest.approx(expected)


def test_agreement_expected_matches_simulated_independent_masks():
    gen = torch.Generator().manual_seed(3)
    p, n = 0.3, 50_000
    a, b = torch.rand(n, generator=gen) >= p, torch.rand(n, generator=gen) >= p
    agree = int((a == b).sum())
    assert binomial_test(agree, n, agreement_expected(p)).p_value > 1e-4


@pytest.mark.parametrize("alpha", [0.05, 1e-3, 1e-6])
@pytest.mark.parametrize("n, p0", [(20, 0.5), (200, 0.1), (5000, 0.9), (130_000, 0.5), (1_000_000, 0.01)])
def test_the_binomial_test_never_exceeds_its_level(n, p0, alpha):
    # validity: under the null the exact test rejects with probability at most alpha
    assert binomial_power(n, p0, p0, alpha) <= alpha
