"""Planning the statistical checks: error rates split over a run, sample sizes with a stated power.

The tests themselves are in :mod:`.statistics`; this module decides how
many checks a run makes, at what level each, and how large a sample each
needs to detect the stated deviation.
"""

from __future__ import annotations

import math

from triton_conformance.oracles.statistics import binomial_test, check_count, check_probability, log_tail

__all__ = ["agreement_expected", "binomial_power", "binomial_sample_size", "bonferroni", "normal_quantile"]


def bonferroni(alpha_per_run, n_checks):
    """The per-check level that keeps the whole run's false-positive rate at most ``alpha_per_run``.

    ``alpha_per_run / n_checks``: by the union bound, P(any of n_checks true
    models is rejected) <= sum of the per-check rates, whatever the dependence
    between the checks.
    """
    alpha_per_run = check_probability("alpha_per_run", alpha_per_run, open_low=True, open_high=True)
    n_checks = check_count("n_checks", n_checks, minimum=1)
    return alpha_per_run / n_checks


def normal_quantile(q):
    """The z with P(Z <= z) = q for a standard normal Z, by bisection on ``math.erfc`` (exact to about 1e-15)."""
    q = check_probability("q", q, open_low=True, open_high=True)
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < q:  # P(Z <= mid); erfc keeps the lower tail accurate
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return (lo + hi) / 2


def binomial_sample_size(p0, delta, alpha, power):
    """Trials needed for a two-sided level-``alpha`` :func:`binomial_test` of p = p0 to reject, with
    probability at least ``power``, when the true rate is p0 - delta or p0 + delta.

    For 0 < p0 < 1 the start is the normal-approximation formula

        n = ((z_{1-alpha/2} sqrt(p0 (1-p0)) + z_{power} sqrt(p1 (1-p1))) / delta)^2,

    maximised over the alternatives p1 = p0 +- delta that lie in [0, 1]. The
    exact test is discrete and can fall a few percent short of that power at
    small n (0.76 instead of 0.80 at p0 = 0.5, delta = 0.1, alpha = 0.05), so n
    is then raised by 2% at a time until :func:`binomial_power` confirms the
    power for every alternative. Power only grows as the deviation grows past
    delta; as a function of n it saw-tooths slightly, so the guarantee is for
    the n returned.

    At p0 = 0 (or 1) any success (failure) is rejected outright, so the exact
    answer is the least n with (1 - delta)^n <= 1 - power.
    """
    p0 = check_probability("p0", p0)
    delta = check_probability("delta", delta, open_low=True)
    alpha = check_probability("alpha", alpha, open_low=True, open_high=True)
    power = check_probability("power", power, open_low=True, open_high=True)
    alternatives = [p1 for p1 in (p0 - delta, p0 + delta) if 0 <= p1 <= 1]
    if not alternatives:
        raise ValueError(f"delta={delta!r}, expected p0 - delta >= 0 or p0 + delta <= 1 (p0={p0!r})")
    if p0 in (0.0, 1.0):
        return max(1, math.ceil(math.log1p(-power) / math.log1p(-delta)))
    z_alpha = normal_quantile(1 - alpha / 2)
    z_power = normal_quantile(power)
    sizes = [
        ((z_alpha * math.sqrt(p0 * (1 - p0)) + z_power * math.sqrt(p1 * (1 - p1))) / delta) ** 2 for p1 in alternatives
    ]
    n = max(1, math.ceil(max(sizes)))
    for _ in range(200):
        if min(binomial_power(n, p0, p1, alpha) for p1 in alternatives) >= power:
            break
        n = math.ceil(n * 1.02) + 1
    return n


def _rejection_region(n, p0, alpha):
    """(lower, upper): binomial_test(k, n, p0) rejects exactly when k <= lower or k >= upper.

    The p-value rises monotonically towards the mode from either side, so each
    boundary is a binary search; lower = -1 or upper = n + 1 when that side never rejects.
    """
    rejects = lambda k: binomial_test(k, n, p0).p_value < alpha  # noqa: E731
    mode = min(n, math.floor((n + 1) * p0))
    lo, hi = -1, mode  # the largest rejecting k at or below the mode
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid - 1)
    lower = lo
    lo, hi = mode, n + 1  # the smallest rejecting k at or above the mode
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rejects(mid) else (mid + 1, hi)
    return lower, lo


def _tail_probability(n, p, k, below):
    """P(X <= k) if ``below`` else P(X >= k), for X ~ Binomial(n, p), summed from the side away from the mode."""
    if below and k < 0 or not below and k > n:
        return 0.0
    if below and k >= n or not below and k <= 0:
        return 1.0
    if p in (0.0, 1.0):
        certain = 0 if p == 0.0 else n
        return float(certain <= k if below else certain >= k)
    mode = min(n, math.floor((n + 1) * p))
    if below:
        return math.exp(log_tail(k, n, p, -1)) if k <= mode else 1 - math.exp(log_tail(k + 1, n, p, +1))
    return math.exp(log_tail(k, n, p, +1)) if k >= mode else 1 - math.exp(log_tail(k - 1, n, p, -1))


def binomial_power(n, p0, p1, alpha):
    """Exact power of :func:`binomial_test` at level ``alpha``: P(p-value < alpha) when X ~ Binomial(n, p1).

    Finds the test's rejection region by binary search and sums its
    probability under p1, so it costs a few dozen tests whatever n is.
    """
    n = check_count("n", n, minimum=1)
    p0 = check_probability("p0", p0)
    p1 = check_probability("p1", p1)
    alpha = check_probability("alpha", alpha, open_low=True, open_high=True)
    if p0 in (0.0, 1.0):  # every outcome but the certain one rejects
        return 1.0 - (1.0 - p1) ** n if p0 == 0.0 else 1.0 - p1**n
    lower, upper = _rejection_region(n, p0, alpha)
    if lower >= upper:
        return 1.0
    total = _tail_probability(n, p1, lower, True) + _tail_probability(n, p1, upper, False)
    return min(1.0, max(0.0, total))


def agreement_expected(p):
    """P(two independent keep-masks agree at one element) when each drops with probability p: p^2 + (1-p)^2."""
    p = check_probability("p", p)
    return p * p + (1 - p) * (1 - p)
