"""Statistical tests for stochastic subjects, with the standard library only.

Every test returns a :class:`StatResult` (statistic, expected, p-value, n and a
one-line description) so that a failing cell can print what it saw, what it
expected and how surprising that is. A check fails when ``p_value < alpha``,
where ``alpha`` is the per-check false-positive rate (see :func:`bonferroni`).

The tests are exact where that is cheap (the binomial test) and otherwise use
the classical large-sample distributions whose validity conditions are stated
in each docstring (Pearson chi-square, Kolmogorov-Smirnov). No scipy: CI does
not promise it, and the few special functions needed fit in a page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

__all__ = [
    "StatResult",
    "check_count",
    "check_probability",
    "log_tail",
    "binomial_homogeneity",
    "binomial_test",
    "count_normal_test",
    "grouped_counts_test",
    "poisson_binomial_test",
    "chi_square_uniformity",
    "gamma_q",
    "kolmogorov_q",
    "ks_uniform",
]

# Outcomes whose log-probability is within this of the observed one count as
# "as likely" (lgamma's rounding at n ~ 1e7 is about 1e-8 in log space).
_LOG_TIE = 1e-7
# Tail sums stop once the geometric bound on what is left is this small, relatively.
_TAIL_EPS = 1e-17


@dataclass(frozen=True, slots=True)
class StatResult:
    """The outcome of one test: reject the model at level ``alpha`` when ``p_value < alpha``."""

    test: str  # "binomial", "chi-square", "ks"
    statistic: float  # what was observed (a rate, a chi-square value, a KS distance)
    expected: float  # its value under the model (a probability, or the statistic's mean)
    p_value: float
    n: int  # number of trials or samples behind the statistic
    description: str = ""  # what was tested, for the failure message

    def rejects(self, alpha: float) -> bool:
        return self.p_value < alpha

    def describe(self) -> str:
        what = f"{self.description}: " if self.description else ""
        return (
            f"{what}{self.test} test, observed {self.statistic:.6g}, expected {self.expected:.6g}, "
            f"n={self.n}, p-value={self.p_value:.3g}"
        )


def check_probability(name, value, *, open_low=False, open_high=False):
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name}={value!r}, expected a real number")
    value = float(value)
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{name}={value!r}, expected a probability in {interval}")
    return value


def check_count(name, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name}={value!r}, expected an int")
    if value < minimum:
        raise ValueError(f"{name}={value!r}, expected an int >= {minimum}")
    return int(value)


# %% Binomial ---------------------------------------------------------------


def _log_pmf(j, n, p):
    return math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * math.log(p) + (n - j) * math.log1p(-p)


def log_tail(start, n, p, step):
    """log P(X = start) + log of the sum of P(X = j)/P(X = start) walking from ``start`` by ``step`` (+1 or -1).

    Assumes the walk moves away from the mode, so the ratio of successive terms
    is at most 1 and shrinks (the pmf is log-concave); the sum stops when the
    geometric bound ``term * r / (1 - r)`` on the remainder is negligible.
    """
    total, term, j = 1.0, 1.0, start
    while 0 <= j + step <= n:
        if step < 0:
            ratio = j * (1 - p) / ((n - j + 1) * p)  # P(j-1) / P(j)
        else:
            ratio = (n - j) * p / ((j + 1) * (1 - p))  # P(j+1) / P(j)
        term *= ratio
        total += term
        j += step
        if ratio < 1 and term * ratio / (1 - ratio) < _TAIL_EPS * total:
            break
    return _log_pmf(start, n, p) + math.log(total)


def binomial_test(k, n, p, description=""):
    """Exact two-sided binomial test of ``k`` successes in ``n`` trials against success probability ``p``.

    The p-value is the total probability, under Binomial(n, p), of every
    outcome no more likely than the observed one (the "minimum likelihood"
    definition used by R's ``binom.test``; ties within a relative 1e-7 count as
    equally likely). It is computed in log space with ``math.lgamma``, and each
    tail is summed outwards from its inner end only until the remainder is
    negligible, so ``n`` up to about 1e7 costs milliseconds.

    ``p = 0`` and ``p = 1`` are exact: the only possible outcome (``k = 0``,
    respectively ``k = n``) has p-value 1, every other outcome p-value 0.
    """
    n = check_count("n", n)
    k = check_count("k", k)
    if k > n:
        raise ValueError(f"k={k}, expected 0 <= k <= n={n}")
    p = check_probability("p", p)
    rate = k / n if n else p

    def result(p_value):
        return StatResult("binomial", rate, p, min(1.0, p_value), n, description)

    if n == 0:
        return result(1.0)
    if p == 0.0 or p == 1.0:
        certain = 0 if p == 0.0 else n
        return result(1.0 if k == certain else 0.0)
    mode = min(n, math.floor((n + 1) * p))  # the pmf rises up to mode and falls after it
    if k == mode:
        return result(1.0)
    threshold = _log_pmf(k, n, p) + _LOG_TIE
    if k < mode:
        near = log_tail(k, n, p, -1)
        # the first outcome past the mode that is no more likely than k (binary search: pmf falls there)
        lo, hi = mode, n + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if _log_pmf(mid, n, p) <= threshold:
                hi = mid
            else:
                lo = mid + 1
        far = log_tail(lo, n, p, +1) if lo <= n else -math.inf
    else:
        near = log_tail(k, n, p, +1)
        # the last outcome before the mode that is no more likely than k (pmf rises there)
        lo, hi = -1, mode
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _log_pmf(mid, n, p) <= threshold:
                lo = mid
            else:
                hi = mid - 1
        far = log_tail(lo, n, p, -1) if lo >= 0 else -math.inf
    return result(math.exp(near) + math.exp(far))


# %% Chi-square -------------------------------------------------------------


def gamma_q(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a), for a > 0, x >= 0.

    Below ``x = a + 1`` the power series of P(a, x) converges fast and Q = 1 - P;
    above it the continued fraction for Q converges fast (evaluated with the
    modified Lentz method), so neither is asked to do what it does badly.
    """
    if a <= 0 or x < 0:
        raise ValueError(f"gamma_q(a={a!r}, x={x!r}), expected a > 0 and x >= 0")
    if x == 0:
        return 1.0
    log_prefactor = a * math.log(x) - x - math.lgamma(a)  # log(x^a e^-x / Gamma(a))
    if x < a + 1:
        # P(a, x) = x^a e^-x / Gamma(a + 1) * sum_k x^k / ((a+1)...(a+k))
        term = total = 1.0 / a
        denominator = a
        for _ in range(10_000):
            denominator += 1
            term *= x / denominator
            total += term
            if term < total * 1e-17:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefactor))
    # Q(a, x) = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1(1-a) / (x + 3 - a - 2(2-a) / (x + 5 - a - ...)))
    tiny = 1e-300
    b = x + 1 - a
    c = 1.0 / tiny
    d = 1.0 / b
    fraction = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        fraction *= delta
        if abs(delta - 1) < 1e-16:
            break
    return math.exp(log_prefactor) * fraction


def chi_square_uniformity(counts, expected_probs=None, description=""):
    """Pearson's chi-square goodness-of-fit test of ``counts`` against category probabilities ``expected_probs``.

    ``counts`` are the observed counts of k >= 2 categories; ``expected_probs``
    (default: all equal) must be positive and sum to 1. The statistic
    ``X = sum (O - E)^2 / E`` is referred to the chi-square distribution with
    k - 1 degrees of freedom: p-value = Q((k - 1)/2, X/2). That limit is
    reliable when every expected count is at least 5, so smaller ones are
    refused (pool categories or take more samples). ``expected`` in the result
    is the statistic's mean under the model, k - 1.
    """
    counts = counts.tolist() if hasattr(counts, "tolist") else counts  # a tensor, e.g. from torch.bincount
    counts = [check_count("counts[i]", c) for c in counts]
    k = len(counts)
    if k < 2:
        raise ValueError(f"len(counts)={k}, expected at least 2 categories")
    if expected_probs is None:
        expected_probs = [1.0 / k] * k
    expected_probs = expected_probs.tolist() if hasattr(expected_probs, "tolist") else expected_probs
    probs = [check_probability("expected_probs[i]", q, open_low=True) for q in expected_probs]
    if len(probs) != k:
        raise ValueError(f"len(expected_probs)={len(probs)}, expected len(counts)={k}")
    if abs(math.fsum(probs) - 1) > 1e-9:
        raise ValueError(f"sum(expected_probs)={math.fsum(probs)!r}, expected 1")
    total = sum(counts)
    expected = [total * q for q in probs]
    if min(expected) < 5:
        raise ValueError(f"smallest expected count={min(expected):.3g}, expected >= 5 for the chi-square limit to hold")
    statistic = math.fsum((o - e) ** 2 / e for o, e in zip(counts, expected))
    p_value = gamma_q((k - 1) / 2, statistic / 2)
    return StatResult("chi-square", statistic, float(k - 1), p_value, total, description)


def binomial_homogeneity(events, trials, p, description=""):
    """Chi-square test that every group's event count is Binomial(trials[g], p) with one known ``p``.

    ``X = sum_g (k_g - n_g p)^2 / (n_g p (1 - p))`` over the G groups with
    trials is referred to the chi-square distribution with G degrees of
    freedom (p is known, not estimated).  It detects a rate that differs
    between groups (rows, positions within a block, value bins) even when the
    overall rate is right.  Valid when each n_g p (1 - p) is at least about 5;
    smaller groups are refused.  ``p`` must lie strictly inside (0, 1).
    """
    events = events.tolist() if hasattr(events, "tolist") else list(events)
    trials = trials.tolist() if hasattr(trials, "tolist") else list(trials)
    if len(events) != len(trials):
        raise ValueError(f"len(events)={len(events)}, expected len(trials)={len(trials)}")
    p = check_probability("p", p, open_low=True, open_high=True)
    pairs = [(check_count("events[g]", k), check_count("trials[g]", n)) for k, n in zip(events, trials)]
    if any(k > n for k, n in pairs):
        raise ValueError("events[g] > trials[g] for some group, expected at most as many events as trials")
    return grouped_counts_test([k for k, _ in pairs], [n * p for _, n in pairs],
                               [n * p * (1 - p) for _, n in pairs], description)


def grouped_counts_test(observed, means, variances, description=""):
    """Chi-square test of group counts against known means and variances: sum (O - E)^2 / V over G groups.

    Each group's count is a sum of independent Bernoulli events (their
    probabilities may differ), so it is close to normal once its variance is
    at least about 5, and the statistic is then close to chi-square with G
    degrees of freedom.  Groups with zero variance must match exactly and are
    left out; groups with a smaller variance are refused.
    """
    observed, means, variances = (v.tolist() if hasattr(v, "tolist") else list(v) for v in (observed, means, variances))
    if not len(observed) == len(means) == len(variances):
        raise ValueError(f"lengths {len(observed)}, {len(means)}, {len(variances)}, expected equal lengths")
    groups = [(o, e, v) for o, e, v in zip(observed, means, variances) if v > 0]
    if len(groups) < 2:
        raise ValueError(f"{len(groups)} groups with a positive variance, expected at least 2")
    smallest = min(v for _, _, v in groups)
    if smallest < 5:
        raise ValueError(f"smallest group variance={smallest:.3g}, expected >= 5 for the chi-square limit to hold")
    statistic = math.fsum((o - e) ** 2 / v for o, e, v in groups)
    df = len(groups)
    n = round(math.fsum(e for _, e, _ in groups))
    return StatResult("chi-square", statistic, float(df), gamma_q(df / 2, statistic / 2), n, description)


def poisson_binomial_test(k, probabilities, description=""):
    """Two-sided test of ``k`` events among independent Bernoulli trials with the given probabilities.

    Equal probabilities make it the exact :func:`binomial_test`.  Otherwise
    the count's distribution (Poisson-binomial) is replaced by the normal with
    its mean sum(p) and variance sum(p (1 - p)), with a continuity correction:
    accurate when that variance is large (a few hundred or more, as in the
    designed cells).  ``statistic`` and ``expected`` are rates: k / n and mean / n.
    """
    probs = probabilities.tolist() if hasattr(probabilities, "tolist") else list(probabilities)
    k = check_count("k", k)
    n = len(probs)
    if k > n:
        raise ValueError(f"k={k}, expected 0 <= k <= n={n}")
    if n == 0:
        return StatResult("binomial", 0.0, 0.0, 1.0, 0, description)
    if max(probs) - min(probs) < 1e-12:
        return binomial_test(k, n, probs[0], description)
    return count_normal_test(k, n, math.fsum(probs), math.fsum(q * (1 - q) for q in probs), description)


def count_normal_test(k, n, mean, variance, description=""):
    """Two-sided test of a count ``k`` of ``n`` independent Bernoulli trials whose sum has the given
    ``mean`` and ``variance``, by the normal approximation with a continuity correction.

    The form of :func:`poisson_binomial_test` for callers that sum the
    probabilities themselves (e.g. on tensors).  Zero variance means the
    count is certain.
    """
    k = check_count("k", k)
    n = check_count("n", n)
    if n == 0:
        return StatResult("poisson-binomial", 0.0, 0.0, 1.0, 0, description)
    if variance <= 0:
        return StatResult("poisson-binomial", k / n, mean / n, 1.0 if k == round(mean) else 0.0, n, description)
    z = max(0.0, abs(k - mean) - 0.5) / math.sqrt(variance)
    return StatResult("poisson-binomial", k / n, mean / n, min(1.0, math.erfc(z / math.sqrt(2))), n, description)


# %% Kolmogorov-Smirnov -----------------------------------------------------


def kolmogorov_q(lam):
    """P(K > lam) for the Kolmogorov distribution: 2 sum_{j>=1} (-1)^(j-1) exp(-2 j^2 lam^2).

    For small ``lam`` that alternating series converges slowly, so there the
    equivalent theta-function form 1 - sqrt(2 pi)/lam sum exp(-(2j-1)^2 pi^2 / (8 lam^2))
    is used instead; both converge within a handful of terms on their side.
    """
    if lam <= 0:
        return 1.0
    if lam < 1.0:
        s = sum(math.exp(-((2 * j - 1) ** 2) * math.pi**2 / (8 * lam * lam)) for j in range(1, 8))
        return min(1.0, max(0.0, 1.0 - math.sqrt(2 * math.pi) / lam * s))
    s = sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return min(1.0, max(0.0, 2 * s))


def ks_uniform(samples, description=""):
    """One-sample Kolmogorov-Smirnov test of ``samples`` against U(0, 1).

    ``D = sup |F_n(u) - u|`` over the empirical CDF ``F_n`` (values outside
    [0, 1] are allowed and count as far from uniform). The p-value is the
    asymptotic Kolmogorov distribution at ``(sqrt(n) + 0.12 + 0.11/sqrt(n)) * D``
    (Stephens' small-sample correction), accurate to a few percent of the
    p-value from n of about 30 up. ``samples`` is any sequence of reals or a
    tensor (anything with ``tolist``). ``expected`` is D's asymptotic mean,
    sqrt(pi/2) ln 2 / sqrt(n).
    """
    values = samples.tolist() if hasattr(samples, "tolist") else list(samples)
    if values and isinstance(values[0], list):
        raise ValueError("samples must be one-dimensional")
    n = len(values)
    if n == 0:
        raise ValueError("samples is empty, expected at least one value")
    if any(v != v for v in values):
        raise ValueError("samples contains NaN")
    values.sort()
    d = 0.0
    for i, v in enumerate(values):
        cdf = min(1.0, max(0.0, v))
        d = max(d, (i + 1) / n - cdf, cdf - i / n)
    root = math.sqrt(n)
    p_value = kolmogorov_q((root + 0.12 + 0.11 / root) * d)
    return StatResult("ks", d, math.sqrt(math.pi / 2) * math.log(2) / root, p_value, n, description)
